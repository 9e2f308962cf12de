package allocator

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	modelV100 = "Tesla V100-SXM2-16GB"
	modelA100 = "NVIDIA A100-SXM4-40GB"
	prefix    = "fft-e2e/v1"
	taskName  = "train"
	gpuPool   = "gpu"
)

// Without a GPU node pool (-node-pool "", clients in the default pool), a job submitted with
// fft. meta and the gate constraint stays pending until the allocator's round selects it, then
// runs on the chosen model; the round's audit record and the job's rho are in Consul KV, and a
// job with bad fft. meta is reported and left untouched.
func TestAllocatorSelectsAndSteers(t *testing.T) {
	// Two hosts of 2 GPUs per model: the job's two GPUs must be one host's.
	st := startStack(t, []testenv.FakeGPUClient{
		{Name: "v100-1", Model: modelV100, Count: 2, Extra: `memory_mib = 16384`, NodePool: api.NodePoolDefault},
		{Name: "v100-2", Model: modelV100, Count: 2, Extra: `memory_mib = 16384`, NodePool: api.NodePoolDefault},
		{Name: "a100-1", Model: modelA100, Count: 2, NodePool: api.NodePoolDefault},
		{Name: "a100-2", Model: modelA100, Count: 2, NodePool: api.NodePoolDefault},
	})
	c, cs := st.Cluster, st.consul
	a100Devices := map[string]map[string]bool{} // by node ID
	for _, name := range []string{"a100-1", "a100-2"} {
		node, _, err := c.API.Nodes().Info(c.NodeIDs[name], nil)
		if err != nil {
			t.Fatalf("reading the A100 node %s: %v", name, err)
		}
		a100Devices[node.ID] = map[string]bool{}
		for _, d := range node.NodeResources.Devices {
			for _, inst := range d.Instances {
				a100Devices[node.ID][inst.ID] = true
			}
		}
	}
	// Each client's fake GPUs are its own (their UUIDs are seeded with its node name), as two
	// real hosts' are: a GPU ID names one host's GPU.
	for id := range a100Devices[c.NodeIDs["a100-1"]] {
		if a100Devices[c.NodeIDs["a100-2"]][id] {
			t.Errorf("both A100 clients present GPU %s", id)
		}
	}

	jobspec := trainJobspec(t)
	// The job runs 4x faster on the A100 and both models are free: the round picks the A100.
	train := withGate(parseJob(t, c.API, jobspec, "fft-train", `throughput = "NVIDIA A100-SXM4-40GB=4,Tesla V100-SXM2-16GB=1"`))
	evalID := register(t, c.API, train)
	// A job with bad meta: negative work and a typo in a key.
	bad := withGate(parseJob(t, c.API, jobspec, "fft-bad", `work = "-5"`))
	bad.Meta["fft.troughput"] = "x=1"
	register(t, c.API, bad)
	// A job that opts in without its work.
	noWork := withGate(parseJob(t, c.API, jobspec, "fft-no-work", ""))
	delete(noWork.Meta, "fft.work")
	register(t, c.API, noWork)
	// Valid meta that no model of this cluster can run: a model no client has, and more GPUs
	// than any model has.
	register(t, c.API, withGate(parseJob(t, c.API, jobspec, "fft-unknown-model", `throughput = "NVIDIA H100 80GB HBM3=3"`)))
	register(t, c.API, withGate(parseJob(t, c.API, jobspec, "fft-too-big", `gpu_count = 8`)))

	// Before any round: the gate holds the job, and Nomad's placement failure names it.
	var eval *api.Evaluation
	testenv.Eventually(t, 60*time.Second, 250*time.Millisecond, "the held job's evaluation completes", func() error {
		e, _, err := c.API.Evaluations().Info(evalID, nil)
		if err != nil {
			return err
		}
		if e.Status != "complete" {
			return fmt.Errorf("evaluation %s", e.Status)
		}
		eval = e
		return nil
	})
	failed := eval.FailedTGAllocs["main"]
	if failed == nil {
		t.Fatalf("no placement failure for the held job: %+v", eval)
	}
	gateFiltered := 0
	for k, n := range failed.ConstraintFiltered {
		if strings.Contains(k, "${meta.fft_gate}") {
			gateFiltered += n
		}
	}
	if gateFiltered != 4 {
		t.Errorf("the gate filtered %d nodes, want 4: %+v", gateFiltered, failed.ConstraintFiltered)
	}
	time.Sleep(2 * time.Second)
	if allocs := allocsOf(t, c.API, "fft-train"); len(allocs) != 0 {
		t.Fatalf("the job has %d allocations before any round", len(allocs))
	}

	// Start the allocator with 2-second rounds.
	httpPort := testenv.FreePorts(t, 1)[0]
	// A cluster without ACLs: the status is open to read (-read-auth=none), as documented.
	proc := st.allocator(t, "fft-allocator", "-node-pool", "",
		"-round", "2s", "-http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort), "-log-level", "debug", "-read-auth", "none")

	// The round selects the job, lifts the gate and steers it to the A100 client.
	var alloc *api.Allocation
	testenv.Eventually(t, 90*time.Second, 500*time.Millisecond, "fft-train runs and completes", func() error {
		if proc.Exited() {
			t.Fatalf("fft-allocator exited")
		}
		stubs := allocsOf(t, c.API, "fft-train")
		if len(stubs) != 1 {
			return fmt.Errorf("%d allocations", len(stubs))
		}
		a, _, err := c.API.Allocations().Info(stubs[0].ID, nil)
		if err != nil {
			return err
		}
		switch a.ClientStatus {
		case "complete":
			alloc = a
			return nil
		case "failed", "lost":
			t.Fatalf("allocation %s %s", a.ID, a.ClientStatus)
		}
		return fmt.Errorf("allocation %s is %s", a.ID, a.ClientStatus)
	})
	if a100Devices[alloc.NodeID] == nil {
		t.Errorf("fft-train ran on node %s, want an A100 client (%s or %s)", alloc.NodeID, c.NodeIDs["a100-1"], c.NodeIDs["a100-2"])
	}
	seen := testenv.VisibleDevices(t, c.API, taskName, alloc)
	if len(seen) != 2 {
		t.Errorf("NVIDIA_VISIBLE_DEVICES = %q, want 2 GPUs", seen)
	}
	for _, id := range seen {
		if !a100Devices[alloc.NodeID][id] {
			t.Errorf("NVIDIA_VISIBLE_DEVICES id %q is not one of the GPUs of the A100 client it ran on", id)
		}
	}
	job, _, err := c.API.Jobs().Info("fft-train", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, con := range job.Constraints {
		if con.LTarget == "${meta.fft_gate}" {
			t.Errorf("the gate is still on the selected job")
		}
	}
	dev := job.TaskGroups[0].Tasks[0].Resources.Devices[0]
	if len(dev.Constraints) != 1 || dev.Constraints[0].LTarget != "${device.model}" || dev.Constraints[0].RTarget != modelA100 {
		t.Errorf("device constraints %+v, want one ${device.model} = %q", dev.Constraints, modelA100)
	}

	// The audit log in Consul: round 0 assigned fft-train to the A100 with its cost terms and
	// rho, and named the bad job's keys.
	var round struct {
		Round        int               `json:"round"`
		InputsDigest string            `json:"inputs_digest"`
		Assignment   map[string]string `json:"assignment"`
		Jobs         []struct {
			ID        string   `json:"id"`
			Model     string   `json:"model"`
			Reason    string   `json:"reason"`
			RhoBefore *float64 `json:"rho_before"`
			RhoAfter  *float64 `json:"rho_after"`
			Chosen    struct {
				Cost   float64 `json:"cost"`
				Volume float64 `json:"volume"`
			} `json:"chosen"`
		} `json:"jobs"`
		Invalid []struct {
			ID    string `json:"id"`
			Error string `json:"error"`
		} `json:"invalid"`
		SolveSeconds float64 `json:"solve_seconds"`
	}
	readKV(t, cs, prefix+"/rounds/000000000000", &round)
	if round.Assignment["default/fft-train"] != modelA100 || len(round.InputsDigest) != 64 {
		t.Errorf("round 0 record: assignment %v, digest %q", round.Assignment, round.InputsDigest)
	}
	var trainLine bool
	for _, l := range round.Jobs {
		if l.ID == "default/fft-train" {
			trainLine = l.RhoBefore != nil && l.RhoAfter != nil && l.Chosen.Volume > 0 && l.Model == modelA100
		}
	}
	if len(round.Jobs) != 3 || !trainLine {
		t.Errorf("round 0 job lines %+v: want 3, fft-train's with rho before/after and cost terms", round.Jobs)
	}
	if len(round.Invalid) != 2 || round.Invalid[0].ID != "default/fft-bad" ||
		!strings.Contains(round.Invalid[0].Error, `"fft.work" = "-5"`) || !strings.Contains(round.Invalid[0].Error, `"fft.troughput"`) ||
		round.Invalid[1].ID != "default/fft-no-work" || !strings.Contains(round.Invalid[1].Error, "fft.work") {
		t.Errorf("round 0 invalid jobs %+v: want fft-bad naming fft.work and fft.troughput, fft-no-work naming fft.work", round.Invalid)
	}
	var rec struct {
		Rho       *float64 `json:"rho"`
		Tau       float64  `json:"tau"`
		LastModel string   `json:"last_model"`
		Status    string   `json:"status"`
	}
	testenv.Eventually(t, 30*time.Second, 500*time.Millisecond, "the ledger marks fft-train finished", func() error {
		readJob(t, cs, "default/fft-train", &rec)
		if rec.Status != "finished" {
			return fmt.Errorf("status %q", rec.Status)
		}
		return nil
	})
	if rec.Rho == nil || rec.Tau <= 0 || rec.LastModel != modelA100 {
		t.Errorf("job record %+v: want rho, tau > 0 and last model %q", rec, modelA100)
	}

	// The bad job was left untouched: still gated, never placed.
	badJob, _, err := c.API.Jobs().Info("fft-bad", nil)
	if err != nil {
		t.Fatal(err)
	}
	if *badJob.Version != 0 || len(allocsOf(t, c.API, "fft-bad")) != 0 {
		t.Errorf("the bad job was changed (version %d) or placed", *badJob.Version)
	}
	if len(allocsOf(t, c.API, "fft-no-work")) != 0 {
		t.Errorf("the job without fft.work was placed")
	}

	// The jobs no model can run are held, untouched, with reasons that name the key.
	for id, want := range map[string]string{
		"fft-unknown-model": `fft.throughput = "NVIDIA H100 80GB HBM3=3" names no GPU model of the cluster`,
		"fft-too-big":       `device "nvidia/gpu" count = 8: more GPUs than any model`,
	} {
		var line struct {
			Status string `json:"status"`
		}
		readJob(t, cs, "default/"+id, &line)
		var reason string
		for _, l := range round.Jobs {
			if l.ID == "default/"+id {
				reason = l.Reason
			}
		}
		if line.Status != "no-fit" || !strings.Contains(reason, want) {
			t.Errorf("%s: status %q, reason %q; want no-fit and %q", id, line.Status, reason, want)
		}
		if !gated(t, c.API, id) || len(allocsOf(t, c.API, id)) != 0 {
			t.Errorf("%s was ungated or placed", id)
		}
	}

	// The allocator's own endpoint.
	body := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/v1/status", httpPort))
	var status struct {
		Rounds   int `json:"rounds"`
		Failures int `json:"failures"`
	}
	if err := json.Unmarshal([]byte(body), &status); err != nil || status.Rounds < 2 || status.Failures != 0 {
		t.Errorf("/v1/status = %s (%v): want 2+ rounds, no failures", body, err)
	}
	if m := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/v1/metrics", httpPort)); !strings.Contains(m, `fft_jobs{state="finished"} 1`) {
		t.Errorf("/v1/metrics lacks the finished job:\n%s", m)
	}
}

// stack is what each allocator test runs against: a Consul dev agent, a Nomad server with
// fake-GPU clients, and the fft-allocator binary, all under one temporary root.
type stack struct {
	*testenv.Cluster
	consul    *testenv.Consul
	root, bin string
}

// startStack puts every client without a node pool in "gpu", the allocator's default
// -node-pool.
func startStack(tb testing.TB, clients []testenv.FakeGPUClient) *stack {
	tb.Helper()
	for i := range clients {
		if clients[i].NodePool == "" {
			clients[i].NodePool = gpuPool
		}
	}
	nomad := testenv.RequireNomad(tb)
	consul := testenv.RequireConsul(tb)
	st := &stack{bin: testenv.MainBinary(tb, "fft-allocator"), root: testenv.TempDir(tb)}
	st.consul = testenv.StartConsul(tb, consul, st.root)
	st.Cluster = testenv.StartCluster(tb, nomad, st.root, clients)
	return st
}

// args prefixes extra with the flags that point an allocator at this stack. The tests run
// the paper's FFT (-policy fft), whose costs their comments work out; `fftctl dev`'s e2e test
// runs the allocator's default.
func (st *stack) args(extra ...string) []string {
	return append([]string{"-nomad-addr", st.Server.HTTP, "-consul-addr", st.consul.HTTP, "-consul-prefix", prefix, "-policy", "fft"}, extra...)
}

// allocator starts an fft-allocator replica against this stack.
func (st *stack) allocator(t testing.TB, name string, extra ...string) *testenv.Process {
	t.Helper()
	return testenv.StartProcess(t, name, st.root, st.bin, st.args(extra...)...)
}

// trainJobspec is jobspecs/fft-train.nomad.hcl, the example training job.
func trainJobspec(tb testing.TB) string {
	tb.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "jobspecs", "fft-train.nomad.hcl"))
	if err != nil {
		tb.Fatalf("reading the jobspec: %v", err)
	}
	return string(b)
}

func parseJob(t testing.TB, c *api.Client, jobspec, id, vars string) *api.Job {
	t.Helper()
	job, err := c.Jobs().ParseHCLOpts(&api.JobsParseRequest{JobHCL: jobspec, Variables: vars, Canonicalize: true})
	if err != nil {
		t.Fatalf("parsing the jobspec: %v", err)
	}
	job.ID, job.Name = &id, &id
	return job
}

// withGate adds the gate constraint a jobspec carries when the allocator runs without a GPU
// node pool (jobspecs/fft-train.nomad.hcl shows it commented out).
func withGate(job *api.Job) *api.Job {
	job.Constraints = append(job.Constraints, &api.Constraint{LTarget: "${meta.fft_gate}", RTarget: "held", Operand: "="})
	return job
}

// register submits the job as `nomad job run` does.
func register(t testing.TB, c *api.Client, job *api.Job) string {
	t.Helper()
	resp, _, err := c.Jobs().Register(job, nil)
	if err != nil {
		t.Fatalf("registering %s: %v", *job.ID, err)
	}
	return resp.EvalID
}

func allocsOf(t *testing.T, c *api.Client, jobID string) []*api.AllocationListStub {
	t.Helper()
	stubs, _, err := c.Jobs().Allocations(jobID, false, nil)
	if err != nil {
		t.Fatalf("allocations of %s: %v", jobID, err)
	}
	return stubs
}

func readKV(t testing.TB, cs *testenv.Consul, key string, v any) {
	t.Helper()
	var pairs []struct{ Value string }
	testenv.Eventually(t, 30*time.Second, 500*time.Millisecond, "Consul key "+key, func() error {
		b, code, err := cs.Get("/v1/kv/" + key)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("HTTP %d", code)
		}
		return json.Unmarshal(b, &pairs)
	})
	raw, err := base64.StdEncoding.DecodeString(pairs[0].Value)
	if err == nil {
		raw, err = gunzipped(raw)
	}
	if err != nil {
		t.Fatalf("decoding %s: %v", key, err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decoding %s: %v\n%s", key, err, raw)
	}
}

// gunzipped returns a value the store wrote, gunzipped if it is gzipped (values over 64 KiB,
// such as the record of a round with many jobs, are).
func gunzipped(b []byte) ([]byte, error) {
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		return b, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

// readJob decodes job id's ("namespace/job") record from the ledger's job chunks (layout 2:
// <prefix>/jobs/<chunk>, each a JSON object of records by job ID), waiting for it to appear.
func readJob(t testing.TB, cs *testenv.Consul, id string, v any) {
	t.Helper()
	var raw json.RawMessage
	testenv.Eventually(t, 30*time.Second, 500*time.Millisecond, "the ledger's record of "+id, func() error {
		b, code, err := cs.Get("/v1/kv/" + prefix + "/jobs/?recurse=true")
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("HTTP %d", code)
		}
		var pairs []struct{ Key, Value string }
		if err := json.Unmarshal(b, &pairs); err != nil {
			return err
		}
		for _, p := range pairs {
			val, err := base64.StdEncoding.DecodeString(p.Value)
			if err != nil {
				return err
			}
			var chunk map[string]json.RawMessage
			if err := json.Unmarshal(val, &chunk); err != nil {
				return fmt.Errorf("decoding %s: %w", p.Key, err)
			}
			if r, ok := chunk[id]; ok {
				raw = r
				return nil
			}
		}
		return fmt.Errorf("no record of %s in %d chunks", id, len(pairs))
	})
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decoding the record of %s: %v\n%s", id, err, raw)
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
