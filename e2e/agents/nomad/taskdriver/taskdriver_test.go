package taskdriver

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	modelV100 = "Tesla V100-SXM2-16GB"
	modelA100 = "NVIDIA A100-SXM4-40GB"
	jobID     = "train-driver"
	taskName  = "train"
)

// report is the body the driver PUTs (allocator/report.Report in the main module, which
// this module cannot import).
type report struct {
	Done                float64  `json:"done"`
	ThroughputPerSecond *float64 `json:"throughput_per_second"`
	GPUModel            string   `json:"gpu_model"`
	GPUs                int      `json:"gpus"`
	RestartSeconds      *float64 `json:"restart_seconds"`
	CheckpointBytes     *float64 `json:"checkpoint_bytes"`
	CheckpointSeconds   *float64 `json:"checkpoint_seconds"`
}

// fakeAllocator records the reports PUT to /v1/progress/<namespace>/<job>, and answers the
// driver's GET /v1/incarnation.
type fakeAllocator struct {
	mu      sync.Mutex
	reports []report
}

func (a *fakeAllocator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/v1/incarnation/default/"+jobID && r.URL.Query().Get("alloc") != "" {
		// The job's registration, which the driver keys checkpoint_root's folders by: one
		// here, for both runs.
		fmt.Fprintf(w, `{"job": "default/%s", "alloc": %q, "create_index": 7}`, jobID, r.URL.Query().Get("alloc"))
		return
	}
	var rep report
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if r.Method != http.MethodPut || r.URL.Path != "/v1/progress/default/"+jobID || dec.Decode(&rep) != nil {
		http.Error(w, "unexpected report", http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	a.reports = append(a.reports, rep)
	a.mu.Unlock()
	fmt.Fprintf(w, `{"job": "default/%s", "done": %g}`, jobID, rep.Done)
}

// last is the latest report that satisfies ok.
func (a *fakeAllocator) last(ok func(report) bool) (report, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := len(a.reports) - 1; i >= 0; i-- {
		if ok(a.reports[i]) {
			return a.reports[i], true
		}
	}
	return report{}, false
}

func (a *fakeAllocator) all() []report {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]report(nil), a.reports...)
}

func TestTrainingJobOnTheDriver(t *testing.T) {
	nomad := testenv.RequireNomad(t)
	root := testenv.TempDir(t)
	shared := filepath.Join(root, "shared-checkpoints") // a shared file system, on one machine
	alloc := &fakeAllocator{}
	srv := httptest.NewServer(alloc)
	defer srv.Close()
	stanza := fmt.Sprintf(`
plugin "nomad-driver-fft" {
  config {
    allocator_address = %q
    report_period     = "300ms"
    checkpoint_root   = %q
  }
}
`, srv.URL, shared)
	dir := testenv.DriverPluginDir(t)
	c := testenv.StartCluster(t, nomad, root, []testenv.FakeGPUClient{
		{Name: "v100", Model: modelV100, Count: 2, Extra: "memory_mib = 16384", PluginDir: dir, AgentExtra: stanza},
		{Name: "a100", Model: modelA100, Count: 2, PluginDir: dir, AgentExtra: stanza},
	})
	testenv.Traversable(t, root)
	testenv.AwaitFFTDriver(t, c, shared, "v100", "a100")

	// Run 1 on the V100 client.
	job := parseJob(t, c.API, "work=100000", "step_seconds=0.05", "checkpoint_kb=64", "gpu_count=2")
	onNode(job, "fft-e2e-v100")
	register(t, c.API, job)
	first := runningAlloc(t, c.API, "")
	reported := func(what string, ok func(report) bool) report {
		t.Helper()
		var r report
		testenv.Eventually(t, 60*time.Second, 200*time.Millisecond, what, func() error {
			var found bool
			if r, found = alloc.last(ok); !found {
				return fmt.Errorf("no such report among %d", len(alloc.all()))
			}
			return nil
		})
		return r
	}
	r1 := reported("a V100 report with a rate", func(r report) bool {
		return r.GPUModel == modelV100 && r.ThroughputPerSecond != nil && r.Done >= 20
	})
	t.Logf("V100 report: %s", show(r1))
	if r1.GPUs != 2 || r1.RestartSeconds == nil || *r1.RestartSeconds > 10 || *r1.ThroughputPerSecond > 20.5 || *r1.ThroughputPerSecond < 5 {
		t.Errorf("V100 report %s: want 2 GPUs, a restart time, at most 20 steps/s (one per 0.05 s)", show(r1))
	}
	if got := devices(t, c.API, first); len(got) != 2 {
		t.Errorf("the task saw CUDA_VISIBLE_DEVICES=%v, want its 2 allocated GPUs", got)
	}

	// Kill the V100 client's driver plugin: Nomad starts a new one, which recovers the task.
	before := r1.Done
	pid := pluginPID(t, dir, "v100")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing the plugin (pid %d): %v", pid, err)
	}
	testenv.Eventually(t, 60*time.Second, 500*time.Millisecond, "a new plugin process", func() error {
		if p := pluginPIDOrZero(dir, "v100"); p == 0 || p == pid {
			return fmt.Errorf("plugin pid %d", p)
		}
		return nil
	})
	reported("reports after the plugin's restart", func(r report) bool { return r.GPUModel == modelV100 && r.Done > before+40 })
	if st := taskState(t, c.API, first); st.State != "running" || st.Restarts != 0 || countEvents(st, api.TaskStarted) != 1 {
		t.Errorf("after the plugin was killed: state %s, %d restarts, %d start events; want the same task running", st.State, st.Restarts, countEvents(st, api.TaskStarted))
	}
	for i, r := range alloc.all()[1:] {
		if prev := alloc.all()[i]; r.GPUModel == prev.GPUModel && r.Done < prev.Done {
			t.Errorf("report %d went back: done %g after %g", i+1, r.Done, prev.Done)
		}
	}

	// Park it as the allocator does (nomad alloc stop): the checkpoint event.
	if _, err := c.API.Allocations().Stop(first, nil); err != nil {
		t.Fatalf("stopping the allocation: %v", err)
	}
	var ckpt *api.TaskEvent
	testenv.Eventually(t, 60*time.Second, 300*time.Millisecond, "the checkpoint event", func() error {
		st := taskState(t, c.API, first)
		for _, ev := range st.Events {
			if ev.Type == api.TaskDriverMessage && strings.HasPrefix(ev.DriverMessage, "Checkpoint saved: ") {
				ckpt = ev
				return nil
			}
		}
		return fmt.Errorf("events %v", eventMessages(st))
	})
	t.Logf("event: %s %v", ckpt.DriverMessage, ckpt.Details)
	step, err := strconv.Atoi(ckpt.Details["step"])
	if err != nil || step < int(before) || ckpt.Details["checkpoint_bytes"] != "65536" || ckpt.Details["reason"] != "stop" {
		t.Fatalf("checkpoint event details %v: want a step >= %g, 65536 bytes, reason stop", ckpt.Details, before)
	}
	reported("the checkpoint in a report", func(r report) bool {
		return r.CheckpointBytes != nil && *r.CheckpointBytes == 65536 && r.CheckpointSeconds != nil
	})

	// Run 2 on the A100 client resumes from the checkpoint in the shared folder.
	onNode(job, "fft-e2e-a100")
	register(t, c.API, job)
	second := runningAlloc(t, c.API, first.ID)
	r2 := reported("an A100 report", func(r report) bool { return r.GPUModel == modelA100 && r.ThroughputPerSecond != nil })
	t.Logf("A100 report: %s", show(r2))
	if r2.Done <= float64(step) || r2.RestartSeconds == nil || r2.CheckpointBytes == nil || *r2.CheckpointBytes != 65536 {
		t.Errorf("A100 report %s: want done beyond the checkpoint's step %d, a restart time and the checkpoint's 65536 bytes", show(r2), step)
	}
	if out := stdout(t, c.API, second); !strings.Contains(out, fmt.Sprintf("resuming from step %d\n", step)) {
		t.Errorf("the second run's output does not resume from step %d:\n%s", step, out)
	}
}

func parseJob(t *testing.T, c *api.Client, vars ...string) *api.Job {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(root, "jobspecs", "fft-train-driver.nomad.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	job, err := c.Jobs().ParseHCLOpts(&api.JobsParseRequest{JobHCL: string(src), Variables: strings.Join(vars, "\n"), Canonicalize: true})
	if err != nil {
		t.Fatalf("parsing the jobspec: %v", err)
	}
	id := jobID
	job.ID, job.Name = &id, &id
	return job
}

// onNode pins the job to one client, as the allocator's steering would pick a model.
func onNode(job *api.Job, node string) {
	job.Constraints = []*api.Constraint{{LTarget: "${node.unique.name}", Operand: "=", RTarget: node}}
}

func register(t *testing.T, c *api.Client, job *api.Job) {
	t.Helper()
	if _, _, err := c.Jobs().Register(job, nil); err != nil {
		t.Fatalf("registering: %v", err)
	}
}

// runningAlloc waits for a running allocation of the job other than not.
func runningAlloc(t *testing.T, c *api.Client, not string) *api.Allocation {
	t.Helper()
	var found *api.Allocation
	testenv.Eventually(t, 90*time.Second, 500*time.Millisecond, "a running allocation", func() error {
		stubs, _, err := c.Jobs().Allocations(jobID, true, nil)
		if err != nil {
			return err
		}
		var states []string
		for _, s := range stubs {
			states = append(states, s.ClientStatus)
			if s.ID != not && s.ClientStatus == api.AllocClientStatusRunning {
				found, _, err = c.Allocations().Info(s.ID, nil)
				return err
			}
		}
		return fmt.Errorf("allocations %v", states)
	})
	return found
}

func taskState(t *testing.T, c *api.Client, a *api.Allocation) *api.TaskState {
	t.Helper()
	info, _, err := c.Allocations().Info(a.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st := info.TaskStates[taskName]; st != nil {
		return st
	}
	return &api.TaskState{}
}

func countEvents(st *api.TaskState, typ string) int {
	n := 0
	for _, ev := range st.Events {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

func eventMessages(st *api.TaskState) []string {
	var out []string
	for _, ev := range st.Events {
		out = append(out, ev.Type+": "+ev.DisplayMessage)
	}
	return out
}

func stdout(t *testing.T, c *api.Client, a *api.Allocation) string {
	t.Helper()
	var out string
	testenv.Eventually(t, 30*time.Second, 300*time.Millisecond, "the task's output", func() error {
		r, err := c.AllocFS().Cat(a, "alloc/logs/"+taskName+".stdout.0", nil)
		if err != nil {
			return err
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		out = string(b)
		if err == nil && !strings.Contains(out, "CUDA_VISIBLE_DEVICES=") {
			return fmt.Errorf("no CUDA_VISIBLE_DEVICES line yet: %q", out)
		}
		return err
	})
	return out
}

var cudaLine = regexp.MustCompile(`CUDA_VISIBLE_DEVICES=(\S*) FFT_GPU_MODEL=`)

// devices are the GPUs the task printed it sees; they must be the allocation's.
func devices(t *testing.T, c *api.Client, a *api.Allocation) []string {
	t.Helper()
	m := cudaLine.FindStringSubmatch(stdout(t, c, a))
	if m == nil || m[1] == "" {
		return nil
	}
	ids := strings.Split(m[1], ",")
	want := map[string]bool{}
	for _, d := range a.AllocatedResources.Tasks[taskName].Devices {
		for _, id := range d.DeviceIDs {
			want[id] = true
		}
	}
	for _, id := range ids {
		if !want[id] {
			t.Errorf("the task sees %s, not among its allocated devices %v", id, want)
		}
	}
	return ids
}

func show(r report) string {
	b, _ := json.Marshal(r)
	return string(b)
}

// pluginPID is the driver plugin process of client name: the nomad-driver-fft of dir run
// without arguments (its executors have some) by the agent whose config is <name>.hcl.
func pluginPID(t *testing.T, dir, name string) int {
	t.Helper()
	pid := pluginPIDOrZero(dir, name)
	if pid == 0 {
		t.Fatalf("no nomad-driver-fft process under the %s client", name)
	}
	return pid
}

func pluginPIDOrZero(dir, name string) int {
	exe := filepath.Join(dir, testenv.DriverBinary)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		args := cmdline(pid)
		if len(args) != 1 || args[0] != exe {
			continue
		}
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// stat is "pid (comm) state ppid ..."; comm has no spaces here.
		f := strings.Fields(string(stat))
		if len(f) < 4 {
			continue
		}
		ppid, _ := strconv.Atoi(f[3])
		for _, a := range cmdline(ppid) {
			if strings.HasSuffix(a, "/"+name+".hcl") {
				return pid
			}
		}
	}
	return 0
}

func cmdline(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}
