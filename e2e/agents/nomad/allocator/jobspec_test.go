package allocator

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/nomad-fft/nomad-fft/allocator/httptls/httptlstest"
	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// The allocator as operators run it: jobspecs/fft-allocator.nomad.hcl, unchanged but for its
// variables, on real Nomad clients registered with a real Consul. Both replicas come up on
// distinct clients with their tokens from the job's Nomad Variable, Consul shows the service
// healthy by its /v1/health check, one replica leads; stopping the leader's allocation hands
// the lead to the other while Nomad replaces the stopped one, which turns healthy again.
func TestAllocatorRunsFromItsJobspec(t *testing.T) {
	nomad, consul := testenv.RequireNomad(t), testenv.RequireConsul(t)
	bin := testenv.MainBinary(t, "fft-allocator")
	root := testenv.TempDir(t)
	cs := testenv.StartConsul(t, consul, root)
	// Two hosts in the default pool for the replicas, a GPU client in the allocator's pool for
	// its rounds to see, and one Consul agent per Nomad client, as on real hosts.
	clients := []testenv.FakeGPUClient{
		{Name: "host-a", Model: modelA100, Count: 1}, {Name: "host-b", Model: modelA100, Count: 1},
		{Name: "gpu-1", Model: modelA100, Count: 2, NodePool: gpuPool},
	}
	var agents []string
	for _, cl := range clients {
		agents = append(agents, testenv.StartConsulClient(t, consul, root, cl.Name, cs).HTTP)
	}
	c := testenv.StartClusterWith(t, nomad, root, clients, testenv.ClusterOptions{ConsulAddrs: agents})

	// The tokens the template reads; this cluster runs without ACLs, so any value serves.
	runAllocatorJobspec(t, c, fmt.Sprintf(`
driver        = "raw_exec"
namespace     = "default"
command       = %q
nomad_addr    = %q
consul_addr   = %q
consul_prefix = %q
round         = "2s"
extra_args    = ["-leader-ttl", "10s", "-log-level", "debug", "-read-auth", "none"]
`, bin, c.Server.HTTP, cs.HTTP, prefix))

	healthy := func(want int) []string {
		var ids []string
		testenv.Eventually(t, 2*time.Minute, time.Second, fmt.Sprintf("%d passing fft-allocator instances in Consul", want), func() error {
			ids = passing(t, cs)
			if len(ids) != want {
				return fmt.Errorf("passing: %q", ids)
			}
			return nil
		})
		return ids
	}
	first := healthy(2)
	nodes := map[string]bool{}
	for _, a := range allocsOf(t, c.API, "fft-allocator") {
		if a.ClientStatus == api.AllocClientStatusRunning {
			nodes[a.NodeID] = true
		}
	}
	if len(nodes) != 2 {
		t.Errorf("running replicas on %d nodes, want 2 (distinct_hosts)", len(nodes))
	}

	leader := waitLeader(t, cs, "")
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	checkServed(t, cs, leader, repo)
	if !strings.Contains(strings.Join(allocIDs(t, c.API), " "), leader) {
		t.Fatalf("leader %q is none of the job's allocations %q", leader, allocIDs(t, c.API))
	}
	t.Logf("replicas %q healthy, %s leads; stopping its allocation", first, leader)
	if _, err := c.API.Allocations().Stop(&api.Allocation{ID: leader}, nil); err != nil {
		t.Fatalf("stopping the leader's allocation %s: %v", leader, err)
	}
	next := waitLeader(t, cs, leader)
	// The new leader goes on from the stored ledger: rounds keep being recorded.
	var ledger struct {
		Round int `json:"round"`
	}
	readKV(t, cs, prefix+"/ledger", &ledger)
	before := ledger.Round
	testenv.Eventually(t, 30*time.Second, time.Second, "the new leader records rounds", func() error {
		readKV(t, cs, prefix+"/ledger", &ledger)
		if ledger.Round <= before {
			return fmt.Errorf("ledger at round %d, as at the takeover", ledger.Round)
		}
		return nil
	})
	again := healthy(2)
	replaced := false
	for _, id := range again {
		if !strings.Contains(strings.Join(first, " "), id) {
			replaced = true
		}
	}
	if !replaced {
		t.Errorf("passing instances %q after the stop, before %q: want Nomad's replacement among them", again, first)
	}
	t.Logf("%s took the lead; Nomad replaced %s, instances now %q", next, leader, again)
}

// passing lists the Consul service IDs of the fft-allocator instances whose checks pass.
func passing(t *testing.T, cs *testenv.Consul) []string {
	t.Helper()
	b, code, err := cs.Get("/v1/health/service/fft-allocator?passing=true")
	if err != nil || code != http.StatusOK {
		return nil
	}
	var entries []struct {
		Service struct{ ID string }
		Checks  []struct{ Name, Status string }
	}
	if err := json.Unmarshal(b, &entries); err != nil {
		t.Fatalf("Consul health answer: %v\n%s", err, b)
	}
	var ids []string
	for _, e := range entries {
		hasHTTP := false
		for _, ch := range e.Checks {
			hasHTTP = hasHTTP || ch.Name == "fft-allocator health"
		}
		if hasHTTP {
			ids = append(ids, e.Service.ID)
		}
	}
	sort.Strings(ids)
	return ids
}

// waitLeader waits for a lock holder other than not and returns it: with -id ${NOMAD_ALLOC_ID}
// it is the leading replica's allocation ID.
func waitLeader(t *testing.T, cs *testenv.Consul, not string) string {
	t.Helper()
	var got string
	testenv.Eventually(t, 60*time.Second, 500*time.Millisecond, "a replica other than "+fmt.Sprintf("%q", not)+" leads", func() error {
		b, code, err := cs.Get("/v1/kv/" + prefix + "/leader")
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("no lock key (%d, %v)", code, err)
		}
		var pairs []struct{ Value, Session string }
		if json.Unmarshal(b, &pairs) != nil || len(pairs) == 0 || pairs[0].Session == "" {
			return fmt.Errorf("lock not held")
		}
		v, _ := base64.StdEncoding.DecodeString(pairs[0].Value)
		if got = string(v); got == "" || got == not {
			return fmt.Errorf("leader %q", got)
		}
		return nil
	})
	return got
}

func allocIDs(t *testing.T, c *api.Client) []string {
	t.Helper()
	var ids []string
	for _, a := range allocsOf(t, c, "fft-allocator") {
		ids = append(ids, a.ID)
	}
	return ids
}

// logAllocs prints the tail of every allocation's task log of the job, for a failed test.
func logAllocs(t *testing.T, c *api.Client, jobID string) {
	stubs, _, err := c.Jobs().Allocations(jobID, true, nil)
	if err != nil {
		t.Logf("allocations of %s: %v", jobID, err)
		return
	}
	for _, s := range stubs {
		alloc, _, err := c.Allocations().Info(s.ID, nil)
		if err != nil {
			continue
		}
		for _, name := range []string{"fft-allocator.stderr.0", "fft-allocator.stdout.0"} {
			r, err := c.AllocFS().Cat(alloc, "alloc/logs/"+name, nil)
			if err != nil {
				t.Logf("%s %s: %v", s.ID, name, err)
				continue
			}
			b, _ := io.ReadAll(r)
			r.Close()
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("allocation %s (%s) %s:\n%s", s.ID, s.ClientStatus, name, b)
		}
	}
}

// checkServed scrapes the leading replica, found through its Consul service entry: every metric
// the Grafana dashboard queries is on /v1/metrics, parsed by Prometheus' own text parser, and
// /ui is the status page.
func checkServed(t *testing.T, cs *testenv.Consul, leader, repo string) {
	t.Helper()
	b, _, err := cs.Get("/v1/health/service/fft-allocator")
	if err != nil {
		t.Fatal(err)
	}
	var entries []struct {
		Service struct {
			ID, Address string
			Port        int
		}
	}
	if err := json.Unmarshal(b, &entries); err != nil {
		t.Fatalf("Consul health answer: %v\n%s", err, b)
	}
	addr := ""
	for _, e := range entries {
		if strings.Contains(e.Service.ID, leader) {
			addr = fmt.Sprintf("http://%s:%d", e.Service.Address, e.Service.Port)
		}
	}
	if addr == "" {
		t.Fatalf("no Consul service entry for the leader %s: %s", leader, b)
	}
	// The leader records rounds; wait for one so the per-round gauges exist.
	var fams map[string]*dto.MetricFamily
	testenv.Eventually(t, 30*time.Second, time.Second, "the leader serves a recorded round's metrics", func() error {
		resp, err := http.Get(addr + "/v1/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var p expfmt.TextParser
		if fams, err = p.TextToMetricFamilies(resp.Body); err != nil {
			return fmt.Errorf("parsing /v1/metrics: %w", err)
		}
		if fams["fft_round"] == nil {
			return fmt.Errorf("no fft_round yet")
		}
		return nil
	})
	dash, err := os.ReadFile(filepath.Join(repo, "cmd", "fft-allocator", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile(`\b(?:fft|go|process)_[a-zA-Z0-9_]+`).FindAllString(string(dash), -1)
	if len(names) < 20 {
		t.Fatalf("the dashboard names %d metrics, want its queries' (>= 20)", len(names))
	}
	for _, n := range names {
		base := n
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(n, suffix); ok && fams[b] != nil && fams[b].GetType() == dto.MetricType_HISTOGRAM {
				base = b
			}
		}
		if fams[base] == nil {
			t.Errorf("the dashboard queries %s; the allocator does not serve it", n)
		}
	}
	resp, err := http.Get(addr + "/ui")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "<svg") || !strings.Contains(string(page), "GPU models") {
		t.Errorf("GET /ui: %s, want the status page:\n%.500s", resp.Status, page)
	}
}

// The shipped jobspec with the API over TLS: tls_cert_file and tls_key_file reach the
// allocator, which serves HTTPS only, and its Consul check speaks HTTPS and passes (here with
// check_tls_skip_verify, as this test's Consul agent does not hold the allocator's CA).
func TestAllocatorJobspecOverTLS(t *testing.T) {
	nomad, consul := testenv.RequireNomad(t), testenv.RequireConsul(t)
	bin := testenv.MainBinary(t, "fft-allocator")
	root := testenv.TempDir(t)
	cs := testenv.StartConsul(t, consul, root)
	clients := []testenv.FakeGPUClient{{Name: "host-a", Model: modelA100, Count: 1}}
	agent := testenv.StartConsulClient(t, consul, root, "host-a", cs)
	c := testenv.StartClusterWith(t, nomad, root, clients, testenv.ClusterOptions{ConsulAddrs: []string{agent.HTTP}})
	cert := testenv.NewPKI(t, root).Issue(t, httptlstest.Localhost("fft-allocator"))

	runAllocatorJobspec(t, c, fmt.Sprintf(`
driver                = "raw_exec"
namespace             = "default"
count                 = 1
command               = %q
nomad_addr            = %q
consul_addr           = %q
consul_prefix         = %q
tls_cert_file         = %q
tls_key_file          = %q
check_tls_skip_verify = true
extra_args            = ["-read-auth", "none"]
`, bin, c.Server.HTTP, cs.HTTP, prefix, cert.CertFile, cert.KeyFile))
	testenv.Eventually(t, 2*time.Minute, time.Second, "the replica's HTTPS check passing in Consul", func() error {
		b, code, err := cs.Get("/v1/health/checks/fft-allocator")
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("HTTP %d %v", code, err)
		}
		var checks []struct{ Name, Status, Output string }
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatalf("Consul checks answer: %v\n%s", err, b)
		}
		for _, ch := range checks {
			if ch.Name != "fft-allocator health" {
				continue
			}
			if ch.Status != "passing" || !strings.Contains(ch.Output, "HTTP GET https://") {
				return fmt.Errorf("check %s: %s", ch.Status, ch.Output)
			}
			return nil
		}
		return fmt.Errorf("no check yet: %s", b)
	})
}

// runAllocatorJobspec registers jobspecs/fft-allocator.nomad.hcl with vars on a cluster
// without ACLs (its Variable's tokens are placeholders), and logs the job's allocations if
// the test fails.
func runAllocatorJobspec(t *testing.T, c *testenv.Cluster, vars string) {
	t.Helper()
	if _, _, err := c.API.Variables().Create(&api.Variable{Path: "nomad/jobs/fft-allocator",
		Items: api.VariableItems{"nomad_token": "unused-without-acls", "consul_token": "unused-without-acls"}}, nil); err != nil {
		t.Fatalf("writing the job's variable: %v", err)
	}
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(repo, "jobspecs", "fft-allocator.nomad.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	job, err := c.API.Jobs().ParseHCLOpts(&api.JobsParseRequest{JobHCL: string(src), Canonicalize: true, Variables: vars})
	if err != nil {
		t.Fatalf("parsing jobspecs/fft-allocator.nomad.hcl: %v", err)
	}
	register(t, c.API, job)
	t.Cleanup(func() {
		if t.Failed() {
			logAllocs(t, c.API, "fft-allocator")
		}
	})
}
