package allocator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
	"github.com/nomad-fft/nomad-fft/jobspecs"
)

// torchReport is the driver's report as the allocator stores it in Consul.
type torchReport struct {
	Done       float64  `json:"done"`
	Throughput *float64 `json:"throughput_per_second"`
	GPUModel   string   `json:"gpu_model"`
	GPUs       int      `json:"gpus"`
}

// torchWork is the job's steps; torchStepSeconds its pace (20 steps/s at most).
const (
	torchWork        = 600
	torchStepSeconds = 0.05
)

// A real PyTorch job (jobspecs/torch-train.nomad.hcl: an MLP, DistributedDataParallel over its
// 2 GPUs' worth of gloo processes) on the fft driver, with the allocator's rounds, on two
// hosts of 2 GPUs per model: it starts on an A100 client; `fftctl pin` to the V100 makes a
// round park it (the stop signal, a checkpoint at a step boundary) and start it on a V100
// client, where it resumes from that checkpoint in the shared folder; the throughput the driver reports there is the one the
// task's own step times give. Then it is asked for a checkpoint (SIGUSR1) and SIGKILLed in the
// middle of writing it: Nomad restarts it in place, it resumes from the checkpoint before and
// ignores the partial one. It ends with parameters bit for bit equal to those of the same job
// run straight through (same seed, same 2 processes), outside Nomad.
func TestTorchJobParkedResumedBitExact(t *testing.T) {
	py := requireTorch(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	pyDir := filepath.Join(root, "jobspecs", "python")
	const seed = 5

	// The uninterrupted run, meanwhile: as fast as it goes (the pace changes no number).
	refDir := t.TempDir()
	ref := exec.Command(py, filepath.Join(pyDir, "torch_train.py"), "--steps", strconv.Itoa(torchWork), "--seed", strconv.Itoa(seed))
	refTask := t.TempDir() // where the launcher makes its workers' rendezvous, as in a task
	ref.Env = append(cleanTorchEnv(), "FFT_CHECKPOINT_DIR="+refDir, "FFT_PROGRESS_FILE=", "FFT_GPU_COUNT=2", "PYTHONDONTWRITEBYTECODE=1",
		"NOMAD_TASK_DIR="+refTask)
	var refOut bytes.Buffer
	ref.Stdout, ref.Stderr = &refOut, &refOut
	if err := ref.Start(); err != nil {
		t.Fatalf("starting the uninterrupted run: %v", err)
	}
	refDone := make(chan error, 1)
	go func() { refDone <- ref.Wait() }()
	t.Cleanup(func() { _ = ref.Process.Kill() })

	shared := filepath.Join(testenv.TempDir(t), "shared-checkpoints")
	httpPort := testenv.FreePorts(t, 1)[0]
	stanza := fmt.Sprintf(`
plugin "nomad-driver-fft" {
  config {
    allocator_address = "http://127.0.0.1:%d"
    report_period     = "500ms"
    checkpoint_root   = %q
  }
}
`, httpPort, shared)
	dir := testenv.DriverPluginDir(t)
	st := startStack(t, []testenv.FakeGPUClient{
		{Name: "v100-1", Model: modelV100, Count: 2, Extra: `memory_mib = 16384`, PluginDir: dir, AgentExtra: stanza},
		{Name: "v100-2", Model: modelV100, Count: 2, Extra: `memory_mib = 16384`, PluginDir: dir, AgentExtra: stanza},
		{Name: "a100-1", Model: modelA100, Count: 2, PluginDir: dir, AgentExtra: stanza},
		{Name: "a100-2", Model: modelA100, Count: 2, PluginDir: dir, AgentExtra: stanza},
	})
	c, cs := st.Cluster, st.consul
	// The driver runs the task as nobody: the folders above its alloc dirs must be searchable.
	testenv.Traversable(t, st.root)
	testenv.AwaitFFTDriver(t, c, shared, "v100-1", "v100-2", "a100-1", "a100-2")
	// No ACLs here: the driver's reports carry no workload identity.
	proc := st.allocator(t, "fft-allocator", "-round", "2s", "-http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort),
		"-progress-auth", "none", "-log-level", "debug")
	fftctl := testenv.MainBinary(t, "fftctl")

	src, err := jobspecs.FS.ReadFile(jobspecs.TorchTrain)
	if err != nil {
		t.Fatal(err)
	}
	const jobID = "torch"
	// The A100 is faster for it: the first round starts it there.
	register(t, c.API, parseJob(t, c.API, string(src), jobID, fmt.Sprintf(`python = %q
python_dir = %q
work = %d
seed = %d
step_seconds = %g
checkpoint_write_seconds = 2
throughput = "NVIDIA A100-SXM4-40GB=4,Tesla V100-SXM2-16GB=3"`, py, pyDir, torchWork, seed, torchStepSeconds)))
	first := waitAlloc(t, c.API, proc, jobID, "running", "")
	if a100 := []string{c.NodeIDs["a100-1"], c.NodeIDs["a100-2"]}; !slices.Contains(a100, first.NodeID) {
		t.Fatalf("the job started on node %s, want an A100 client %q", first.NodeID, a100)
	}
	progressKey := prefix + "/progress/default/" + jobID
	reportWhere := func(what string, ok func(torchReport) bool) torchReport {
		t.Helper()
		var r torchReport
		testenv.Eventually(t, 90*time.Second, 300*time.Millisecond, what, func() error {
			if proc.Exited() {
				t.Fatalf("fft-allocator exited")
			}
			b, code, err := cs.Get("/v1/kv/" + progressKey + "?raw")
			if err != nil || code != 200 {
				return fmt.Errorf("reading %s: HTTP %d, %v", progressKey, code, err)
			}
			r = torchReport{}
			if b, err = gunzipped(b); err == nil {
				err = json.Unmarshal(b, &r)
			}
			if err != nil {
				return fmt.Errorf("%s = %s: %v", progressKey, b, err)
			}
			if !ok(r) {
				return fmt.Errorf("report %s", b)
			}
			return nil
		})
		return r
	}
	reportWhere("the job trains on the A100", func(r torchReport) bool { return r.GPUModel == modelA100 && r.Done >= 40 })

	// Pin it to the V100: a round parks it (its task checkpoints on the stop signal) and
	// starts it on the V100 client.
	if out, err := exec.Command(fftctl, "pin", "-consul-addr", cs.HTTP, "-consul-prefix", prefix, jobID, modelV100).CombinedOutput(); err != nil {
		t.Fatalf("fftctl pin: %v\n%s", err, out)
	}
	moved := waitAlloc(t, c.API, proc, jobID, "running", first.ID)
	if v100 := []string{c.NodeIDs["v100-1"], c.NodeIDs["v100-2"]}; !slices.Contains(v100, moved.NodeID) {
		t.Fatalf("the job resumed on node %s, want a V100 client %q", moved.NodeID, v100)
	}
	parked := checkpointEvent(t, c.API, first)
	if parked.Details["reason"] != "stop" {
		t.Errorf("the A100 run's checkpoint event %v: want reason stop", parked.Details)
	}
	parkStep, _ := strconv.Atoi(parked.Details["step"])
	if parkStep < 40 || parkStep >= torchWork {
		t.Fatalf("parked at step %d: want mid-training", parkStep)
	}
	t.Logf("parked on the A100 by a round: %s", parked.DriverMessage)
	resumedLine := fmt.Sprintf("training from step %d to %d on 2 process(es)", parkStep, torchWork)
	testenv.Eventually(t, 60*time.Second, 300*time.Millisecond, "the V100 run resumes from the park's checkpoint", func() error {
		if out := allocLog(t, c.API, moved, "stdout"); !strings.Contains(out, resumedLine) {
			return fmt.Errorf("no %q in the V100 run's output:\n%s", resumedLine, tail(out, 5))
		}
		return nil
	})

	// The throughput the driver reports from the V100 is the one the task's step times give,
	// over its last 40 steps: all of them the V100 run's, whose first step line is parkStep+1
	// (a report at exactly parkStep+40 would ask for the A100 run's last line).
	r := reportWhere("a V100 report with a throughput", func(r torchReport) bool {
		return r.GPUModel == modelV100 && r.Throughput != nil && r.Done > float64(parkStep)+40
	})
	// The report can come before the step lines reach the task's log (Nomad's logmon copies
	// them from a FIFO), so read the log until it holds the reported step.
	var measured float64
	var n int
	testenv.Eventually(t, 15*time.Second, 250*time.Millisecond, "the V100 run's log reaches the reported step", func() error {
		if measured, n = stepRate(allocLog(t, c.API, moved, "stdout"), int(r.Done)-40, int(r.Done)); n == 0 {
			return fmt.Errorf("no step lines %d and %d in the V100 run's log", int(r.Done)-40, int(r.Done))
		}
		return nil
	})
	t.Logf("V100: reported %.2f steps/s, the task's step times %.2f steps/s over %d steps; at most %.0f/s by its pace", *r.Throughput, measured, n, 1/torchStepSeconds)
	if n < 30 || r.GPUs != 2 || *r.Throughput < 0.8*measured || *r.Throughput > 1.2*measured || *r.Throughput > 1/torchStepSeconds*1.05 {
		t.Errorf("V100 report %+v (throughput %.2f): want 2 GPUs and within 20%% of the measured %.2f steps/s (%d steps)", r, *r.Throughput, measured, n)
	}

	// Ask for a checkpoint and SIGKILL the task in the middle of writing it.
	// The driver keeps a job's checkpoints per registration (its create index).
	reg, _, err := c.API.Jobs().Info(jobID, nil)
	if err != nil {
		t.Fatalf("reading the job: %v", err)
	}
	ckptDir := filepath.Join(shared, "default", jobID, fmt.Sprintf("create-index-%d", *reg.CreateIndex), "main", taskName)
	if err := c.API.Allocations().Signal(moved, nil, taskName, "SIGUSR1"); err != nil {
		t.Fatalf("signalling the task: %v", err)
	}
	var partial string
	testenv.Eventually(t, 30*time.Second, 20*time.Millisecond, "a checkpoint write under way", func() error {
		matches, _ := filepath.Glob(filepath.Join(ckptDir, "ckpt-*.pt.tmp.*"))
		if len(matches) == 0 {
			return fmt.Errorf("no temporary checkpoint file in %s", ckptDir)
		}
		partial = matches[0]
		return nil
	})
	killed := killTask(t, moved.ID)
	killStep, _ := strconv.Atoi(strings.TrimPrefix(strings.SplitN(filepath.Base(partial), ".", 2)[0], "ckpt-"))
	t.Logf("SIGKILLed %d processes while %s was being written", killed, filepath.Base(partial))
	if _, err := os.Stat(strings.SplitN(partial, ".tmp.", 2)[0]); err == nil {
		t.Fatalf("the checkpoint of step %d was complete before the kill: raise checkpoint_write_seconds", killStep)
	}
	if killStep <= parkStep {
		t.Fatalf("the killed write is of step %d, not after the park's %d", killStep, parkStep)
	}

	// Nomad restarts the task in place; it resumes from the park's checkpoint and finishes.
	testenv.Eventually(t, 120*time.Second, 500*time.Millisecond, "the job completes", func() error {
		a, _, err := c.API.Allocations().Info(moved.ID, nil)
		if err != nil {
			return err
		}
		if a.ClientStatus == api.AllocClientStatusFailed {
			t.Fatalf("the V100 allocation failed: %v\n%s", eventList(a), tail(allocLog(t, c.API, moved, "stderr"), 20))
		}
		if a.ClientStatus != api.AllocClientStatusComplete {
			return fmt.Errorf("the V100 allocation is %s", a.ClientStatus)
		}
		return nil
	})
	out := allocLog(t, c.API, moved, "stdout")
	if got := strings.Count(out, resumedLine); got != 2 {
		t.Errorf("the V100 output resumes %d times from step %d, want twice (before and after the kill):\n%s", got, parkStep, grepLines(out, "training from"))
	}
	if !strings.Contains(out, fmt.Sprintf("finished at step %d", torchWork)) {
		t.Errorf("the job did not finish its %d steps:\n%s", torchWork, tail(out, 5))
	}
	if errOut := allocLog(t, c.API, moved, "stderr"); !strings.Contains(errOut, "removing "+filepath.Base(partial)+", a checkpoint write that did not finish") {
		t.Errorf("the restarted run did not remove the partial checkpoint %s:\n%s", filepath.Base(partial), tail(errOut, 10))
	}

	select {
	case err := <-refDone:
		if err != nil {
			t.Fatalf("the uninterrupted run: %v\n%s", err, refOut.String())
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("the uninterrupted run did not end:\n%s", refOut.String())
	}
	if left, _ := filepath.Glob(filepath.Join(refTask, "torch-train-*")); len(left) > 0 {
		t.Errorf("the uninterrupted run left its rendezvous folder %v", left)
	}
	got, err := os.ReadFile(filepath.Join(ckptDir, "final-params.json"))
	if err != nil {
		t.Fatalf("the job's final parameters: %v", err)
	}
	want, err := os.ReadFile(filepath.Join(refDir, "final-params.json"))
	if err != nil {
		t.Fatalf("the uninterrupted run's final parameters: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the parked, moved and killed job ends with other parameters than the uninterrupted run (%d and %d bytes of JSON)", len(got), len(want))
	}
	if !strings.Contains(string(want), fmt.Sprintf(`"step": %d`, torchWork)) {
		t.Errorf("the uninterrupted run's parameters are not of step %d: %.200s", torchWork, want)
	}
}

// requireTorch returns a python3 that imports torch; without one the test is skipped, or
// fails under FFT_REQUIRE_TORCH=1 (make e2e sets it).
func requireTorch(t *testing.T) string {
	t.Helper()
	py, version, err := jobspecs.TorchPython(context.Background())
	if err != nil {
		if os.Getenv("FFT_REQUIRE_TORCH") == "1" {
			t.Fatalf("FFT_REQUIRE_TORCH=1: %v", err)
		}
		t.Skipf("%v (FFT_REQUIRE_TORCH=1 makes this a failure)", err)
	}
	t.Logf("PyTorch %s with %s", version, py)
	return py
}

// cleanTorchEnv is this process's environment without torchrun's variables.
func cleanTorchEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "RANK" && k != "WORLD_SIZE" && k != "LOCAL_RANK" {
			out = append(out, kv)
		}
	}
	return out
}

func checkpointEvent(t *testing.T, c *api.Client, a *api.Allocation) *api.TaskEvent {
	t.Helper()
	var ev *api.TaskEvent
	testenv.Eventually(t, 30*time.Second, 300*time.Millisecond, "the checkpoint event of "+a.ID, func() error {
		info, _, err := c.Allocations().Info(a.ID, nil)
		if err != nil {
			return err
		}
		if st := info.TaskStates[taskName]; st != nil {
			for _, e := range st.Events {
				if e.Type == api.TaskDriverMessage && strings.HasPrefix(e.DriverMessage, "Checkpoint saved: ") {
					ev = e
					return nil
				}
			}
		}
		return fmt.Errorf("events %v", eventList(info))
	})
	return ev
}

func eventList(a *api.Allocation) []string {
	var out []string
	if st := a.TaskStates[taskName]; st != nil {
		for _, e := range st.Events {
			out = append(out, e.Type+": "+e.DisplayMessage)
		}
	}
	return out
}

// allocLog is the task's stdout or stderr log, all its runs in the allocation.
func allocLog(t *testing.T, c *api.Client, a *api.Allocation, stream string) string {
	t.Helper()
	r, err := c.AllocFS().Cat(a, "alloc/logs/"+taskName+"."+stream+".0", nil)
	if err != nil {
		t.Fatalf("reading the %s of %s: %v", stream, a.ID, err)
	}
	defer r.Close()
	b, _ := io.ReadAll(r)
	return string(b)
}

var stepLine = regexp.MustCompile(`(?m)^step (\d+) loss \S+ t (\S+)$`)

// stepRate is the rate the task's own step lines give between steps from and to (the last run
// that printed them), and the steps it spans.
func stepRate(out string, from, to int) (float64, int) {
	times := map[int]float64{}
	for _, m := range stepLine.FindAllStringSubmatch(out, -1) {
		s, _ := strconv.Atoi(m[1])
		ts, _ := strconv.ParseFloat(m[2], 64)
		times[s] = ts
	}
	t0, ok0 := times[from]
	t1, ok1 := times[to]
	if !ok0 || !ok1 || t1 <= t0 {
		return 0, 0
	}
	return float64(to-from) / (t1 - t0), to - from
}

// killTask SIGKILLs every process of the allocation's task (the launcher and its workers):
// the processes whose environment names the allocation.
func killTask(t *testing.T, allocID string) int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !bytes.Contains(append([]byte{0}, env...), []byte("\x00NOMAD_ALLOC_ID="+allocID+"\x00")) {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if !bytes.Contains(cmd, []byte("torch_train.py")) {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no process of allocation %s to kill", allocID)
	}
	return n
}

func tail(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
