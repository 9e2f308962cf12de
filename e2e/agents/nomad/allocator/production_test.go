package allocator

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/allocator/httptls/httptlstest"
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

// modelT4 is the second model of TestProductionShaped's hosts.
const modelT4 = "Tesla T4"

// isolationJob is a job on the task driver that is not the allocator's (no fft.* meta), in
// the GPU pool, running script as user ("": the driver's default_user, nobody).
const isolationJob = `job %q {
  type        = "batch"
  datacenters = ["*"]
  node_pool   = %q
  group "main" {
    restart {
      attempts = 0
      mode     = "fail"
    }
    reschedule {
      attempts  = 0
      unlimited = false
    }
    task "train" {
      driver = "fft"
      user   = %q
      identity {
        file = true
      }
      config {
        command = "/bin/sh"
        args    = ["-c", %q]
      }
      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
`

// TestProductionShaped: a cluster with Nomad and Consul ACLs and TLS on (HTTPS only, client
// certificates required, as TestTLSEverywhere's agents), two GPU hosts of each of two models
// with the task driver and a shared checkpoint_root, and the allocator with the shipped
// policies and its defaults (-progress-auth=nomad, -read-auth=nomad), serving HTTPS. The
// driver's job reports with its own workload identity over HTTPS and the allocator takes it
// (it refused every driver report before); /v1/status with a token of namespace team-x lists
// only team-x's jobs (it listed every job to anyone); a task of one job, run by the driver as
// its default unprivileged user, cannot read another job's checkpoint folder or identity
// file; a job purged and registered again starts with no progress and no checkpoint (it kept
// the old job's of both).
func TestProductionShaped(t *testing.T) {
	nomad := testenv.RequireNomad(t)
	consul := testenv.RequireConsul(t)
	bin := testenv.MainBinary(t, "fft-allocator")
	root := testenv.TempDir(t)
	start := time.Now()
	pki := testenv.NewPKI(t, root)
	cs := testenv.StartConsulTLSWith(t, consul, root, pki, testenv.ConsulOptions{ACL: true})
	httpPort := testenv.FreePorts(t, 1)[0]
	allocatorURL := fmt.Sprintf("https://127.0.0.1:%d", httpPort)
	shared := filepath.Join(root, "shared-checkpoints") // a shared file system, on one machine
	// The driver's defaults: tasks run as nobody, reports carry the task's identity, over
	// HTTPS to the allocator (its CA); checkpoints per job registration under the shared root.
	stanza := fmt.Sprintf(`
plugin "nomad-driver-fft" {
  config {
    allocator_address = %q
    allocator_ca_file = %q
    report_period     = "500ms"
    checkpoint_root   = %q
  }
}
`, allocatorURL, pki.CA.CAFile, shared)
	dir := testenv.DriverPluginDir(t)
	var clients []testenv.FakeGPUClient
	for _, h := range []struct{ name, model, extra string }{
		{"v100-a", modelV100, `memory_mib = 16384`}, {"v100-b", modelV100, `memory_mib = 16384`},
		{"t4-a", modelT4, `memory_mib = 15360`}, {"t4-b", modelT4, `memory_mib = 15360`},
	} {
		clients = append(clients, testenv.FakeGPUClient{Name: h.name, Model: h.model, Count: 2, Extra: h.extra,
			NodePool: gpuPool, PluginDir: dir, AgentExtra: stanza})
	}
	c := testenv.StartClusterWith(t, nomad, root, clients, testenv.ClusterOptions{ACL: true, TLS: pki})
	testenv.Traversable(t, root)
	t.Logf("Consul and Nomad (a server, 2 V100 and 2 T4 hosts) up with ACLs and TLS in %s", time.Since(start).Round(time.Millisecond))
	https := pki.HTTPClient(t)

	nomadPolicy, consulPolicy := shippedPolicies(t, cs)
	nomadToken := nomadTokenWith(t, c.API, "fft-allocator", nomadPolicy)
	consulToken := consulTokenWith(t, cs, "fft-allocator", consulPolicy)
	allocCert := pki.Issue(t, httptlstest.Localhost("fft-allocator"))
	cli := pki.CLI
	proc := testenv.StartProcess(t, "fft-allocator", root, bin,
		"-nomad-addr", c.Server.HTTP, "-nomad-token", nomadToken,
		"-nomad-ca-cert", cli.CAFile, "-nomad-client-cert", cli.CertFile, "-nomad-client-key", cli.KeyFile,
		"-consul-addr", "https://"+cs.HTTP, "-consul-token", consulToken, "-consul-prefix", prefix,
		"-consul-ca-cert", cli.CAFile, "-consul-client-cert", cli.CertFile, "-consul-client-key", cli.KeyFile,
		"-round", "1h", "-min-round-gap", "1s", "-http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort),
		"-tls-cert-file", allocCert.CertFile, "-tls-key-file", allocCert.KeyFile, "-log-level", "debug")

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
	throughput := fmt.Sprintf("\nthroughput=%q", modelV100+"=72000,"+modelT4+"=36000")
	register(t, c.API, parseJob(t, c.API, string(src), "train-a", vars+throughput))
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
		resp, err := https.Do(req)
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
	if resp, err := https.Get(allocatorURL + "/v1/health"); err != nil || resp.StatusCode != 200 {
		t.Errorf("/v1/health without a token: %v %v, want 200", resp, err)
	} else {
		resp.Body.Close()
	}

	// 3. Tasks cannot reach each other: job B, as user daemon, keeps weights in its
	// checkpoint and has its identity in secrets/nomad_token; job A, as the driver's default
	// user (nobody), tries to read, list and overwrite B's checkpoint and to read B's identity,
	// and writes what it saw to its stdout.
	register(t, c.API, parseJob(t, c.API, fmt.Sprintf(isolationJob, "iso-b", gpuPool, "daemon",
		`echo weights > "$FFT_CHECKPOINT_DIR/model.ckpt"; echo "ckpt=$FFT_CHECKPOINT_DIR"; echo "secrets=$NOMAD_SECRETS_DIR"; exec sleep 600`), "iso-b", ""))
	b := waitAllocWithin(t, 60*time.Second, c.API, proc, "iso-b", "running", "")
	bJob, _, err := c.API.Jobs().Info("iso-b", nil)
	if err != nil {
		t.Fatal(err)
	}
	bCkpt := filepath.Join(shared, "default", "iso-b", fmt.Sprintf("create-index-%d", *bJob.CreateIndex), "main", "train")
	// Where B's identity is, as its task sees it (the driver isolates no file system, so the
	// path is the host's).
	var bToken string
	testenv.Eventually(t, 30*time.Second, 250*time.Millisecond, "job B's checkpoint and identity written", func() error {
		out := stdoutOf(t, c.API, b)
		if !strings.Contains(out, "ckpt="+bCkpt+"\n") {
			return fmt.Errorf("B's stdout %q: want its checkpoint folder %s", out, bCkpt)
		}
		_, secrets, ok := strings.Cut(out, "secrets=")
		if !ok || !strings.Contains(secrets, "\n") {
			return fmt.Errorf("B's stdout %q", out)
		}
		secrets, _, _ = strings.Cut(secrets, "\n")
		bToken = filepath.Join(secrets, "nomad_token")
		if w, err := os.ReadFile(filepath.Join(bCkpt, "model.ckpt")); err != nil || strings.TrimSpace(string(w)) != "weights" {
			return fmt.Errorf("B's checkpoint: %q %v", w, err)
		}
		if tok, err := os.ReadFile(bToken); err != nil || len(tok) < 20 {
			return fmt.Errorf("B's identity: %d bytes, %v", len(tok), err)
		}
		return nil
	})
	probe := fmt.Sprintf(`id -u
echo "== read checkpoint"; cat %[1]q/model.ckpt 2>&1; echo "exit=$?"
echo "== list checkpoint"; ls %[1]q 2>&1; echo "exit=$?"
echo "== write checkpoint"; (echo poison > %[1]q/model.ckpt) 2>&1; echo "exit=$?"
echo "== read identity"; cat %[2]q 2>&1; echo "exit=$?"
echo "== end"`, bCkpt, bToken)
	register(t, c.API, parseJob(t, c.API, fmt.Sprintf(isolationJob, "iso-a", gpuPool, "", probe), "iso-a", ""))
	a := waitAllocWithin(t, 60*time.Second, c.API, proc, "iso-a", "complete", "")
	var seen string
	testenv.Eventually(t, 30*time.Second, 250*time.Millisecond, "job A's report of what it saw", func() error {
		if seen = stdoutOf(t, c.API, a); !strings.Contains(seen, "== end") {
			return fmt.Errorf("stdout %q", seen)
		}
		return nil
	})
	t.Logf("job A, as the driver's default user, tried job B's checkpoint and identity:\n%s", seen)
	tok, _ := os.ReadFile(bToken)
	for _, step := range []string{"read checkpoint", "list checkpoint", "write checkpoint", "read identity"} {
		_, after, _ := strings.Cut(seen, "== "+step+"\n")
		out, _, _ := strings.Cut(after, "\n== ")
		if !strings.Contains(out, "Permission denied") || strings.Contains(out, "exit=0") {
			t.Errorf("job A's %s of job B's: %q, want Permission denied", step, out)
		}
	}
	if first, _, _ := strings.Cut(seen, "\n"); first != "65534" {
		t.Errorf("job A ran as uid %q, want nobody's 65534", first)
	}
	if strings.Contains(seen, "weights") || strings.Contains(seen, strings.TrimSpace(string(tok))) {
		t.Errorf("job A saw job B's checkpoint or identity:\n%s", seen)
	}
	if w, _ := os.ReadFile(filepath.Join(bCkpt, "model.ckpt")); strings.TrimSpace(string(w)) != "weights" {
		t.Errorf("job B's checkpoint after job A: %q, want its weights", w)
	}

	// 4. Purged and registered again (nomad job stop -purge, then nomad job run of a file
	// with the same ID): a new job, with no progress and no checkpoint of the old one.
	_, before := status(c.ManagementToken)
	old := before["default/train-a"]
	if old.Done < 5 || old.CreateIndex == 0 {
		t.Fatalf("the first train-a's record: %+v, want its reported progress and create index", old)
	}
	oldJob, _, err := c.API.Jobs().Info("train-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	oldFolder := filepath.Join(shared, "default", "train-a", fmt.Sprintf("create-index-%d", *oldJob.CreateIndex))
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
	// The old job checkpointed on its stop, under its own registration's folder.
	if m, err := os.ReadFile(filepath.Join(oldFolder, "main", "train", "fft-checkpoint.json")); err != nil || !strings.Contains(string(m), `"step"`) {
		t.Fatalf("the old train-a's checkpoint marker: %q %v", m, err)
	}
	time.Sleep(2 * time.Second)
	// A small declared rate: the ledger estimates a running job's progress between reports
	// from it, and this keeps the new job's own far below what the old one had.
	again := parseJob(t, c.API, string(src), "train-a", vars+fmt.Sprintf("\nthroughput=%q", modelV100+"=40,"+modelT4+"=20"))
	register(t, c.API, again)
	// It runs at once, so its record's done is its own (reports and the ledger's estimate from
	// its small rate): below the old one's, which a record that kept it could not be.
	var newRec struct {
		Done        float64 `json:"done"`
		CreateIndex uint64  `json:"create_index"`
		Status      string  `json:"status"`
	}
	testenv.Eventually(t, 60*time.Second, 500*time.Millisecond, "the new train-a's record", func() error {
		_, jobs := status(c.ManagementToken)
		rec, ok := jobs["default/train-a"]
		if !ok || rec.CreateIndex == old.CreateIndex {
			return fmt.Errorf("record %+v (the old one's create index %d)", rec, old.CreateIndex)
		}
		newRec = rec
		return nil
	})
	if b, code, _ := cs.Get("/v1/kv/" + prefix + "/progress/default/train-a?raw"); code == http.StatusOK && strings.Contains(string(b), first.ID) {
		t.Errorf("the old train-a's report is still stored: HTTP %d %s", code, b)
	}
	// It runs, from no checkpoint (its task says "resuming from step N" when it finds one),
	// in its own registration's folder; the purged job's folder is gone.
	second := waitAllocWithin(t, 90*time.Second, c.API, proc, "train-a", "running", first.ID)
	var out string
	testenv.Eventually(t, 30*time.Second, 250*time.Millisecond, "the new train-a's first lines", func() error {
		if out = stdoutOf(t, c.API, second); !strings.Contains(out, "CUDA_VISIBLE_DEVICES=") {
			return fmt.Errorf("stdout %q", out)
		}
		return nil
	})
	if strings.Contains(out, "resuming from step") {
		t.Errorf("the re-registered train-a resumed the purged one's checkpoint: %q", out)
	}
	// Its progress file starts at step 1.
	var lines []string
	testenv.Eventually(t, 30*time.Second, 250*time.Millisecond, "the new train-a's progress", func() error {
		rc, err := c.API.AllocFS().Cat(second, "train/local/fft-progress.jsonl", nil)
		if err != nil {
			return err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if lines = strings.Split(strings.TrimSpace(string(b)), "\n"); err != nil || len(lines) < 1 || lines[0] == "" {
			return fmt.Errorf("progress %q %v", b, err)
		}
		return nil
	})
	var firstLine, lastLine struct{ Done float64 }
	_ = json.Unmarshal([]byte(lines[0]), &firstLine)
	_ = json.Unmarshal([]byte(lines[len(lines)-1]), &lastLine)
	if firstLine.Done != 1 || newRec.Done >= old.Done {
		t.Errorf("the re-registered train-a: first step %g, record's done %g (the purged one's %g); want a start at step 1 and none of the old progress",
			firstLine.Done, newRec.Done, old.Done)
	}
	t.Logf("the re-registered train-a: first step %g (last read %g), record's done %g; the purged one's %g", firstLine.Done, lastLine.Done, newRec.Done, old.Done)
	newJob, _, err := c.API.Jobs().Info("train-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	newFolder := filepath.Join(shared, "default", "train-a", fmt.Sprintf("create-index-%d", *newJob.CreateIndex))
	if fi, err := os.Stat(filepath.Join(newFolder, "main", "train")); err != nil || !fi.IsDir() {
		t.Errorf("the new train-a's checkpoint folder %s: %v", newFolder, err)
	}
	if _, err := os.Stat(oldFolder); !os.IsNotExist(err) {
		t.Errorf("the purged train-a's checkpoint folder %s is still there (%v)", oldFolder, err)
	}
	t.Logf("production-shaped cluster checked in %s", time.Since(start).Round(time.Millisecond))
}

// stdoutOf is what the task "train" of allocation a has written to its stdout so far, read
// through Nomad's API ("" before it has written any).
func stdoutOf(t *testing.T, c *api.Client, a *api.Allocation) string {
	t.Helper()
	rc, err := c.AllocFS().Cat(a, "alloc/logs/train.stdout.0", nil)
	if err != nil {
		return ""
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	return string(b)
}
