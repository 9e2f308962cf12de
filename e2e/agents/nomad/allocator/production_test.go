package allocator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// heldJob is a managed job that declares a throughput only on a model the cluster lacks:
// the allocator records it and holds it, and it never runs.
const heldJob = `job %q {
  namespace   = %q
  type        = "batch"
  datacenters = ["*"]
  meta = {
    "fft.work"       = "100"
    "fft.throughput" = "NVIDIA A100-SXM4-40GB=1"
  }
  group "main" {
    task "train" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["600"]
      }
      resources {
        cpu    = 50
        memory = 32
        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
`

// TestProductionShaped: a cluster with Nomad and Consul ACLs on, two GPU hosts of one model
// with the task driver, and the allocator with the shipped policies and its defaults
// (-progress-auth=nomad, -read-auth=nomad). The driver's job reports with its own workload
// identity and the allocator takes it (it refused every driver report before); /v1/status
// with a token of namespace team-x lists only team-x's jobs (it listed every job to anyone);
// a job purged and registered again starts with no progress (it kept the old job's).
func TestProductionShaped(t *testing.T) {
	nomad := testenv.RequireNomad(t)
	consul := testenv.RequireConsul(t)
	bin := testenv.MainBinary(t, "fft-allocator")
	root := testenv.TempDir(t)
	cs := testenv.StartConsulWith(t, consul, root, testenv.ConsulOptions{ACL: true})
	httpPort := testenv.FreePorts(t, 1)[0]
	allocatorURL := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	// The driver's defaults: tasks run as nobody, reports carry the task's identity.
	stanza := fmt.Sprintf(`
plugin "nomad-driver-fft" {
  config {
    allocator_address = %q
    report_period     = "500ms"
  }
}
`, allocatorURL)
	dir := testenv.DriverPluginDir(t)
	c := testenv.StartClusterWith(t, nomad, root, []testenv.FakeGPUClient{
		{Name: "v100-a", Model: modelV100, Count: 2, Extra: `memory_mib = 16384`, NodePool: gpuPool, PluginDir: dir, AgentExtra: stanza},
		{Name: "v100-b", Model: modelV100, Count: 2, Extra: `memory_mib = 16384`, NodePool: gpuPool, PluginDir: dir, AgentExtra: stanza},
	}, testenv.ClusterOptions{ACL: true})
	testenv.Traversable(t, root)

	nomadPolicy, consulPolicy := shippedPolicies(t, cs)
	nomadToken := nomadTokenWith(t, c.API, "fft-allocator", nomadPolicy)
	consulToken := consulTokenWith(t, cs, "fft-allocator", consulPolicy)
	proc := testenv.StartProcess(t, "fft-allocator", root, bin, "-nomad-addr", c.Server.HTTP, "-nomad-token", nomadToken,
		"-consul-addr", cs.HTTP, "-consul-token", consulToken, "-consul-prefix", prefix, "-round", "1h", "-min-round-gap", "1s",
		"-http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort), "-log-level", "debug")

	// 1. The driver's job reports with its own identity, under the default -progress-auth.
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(repo, "jobspecs", "fft-train-driver.nomad.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	vars := "work=100000\nstep_seconds=0.05\ncheckpoint_kb=4\ngpu_count=1"
	// Its true rate, 20 steps a second, declared per 1 h round: a report is believed up to
	// the work that rate allows over the time the job held its GPU (issue 20).
	register(t, c.API, parseJob(t, c.API, string(src), "train-a", vars+"\nthroughput=\"Tesla V100-SXM2-16GB=72000\""))
	first := waitAllocWithin(t, 90*time.Second, c.API, proc, "train-a", "running", "")
	var stored struct {
		Done     float64 `json:"done"`
		GPUModel string  `json:"gpu_model"`
		Alloc    string  `json:"alloc"`
	}
	testenv.Eventually(t, 60*time.Second, 500*time.Millisecond, "the driver's report taken", func() error {
		b, code, err := cs.Get("/v1/kv/" + prefix + "/progress/default/train-a?raw")
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("HTTP %d %v", code, err)
		}
		if err := json.Unmarshal(b, &stored); err != nil {
			return fmt.Errorf("%s: %w", b, err)
		}
		if stored.Done < 5 || stored.GPUModel != modelV100 || stored.Alloc != first.ID {
			return fmt.Errorf("stored %s", b)
		}
		return nil
	})
	t.Logf("the driver's report, taken with the task's identity: done %g on %s from allocation %s", stored.Done, stored.GPUModel, stored.Alloc)

	// 2. Reads follow ACLs: a token of namespace team-x sees team-x's jobs only.
	if _, err := c.API.Namespaces().Register(&api.Namespace{Name: "team-x"}, nil); err != nil {
		t.Fatal(err)
	}
	register(t, c.API, parseJob(t, c.API, fmt.Sprintf(heldJob, "held-x", "team-x"), "held-x", ""))
	teamX := nomadTokenWith(t, c.API, "team-x-reader", `namespace "team-x" { policy = "read" }`)
	status := func(token string) (int, map[string]struct {
		Done        float64 `json:"done"`
		CreateIndex uint64  `json:"create_index"`
		Status      string  `json:"status"`
	}) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, allocatorURL+"/v1/status", nil)
		if token != "" {
			req.Header.Set("X-Nomad-Token", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st struct {
			Jobs map[string]struct {
				Done        float64 `json:"done"`
				CreateIndex uint64  `json:"create_index"`
				Status      string  `json:"status"`
			} `json:"jobs"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&st)
		return resp.StatusCode, st.Jobs
	}
	ids := func(m map[string]struct {
		Done        float64 `json:"done"`
		CreateIndex uint64  `json:"create_index"`
		Status      string  `json:"status"`
	}) string {
		var out []string
		for id := range m {
			out = append(out, id)
		}
		sort.Strings(out)
		return strings.Join(out, ",")
	}
	testenv.Eventually(t, 60*time.Second, 500*time.Millisecond, "the ledger has both jobs", func() error {
		if _, jobs := status(c.ManagementToken); ids(jobs) != "default/train-a,team-x/held-x" {
			return fmt.Errorf("jobs %s", ids(jobs))
		}
		return nil
	})
	if code, jobs := status(teamX); code != 200 || ids(jobs) != "team-x/held-x" {
		t.Errorf("/v1/status with team-x's token: HTTP %d, jobs %q; want team-x/held-x only", code, ids(jobs))
	}
	if code, jobs := status(""); code != http.StatusUnauthorized || len(jobs) != 0 {
		t.Errorf("/v1/status without a token: HTTP %d, jobs %q; want 401 and none", code, ids(jobs))
	}
	if resp, err := http.Get(allocatorURL + "/v1/health"); err != nil || resp.StatusCode != 200 {
		t.Errorf("/v1/health without a token: %v %v, want 200", resp, err)
	} else {
		resp.Body.Close()
	}

	// 3. Purged and registered again (nomad job stop -purge, then nomad job run of a file
	// with the same ID): a new job, with no progress of the old one.
	_, before := status(c.ManagementToken)
	old := before["default/train-a"]
	if old.Done < 5 || old.CreateIndex == 0 {
		t.Fatalf("the first train-a's record: %+v, want its reported progress and create index", old)
	}
	if _, _, err := c.API.Jobs().Deregister("train-a", true, nil); err != nil {
		t.Fatal(err)
	}
	// Its allocation stops (checkpoint on the stop signal) and its last report is sent.
	testenv.Eventually(t, 60*time.Second, 500*time.Millisecond, "the old allocation stopped", func() error {
		a, _, err := c.API.Allocations().Info(first.ID, nil)
		if err != nil {
			return err
		}
		if a.ClientStatus == api.AllocClientStatusRunning || a.ClientStatus == api.AllocClientStatusPending {
			return fmt.Errorf("client status %s", a.ClientStatus)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	again := parseJob(t, c.API, string(src), "train-a", vars+"\nthroughput=\"NVIDIA A100-SXM4-40GB=4\"")
	register(t, c.API, again)
	testenv.Eventually(t, 60*time.Second, 500*time.Millisecond, "the new train-a's record", func() error {
		_, jobs := status(c.ManagementToken)
		rec, ok := jobs["default/train-a"]
		if !ok || rec.CreateIndex == old.CreateIndex {
			return fmt.Errorf("record %+v (the old one's create index %d)", rec, old.CreateIndex)
		}
		if rec.Done != 0 {
			t.Fatalf("the re-registered train-a starts at done %g (the old one reported %g), want 0", rec.Done, old.Done)
		}
		return nil
	})
	if b, code, _ := cs.Get("/v1/kv/" + prefix + "/progress/default/train-a?raw"); code != http.StatusNotFound {
		t.Errorf("the old train-a's report is still stored: HTTP %d %s", code, b)
	}
}
