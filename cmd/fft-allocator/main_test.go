package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nomad-fft/nomad-fft/cmd/internal/version"
)

func TestParse(t *testing.T) {
	var out bytes.Buffer
	f, err := parse([]string{"-round", "5s", "-nomad-addr", "http://127.0.0.1:1", "-http-addr", ""}, &out)
	if err != nil || f.round != 5*time.Second || f.nomad.Address != "http://127.0.0.1:1" || f.httpAddr != "" || f.prefix != "nomad-fft/v2" ||
		f.nodePool != "gpu" || f.minRoundGap != 5*time.Second {
		t.Fatalf("parse = %+v, %v", f, err)
	}
	// No pool (every node, the gate alone) and no early rounds are allowed.
	f, err = parse([]string{"-node-pool", "", "-min-round-gap", "0"}, &out)
	if err != nil || f.nodePool != "" || f.minRoundGap != 0 {
		t.Fatalf("parse of -node-pool \"\" -min-round-gap 0 = %+v, %v", f, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-round", "10ms"}, "-round=10ms: want at least 1s"},
		{[]string{"-leader-ttl", "2s"}, "-leader-ttl=2s: want at least 10s"},
		{[]string{"-log-level", "loud"}, `-log-level="loud"`},
		{[]string{"-min-round-gap", "-1s"}, "-min-round-gap=-1s: want 0 (no early rounds) or more"},
		{[]string{"-node-pool", "all"}, `-node-pool="all": Nomad's pool of every node holds no job back`},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-nope"}, "flag provided but not defined"},
	} {
		if _, err := parse(tc.args, &out); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parse(%q): err = %v, want %q", tc.args, err, tc.want)
		}
	}
	if code := run([]string{"-h"}, io.Discard, &out); code != 0 || !strings.Contains(out.String(), "NOMAD_ADDR") {
		t.Errorf("-h: code %d, usage %q", code, out.String())
	}
}

func TestVersionFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	want := "fft-allocator " + version.Get().String() + "\n"
	// -version wins over settings that would otherwise fail, as `nomad -version` does.
	if code := run([]string{"-version", "-round", "1ms"}, &stdout, &stderr); code != 0 || stdout.String() != want {
		t.Errorf("-version: code %d, stdout %q (want %q), stderr %q", code, stdout.String(), want, stderr.String())
	}
}

func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.hcl", `
nomad {
  address = "http://nomad.example:4646"
  token   = "from-file"
}
consul {
  address = "consul.example:8500"
  prefix  = "team/fft/v1"
}
round         = "60s"
leader_ttl    = "20s"
http_addr     = ""
min_round_gap = "2s"
node_pool     = "accelerators"
engine {
  weights {
    fairness = 2
  }
  volume_term      = "remaining"
  transfer_gbps    = 25
  price_preemption = true
  gap_tolerance    = 1e-4
  tenant_weights   = true
}
tenants {
  by     = "namespace"
  shares = { ml = 2 }
}
`)
	var out bytes.Buffer
	f, err := parse([]string{"-config", good, "-nomad-token", "from-flag"}, &out)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if f.nomad.Address != "http://nomad.example:4646" || f.nomad.Token != "from-flag" || f.consul.Address != "consul.example:8500" ||
		f.prefix != "team/fft/v1" || f.round != time.Minute || f.leaderTTL != 20*time.Second || f.httpAddr != "" ||
		f.minRoundGap != 2*time.Second || f.nodePool != "accelerators" {
		t.Errorf("settings from the file (flag wins for the token): %+v", f)
	}
	e := f.engine
	if e.Weights.Fairness != 2 || e.Weights.JCT != 1 || e.Volume != "remaining" || e.TransferGbps != 25 || e.RestartSeconds != 30 || !e.PricePreemption || e.GapTolerance != 1e-4 || !f.tenantWeights {
		t.Errorf("engine config %+v, tenant weights %v", e, f.tenantWeights)
	}
	if ts := f.tenants; ts == nil || ts.By != "namespace" || ts.Shares["ml"] != 2 {
		t.Errorf("tenant shares %+v", ts)
	}
	for _, tc := range []struct{ body, want string }{
		{`round = "soon"`, `round = "soon": expected a duration`},
		{`min_round_gap = "often"`, `min_round_gap = "often": expected a duration`},
		{"engine {\n volume_term = \"most\"\n}", `engine volume_term = "most"`},
		{"engine {\n transfer_gbps = 0\n}", "engine transfer_gbps = 0: expected a checkpoint transfer rate in Gbit/s (default 10) from 1e-06 to 1e+09"},
		{"engine {\n volume_term = \"rate\"\n}", `engine volume_term = "rate": expected "total" (the paper), "remaining", or "rate" with objective = "units"`},
		{"engine {\n objective = \"fair\"\n}", `engine objective = "fair": expected "paper" (the default) or "units"`},
		{"engine {\n debt = \"owed\"\n}", `engine debt = "owed"`},
		{"engine {\n weights {\n jct = -1\n }\n}", "engine weights.jct = -1"},
		{"engine {\n weights {\n volume = 1e300\n }\n}", "engine weights.volume = 1e+300: expected a weight (0 turns the term off; default 1) from 0 to 1e+06"},
		{"engine {\n restart_seconds = -1\n}", "engine restart_seconds = -1: expected a restart time in seconds"},
		{"engine {\n node_limit = -1\n}", "engine node_limit = -1"},
		{"engine {\n gap_tolerance = 1\n}", "engine gap_tolerance = 1: expected a relative gap in [0, 1)"},
		{`round = "5000000000s"`, "-round=1388888h53m20s: want at least 1s and at most 1e+09s"},
		{`colour = "blue"`, `Unsupported argument`},
		{"consul {\n colour = \"blue\"\n}", `Unsupported argument; An argument named "colour"`},
		// Type errors point at the line and column of the value.
		{"nomad {\n tls_skip_verify = \"maybe\"\n}", `bad.hcl:2,21-26: Unsuitable value type; Unsuitable value: a bool is required`},
		{"engine {\n tenant_weights = 2\n}", `bad.hcl:2,19-20: Unsuitable value type`},
		{"tenants {\n by = \"team\"\n}", `tenants by = "team": expected "user" or "namespace"`},
		{"tenants {\n by = \"user\"\n shares = { a = 0 }\n}", `tenants share "a" = 0: expected a finite number > 0`},
		{"tenants {\n by = \"namespace\"\n users = { alice = \"ml\" }\n}", `tenants users: given with by = "namespace": the mapping names fft.user values, so it needs by = "user"`},
		{"engine {\n price_preemption = \"yes\"\n}", `bad.hcl:2,22-25: Unsuitable value type; Unsuitable value: a bool is required`},
	} {
		p := write("bad.hcl", tc.body)
		if _, err := parse([]string{"-config", p}, &out); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("config %q: err = %v, want %q", tc.body, err, tc.want)
		}
	}
	if _, err := parse([]string{"-config", filepath.Join(dir, "missing.hcl")}, &out); err == nil {
		t.Error("a missing config file was accepted")
	}
}

// TestConnectionSettings checks every connection setting of both APIs
// against the precedence rule: the environment, then the -config file,
// then flags.
func TestConnectionSettings(t *testing.T) {
	dir := t.TempDir()
	// Real PEM files are not needed: the settings are checked before any
	// client reads them.
	file := filepath.Join(dir, "fft.hcl")
	if err := os.WriteFile(file, []byte(`
nomad {
  address         = "https://nomad.file:4646"
  token           = "nomad-file-token"
  ca_cert         = "/file/nomad-ca.pem"
  client_cert     = "/file/nomad-cert.pem"
  client_key      = "/file/nomad-key.pem"
  tls_server_name = "server.global.nomad"
  tls_skip_verify = true
}
consul {
  address         = "https://consul.file:8501"
  token           = "consul-file-token"
  ca_cert         = "/file/consul-ca.pem"
  client_cert     = "/file/consul-cert.pem"
  client_key      = "/file/consul-key.pem"
  tls_server_name = "consul.file"
  tls_skip_verify = true
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	// The same settings as JSON (the consul block's connection keys are
	// decoded separately from its prefix).
	jsonFile := filepath.Join(dir, "fft.json")
	if err := os.WriteFile(jsonFile, []byte(`{
  "nomad":  {"address": "https://nomad.file:4646", "token": "nomad-file-token", "ca_cert": "/file/nomad-ca.pem",
             "client_cert": "/file/nomad-cert.pem", "client_key": "/file/nomad-key.pem",
             "tls_server_name": "server.global.nomad", "tls_skip_verify": true},
  "consul": {"address": "https://consul.file:8501", "token": "consul-file-token", "ca_cert": "/file/consul-ca.pem",
             "client_cert": "/file/consul-cert.pem", "client_key": "/file/consul-key.pem",
             "tls_server_name": "consul.file", "tls_skip_verify": true, "prefix": "team/fft/v1"}
}`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"NOMAD_ADDR": "http://nomad.env:4646", "NOMAD_TOKEN": "nomad-env-token", "NOMAD_CACERT": "/env/nomad-ca.pem",
		"NOMAD_CLIENT_CERT": "/env/nomad-cert.pem", "NOMAD_CLIENT_KEY": "/env/nomad-key.pem", "NOMAD_TLS_SERVER_NAME": "env.nomad",
		"CONSUL_HTTP_ADDR": "consul.env:8500", "CONSUL_HTTP_TOKEN": "consul-env-token", "CONSUL_CACERT": "/env/consul-ca.pem",
		"CONSUL_CLIENT_CERT": "/env/consul-cert.pem", "CONSUL_CLIENT_KEY": "/env/consul-key.pem", "CONSUL_TLS_SERVER_NAME": "env.consul",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	t.Setenv("NOMAD_SKIP_VERIFY", "")
	t.Setenv("CONSUL_HTTP_SSL_VERIFY", "")
	// conn is one API's resulting settings, flattened.
	type conn struct {
		Address, Token, CA, Cert, Key, ServerName string
		SkipVerify                                bool
	}
	for _, tc := range []struct {
		name          string
		args          []string
		nomad, consul conn
	}{
		{name: "environment only",
			nomad:  conn{"http://nomad.env:4646", "nomad-env-token", "/env/nomad-ca.pem", "/env/nomad-cert.pem", "/env/nomad-key.pem", "env.nomad", false},
			consul: conn{"http://consul.env:8500", "consul-env-token", "/env/consul-ca.pem", "/env/consul-cert.pem", "/env/consul-key.pem", "env.consul", false}},
		{name: "file over environment", args: []string{"-config", file},
			nomad:  conn{"https://nomad.file:4646", "nomad-file-token", "/file/nomad-ca.pem", "/file/nomad-cert.pem", "/file/nomad-key.pem", "server.global.nomad", true},
			consul: conn{"https://consul.file:8501", "consul-file-token", "/file/consul-ca.pem", "/file/consul-cert.pem", "/file/consul-key.pem", "consul.file", true}},
		{name: "JSON file over environment", args: []string{"-config", jsonFile},
			nomad:  conn{"https://nomad.file:4646", "nomad-file-token", "/file/nomad-ca.pem", "/file/nomad-cert.pem", "/file/nomad-key.pem", "server.global.nomad", true},
			consul: conn{"https://consul.file:8501", "consul-file-token", "/file/consul-ca.pem", "/file/consul-cert.pem", "/file/consul-key.pem", "consul.file", true}},
		{name: "flags over file", args: []string{"-config", file,
			"-nomad-addr", "https://nomad.flag:4646", "-nomad-token", "nomad-flag-token", "-nomad-ca-cert", "/flag/nomad-ca.pem",
			"-nomad-client-cert", "/flag/nomad-cert.pem", "-nomad-client-key", "/flag/nomad-key.pem", "-nomad-tls-server-name", "flag.nomad",
			"-consul-addr", "https://consul.flag:8501", "-consul-token", "consul-flag-token", "-consul-ca-cert", "/flag/consul-ca.pem",
			"-consul-client-cert", "/flag/consul-cert.pem", "-consul-client-key", "/flag/consul-key.pem", "-consul-tls-server-name", "flag.consul"},
			nomad:  conn{"https://nomad.flag:4646", "nomad-flag-token", "/flag/nomad-ca.pem", "/flag/nomad-cert.pem", "/flag/nomad-key.pem", "flag.nomad", true},
			consul: conn{"https://consul.flag:8501", "consul-flag-token", "/flag/consul-ca.pem", "/flag/consul-cert.pem", "/flag/consul-key.pem", "flag.consul", true}},
		{name: "flags over environment, one setting each", args: []string{"-nomad-tls-skip-verify", "-consul-ca-cert", "/flag/consul-ca.pem", "-consul-tls-skip-verify"},
			nomad: conn{"http://nomad.env:4646", "nomad-env-token", "/env/nomad-ca.pem", "/env/nomad-cert.pem", "/env/nomad-key.pem", "env.nomad", true},
			// A CA certificate makes the scheme https.
			consul: conn{"https://consul.env:8500", "consul-env-token", "/flag/consul-ca.pem", "/env/consul-cert.pem", "/env/consul-key.pem", "env.consul", true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parse(tc.args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			nc := f.nomad.NomadConfig()
			tn := nc.TLSConfig
			gotNomad := conn{nc.Address, nc.SecretID, tn.CACert, tn.ClientCert, tn.ClientKey, tn.TLSServerName, tn.Insecure}
			cc := f.consul.ConsulConfig()
			tc2 := cc.TLSConfig
			gotConsul := conn{cc.Scheme + "://" + cc.Address, cc.Token, tc2.CAFile, tc2.CertFile, tc2.KeyFile, tc2.Address, tc2.InsecureSkipVerify}
			if diff := cmp.Diff(tc.nomad, gotNomad); diff != "" {
				t.Errorf("nomad settings (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.consul, gotConsul); diff != "" {
				t.Errorf("consul settings (-want,+got):\n%s", diff)
			}
		})
	}
	// The help lists the TLS flags of both APIs with the variables they override.
	var out bytes.Buffer
	run([]string{"-h"}, io.Discard, &out)
	for _, want := range []string{"-nomad-ca-cert", "NOMAD_CACERT", "-consul-client-key", "CONSUL_CLIENT_KEY", "-consul-tls-skip-verify"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-h does not mention %s", want)
		}
	}
}

// TestREADMEConfig parses the configuration example of README.md, so the
// documented keys stay the ones the allocator takes.
func TestREADMEConfig(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```hcl\n")
	example, _, closed := strings.Cut(rest, "```")
	if !ok || !closed || !strings.Contains(example, "tls_server_name") {
		t.Fatalf("README.md has no hcl example with the connection keys")
	}
	p := filepath.Join(t.TempDir(), "example.hcl")
	if err := os.WriteFile(p, []byte(example), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := parse([]string{"-config", p}, io.Discard)
	if err != nil {
		t.Fatalf("README.md's example: %v", err)
	}
	if f.id != "allocator-1" || f.nomad.Address != "http://127.0.0.1:4646" || f.prefix != "nomad-fft/v2" || f.tenantWeights {
		t.Errorf("README.md's example read as %+v", f)
	}
}

// FuzzConfigFile: no -config file panics parse, a rejected one gets an
// error that names the file, and an accepted one gives engine settings
// the round engine accepts.
func FuzzConfigFile(f *testing.F) {
	f.Add("round = \"60s\"\nengine {\n weights {\n fairness = 2\n }\n transfer_gbps = 25\n}\n")
	f.Add("engine {\n transfer_gbps = 1e-300\n restart_seconds = 1e300\n}\n")
	f.Add("engine {\n weights {\n jct = -0\n switch = 1e6\n }\n node_limit = 9999999999\n}\n")
	f.Add("nomad {\n address = \"http://x\"\n}\nconsul {\n prefix = \"\"\n}\nleader_ttl = \"-1s\"\n")
	f.Add("{")
	f.Add("tls {\n verify_https_client = true\n}\n")
	f.Add("tls {\n cert_file = \"/nonexistent.pem\"\n key_file = \"\"\n}\n")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, body string) {
		p := filepath.Join(dir, "fuzz.hcl")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		fl, err := parse([]string{"-config", p}, io.Discard)
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.hcl") && !strings.HasPrefix(err.Error(), "-") {
				t.Fatalf("error %q names neither the file nor the flag", err)
			}
			return
		}
		if err := fl.engine.Validate(); err != nil {
			t.Fatalf("accepted %q but the engine rejects its settings: %v", body, err)
		}
	})
}

// TestThroughputPriors: -throughput-priors (or throughput_priors in -config) merges the
// operator's rows over the embedded table, and a bad table stops the start naming the flag and
// the line.
func TestThroughputPriors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "priors.csv")
	if err := os.WriteFile(good, []byte("model,family,speed,log_sd\nL4,,1.7,0.3\nK80,,0.5,0.2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("model,family,speed,log_sd\nL4,,-1,0.3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "fft.hcl")
	if err := os.WriteFile(cfg, []byte(`throughput_priors = "`+good+`"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, args := range [][]string{{"-throughput-priors", good}, {"-config", cfg}} {
		f, err := parse(args, &out)
		if err != nil {
			t.Fatalf("parse(%q): %v", args, err)
		}
		for _, c := range []struct {
			model string
			speed float64
		}{{"L4", 1.7}, {"K80", 0.5}, {"P100", 0}} {
			p, ok := f.priors.Lookup(c.model, "")
			if !ok {
				t.Fatalf("parse(%q): no %s row: the embedded table was not kept", args, c.model)
			}
			if c.speed > 0 && p.Speed != c.speed {
				t.Errorf("parse(%q): %s speed %g, want the operator's %g", args, c.model, p.Speed, c.speed)
			}
		}
	}
	if f, err := parse(nil, &out); err != nil || f.priors != nil {
		t.Errorf("no table: priors %v, err %v; want nil (the loop's default)", f.priors, err)
	}
	for _, tc := range []struct{ path, want string }{
		{bad, "-throughput-priors=" + bad + ": "},
		{filepath.Join(dir, "missing.csv"), "no such file"},
	} {
		if _, err := parse([]string{"-throughput-priors", tc.path}, &out); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("-throughput-priors %s: err %v, want %q", tc.path, err, tc.want)
		}
	}
}

// The operator's users map reaches the tenant shares: with by = "user" an fft.user counts as
// a tenant only in the namespace the map gives it (issue 20).
func TestTenantUsersConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.hcl")
	if err := os.WriteFile(path, []byte("tenants {\n by = \"user\"\n users = { alice = \"ml\" }\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	f, err := parse([]string{"-config", path}, &out)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if ts := f.tenants; ts == nil || ts.By != "user" || ts.Users["alice"] != "ml" {
		t.Errorf("tenant shares %+v, want by user with alice mapped to ml", ts)
	}
}
