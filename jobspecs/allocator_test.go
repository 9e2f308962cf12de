package jobspecs

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"
	"github.com/hashicorp/nomad/jobspec2"
)

// parse reads name from FS with Nomad's own HCL2 jobspec parser, as `nomad job run` does.
func parse(t *testing.T, name string, vars ...string) *api.Job {
	t.Helper()
	src, err := FS.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	job, err := jobspec2.ParseWithConfig(&jobspec2.ParseConfig{Path: name, Body: src, ArgVars: vars, Strict: true})
	if err != nil {
		t.Fatalf("parsing %s with %q: %v", name, vars, err)
	}
	return job
}

func TestAllocatorJobspec(t *testing.T) {
	job := parse(t, Allocator)
	if *job.ID != "fft-allocator" || *job.Type != api.JobTypeService || *job.NodePool != "default" {
		t.Fatalf("job %q type %q pool %q, want the service fft-allocator in pool default", *job.ID, *job.Type, *job.NodePool)
	}
	if len(job.TaskGroups) != 1 {
		t.Fatalf("%d groups, want 1", len(job.TaskGroups))
	}
	g := job.TaskGroups[0]
	if *g.Count != 2 {
		t.Errorf("count %d, want 2 replicas", *g.Count)
	}
	if !slices.ContainsFunc(g.Constraints, func(c *api.Constraint) bool { return c.Operand == api.ConstraintDistinctHosts && c.RTarget == "true" }) {
		t.Errorf("no distinct_hosts constraint: %+v", g.Constraints)
	}
	if u := g.Update; u == nil || *u.MaxParallel != 1 || *u.HealthCheck != "checks" || !*u.AutoRevert {
		t.Errorf("update %+v: want one at a time, healthy by checks, auto-revert", u)
	}
	if r := g.RestartPolicy; r == nil || *r.Attempts != 3 || *r.Mode != "fail" {
		t.Errorf("restart %+v: want 3 attempts, then fail (reschedule)", r)
	}
	if len(g.Services) != 1 {
		t.Fatalf("%d services, want 1", len(g.Services))
	}
	svc := g.Services[0]
	if svc.Name != "fft-allocator" || svc.Provider != "consul" || svc.PortLabel != "http" || len(svc.Checks) != 1 {
		t.Fatalf("service %+v: want fft-allocator in Consul on port http with one check", svc)
	}
	if c := svc.Checks[0]; c.Type != "http" || c.Protocol != "http" || c.TLSSkipVerify || c.Path != "/v1/health" || c.PortLabel != "" {
		t.Errorf("check %+v: want plain HTTP on /v1/health (the service's port)", c)
	}
	if len(g.Networks) != 1 || len(g.Networks[0].DynamicPorts) != 1 || g.Networks[0].DynamicPorts[0].Label != "http" {
		t.Errorf("networks %+v: want one dynamic port http", g.Networks)
	}

	task := g.Tasks[0]
	var words []string
	for _, a := range task.Config["args"].([]any) {
		words = append(words, fmt.Sprint(a))
	}
	joined := strings.Join(words, " ")
	for _, want := range []string{"-http-addr ${NOMAD_ADDR_http}", "-id ${NOMAD_ALLOC_ID}", "-round 300s", "-node-pool gpu", "-log-json"} {
		if !strings.Contains(joined, want) {
			t.Errorf("args %q lack %q", joined, want)
		}
	}
	if task.Config["command"] != "/usr/local/bin/fft-allocator" || len(task.Artifacts) != 0 {
		t.Errorf("command %v, %d artifacts: want the client's binary and no artifact by default", task.Config["command"], len(task.Artifacts))
	}
	if len(task.Templates) != 1 {
		t.Fatalf("%d templates, want the tokens template", len(task.Templates))
	}
	tpl := task.Templates[0]
	data := *tpl.EmbeddedTmpl
	if !*tpl.Envvars || !strings.HasPrefix(*tpl.DestPath, "secrets/") || *tpl.ChangeMode != "restart" ||
		!strings.Contains(data, `nomadVar "nomad/jobs/fft-allocator"`) || !strings.Contains(data, "NOMAD_TOKEN=") || !strings.Contains(data, "CONSUL_HTTP_TOKEN=") {
		t.Errorf("template %s (env %v, change %s):\n%s\nwant NOMAD_TOKEN and CONSUL_HTTP_TOKEN from the job's variable into secrets/ as env",
			*tpl.DestPath, *tpl.Envvars, *tpl.ChangeMode, data)
	}
	if strings.Contains(string(mustRead(t, Allocator)), "token =") {
		t.Errorf("the jobspec holds a token; tokens come from Nomad Variables")
	}
}

func TestAllocatorJobspecFromRelease(t *testing.T) {
	job := parse(t, Allocator, "artifact_url=https://releases.example.com/nomad-fft", "version=0.2.0", "count=3", "driver=raw_exec")
	g := job.TaskGroups[0]
	task := g.Tasks[0]
	if *g.Count != 3 || task.Driver != "raw_exec" {
		t.Errorf("count %d driver %q, want the variables' 3 and raw_exec", *g.Count, task.Driver)
	}
	if len(task.Artifacts) != 1 {
		t.Fatalf("%d artifacts, want the release archive", len(task.Artifacts))
	}
	want := "https://releases.example.com/nomad-fft/fft-allocator_0.2.0_${attr.kernel.name}_${attr.cpu.arch}.zip"
	if got := *task.Artifacts[0].GetterSource; got != want {
		t.Errorf("artifact source %q, want %q (make release's names, the client's platform)", got, want)
	}
	if task.Config["command"] != "local/fft-allocator" {
		t.Errorf("command %v, want the unzipped local/fft-allocator", task.Config["command"])
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := FS.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAllocatorJobspecStaticPort: http_port gives the API a port that stays, for the task
// drivers' allocator_address (the operator guide sets it).
func TestAllocatorJobspecStaticPort(t *testing.T) {
	g := parse(t, Allocator, "http_port=4650").TaskGroups[0]
	if n := g.Networks; len(n) != 1 || len(n[0].DynamicPorts) != 0 || len(n[0].ReservedPorts) != 1 ||
		n[0].ReservedPorts[0].Label != "http" || n[0].ReservedPorts[0].Value != 4650 {
		t.Errorf("networks %+v: want the static port http = 4650", n)
	}
}

// TestAllocatorJobspecTLS: with the API over TLS its Consul check speaks HTTPS (over HTTP it
// would fail and every deployment with it), and skips verifying only when the operator asks.
func TestAllocatorJobspecTLS(t *testing.T) {
	tlsArgs := []string{"-tls-cert-file", "/etc/fft/tls/allocator.pem", "-tls-key-file", "/etc/fft/tls/allocator-key.pem"}
	for _, tc := range []struct {
		name      string
		vars      []string
		protocol  string
		skip, tls bool
	}{
		{"plain", nil, "http", false, false},
		{"skip verify without TLS is ignored", []string{"check_tls_skip_verify=true"}, "http", false, false},
		{"tls", []string{"tls_cert_file=" + tlsArgs[1], "tls_key_file=" + tlsArgs[3]}, "https", false, true},
		{"tls skip verify", []string{"tls_cert_file=" + tlsArgs[1], "tls_key_file=" + tlsArgs[3], "check_tls_skip_verify=true"}, "https", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := parse(t, Allocator, append(tc.vars, `extra_args=["-min-round-gap","10s"]`)...).TaskGroups[0]
			c := g.Services[0].Checks[0]
			if c.Protocol != tc.protocol || c.TLSSkipVerify != tc.skip {
				t.Errorf("check protocol %q tls_skip_verify %v, want %q %v", c.Protocol, c.TLSSkipVerify, tc.protocol, tc.skip)
			}
			args := g.Tasks[0].Config["args"].([]any)
			var got []string
			for _, a := range args {
				got = append(got, a.(string))
			}
			i := slices.Index(got, "-tls-cert-file")
			if tc.tls != (i >= 0) || (tc.tls && !slices.Equal(got[i:i+4], tlsArgs)) {
				t.Errorf("args %q: want the TLS flags %v", got, tc.tls)
			}
			if !slices.Equal(got[len(got)-2:], []string{"-min-round-gap", "10s"}) {
				t.Errorf("args %q: want extra_args last", got)
			}
		})
	}
}
