package task

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/helper/uuid"
	"github.com/hashicorp/nomad/nomad/structs"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	dtestutil "github.com/hashicorp/nomad/plugins/drivers/testutils"

	"github.com/nomad-fft/nomad-fft/allocator/report"
)

// allocator records the reports PUT to it, parsed by the allocator's own parser.
type allocator struct {
	mu      sync.Mutex
	reports map[string][]report.Report
	// tokens are the X-Nomad-Token headers of the reports, by job.
	tokens map[string][]string
	// index is the create index GET /v1/incarnation answers (the job's registration);
	// asked counts those requests and allocs holds the allocations they named.
	index  uint64
	asked  int
	allocs []string
	srv    *httptest.Server
}

func newAllocator(t *testing.T) *allocator {
	a := &allocator{reports: map[string][]report.Report{}, tokens: map[string][]string{}, index: 1}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/incarnation/") {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.asked++
			a.allocs = append(a.allocs, r.URL.Query().Get("alloc"))
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"job": strings.TrimPrefix(r.URL.Path, "/v1/incarnation/"),
				"alloc": r.URL.Query().Get("alloc"), "create_index": a.index})
			return
		}
		body, _ := io.ReadAll(r.Body)
		rep, err := report.Parse(body)
		if r.Method != http.MethodPut || !strings.HasPrefix(r.URL.Path, "/v1/progress/") || err != nil {
			t.Errorf("allocator got %s %s %s: %v", r.Method, r.URL.Path, body, err)
			http.Error(w, "bad report", http.StatusBadRequest)
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		id := strings.TrimPrefix(r.URL.Path, "/v1/progress/")
		a.reports[id] = append(a.reports[id], rep)
		a.tokens[id] = append(a.tokens[id], r.Header.Get("X-Nomad-Token"))
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *allocator) setIndex(i uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.index = i
}

// last is the latest report of job id, and false before one.
func (a *allocator) last(id string) (report.Report, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	rs := a.reports[id]
	if len(rs) == 0 {
		return report.Report{}, false
	}
	return rs[len(rs)-1], true
}

// await waits up to 5 s for a report of job id that satisfies ok, and returns the latest.
func (a *allocator) await(t *testing.T, id string, ok func(report.Report) bool) report.Report {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, found := a.last(id)
		if found && ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("the latest report of %s is %+v (%v), not the one awaited", id, r, found)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// newHarness is a driver behind Nomad's DriverHarness (real gRPC), configured with cfg.
func newHarness(t *testing.T, cfg map[string]any) (*dtestutil.DriverHarness, *Driver, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	d := New(ctx, hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: testLog{t}}))
	h := dtestutil.NewDriverHarness(t, d)
	if cfg == nil {
		cfg = map[string]any{}
	}
	if _, ok := cfg["default_user"]; !ok {
		// The harness's folders and the fake trainer (the test binary) are root's, 0700:
		// these tests run their tasks as root, which must be allowed explicitly.
		// TestTasksRunUnprivileged runs them as the default user, nobody.
		cfg["default_user"], cfg["allow_root"] = "root", true
	}
	var b []byte
	if err := base.MsgPackEncode(&b, cfg); err != nil {
		t.Fatal(err)
	}
	if err := h.SetConfig(&base.Config{PluginConfig: b}); err != nil {
		t.Fatalf("SetConfig: %v", err)
	}
	return h, d, cancel
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// newTask is a task running the fake trainer with args, two V100s allocated.
func newTask(t *testing.T, h *dtestutil.DriverHarness, command string, args ...string) *drivers.TaskConfig {
	t.Helper()
	task := &drivers.TaskConfig{
		ID: uuid.Generate(), AllocID: uuid.Generate(), Name: "train", JobID: "job-" + uuid.Generate()[:8],
		Namespace: "default", TaskGroupName: "main",
		// What the client passes from nomad-device-fft's reservation of two V100s.
		DeviceEnv: map[string]string{"NVIDIA_VISIBLE_DEVICES": "GPU-aaaa,GPU-bbbb", "FFT_GPU_MODEL": "Tesla V100-SXM2-16GB"},
		Resources: &drivers.Resources{NomadResources: &structs.AllocatedTaskResources{}, LinuxResources: &drivers.LinuxResources{}},
	}
	cleanup := h.MkAllocDir(task, true) // with logmon, for the stdout pattern
	t.Cleanup(func() {
		cleanup()
		// Nomad's harness destroys the alloc folder but leaves the temporary folder it made
		// around it (nomad_driver_harness-*), empty.
		_ = os.Remove(filepath.Dir(task.AllocDir))
	})
	if command == "" {
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		command, args = self, append([]string{"fake-trainer"}, args...)
	}
	if err := task.EncodeConcreteDriverConfig(&rawTaskConfig{Command: command, Args: args}); err != nil {
		t.Fatal(err)
	}
	return task
}

// start starts task and makes sure its executor is gone at the end.
func start(t *testing.T, h *dtestutil.DriverHarness, task *drivers.TaskConfig) *drivers.TaskHandle {
	t.Helper()
	handle, _, err := h.StartTask(task)
	if err != nil {
		t.Fatalf("StartTask: %v", err)
	}
	// On the driver itself, not through the harness: the first task folder's cleanup
	// (MkAllocDir's) closes the harness's connection, and a test of several tasks would
	// leave the others' executors running, and their sockets in TMPDIR.
	d := h.Impl()
	t.Cleanup(func() {
		if err := d.DestroyTask(task.ID, true); err != nil && !errors.Is(err, drivers.ErrTaskNotFound) {
			t.Errorf("destroying task %s: %v", task.ID, err)
		}
	})
	waitStarted(t, h, task.ID, 10*time.Second)
	return handle
}

// waitStarted waits until the task is running or has already exited. The harness's
// WaitUntilStarted waits for running only, and polls every 100 ms: a task of a few shell
// commands can exit before its first look on a loaded machine (TestTasksRunUnprivileged
// failed so, with the tests pinned to one core), and the tests wait for its result anyway.
func waitStarted(t *testing.T, h *dtestutil.DriverHarness, taskID string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		status, err := h.InspectTask(taskID)
		if err != nil {
			t.Fatalf("inspecting task %s: %v", taskID, err)
		}
		if status.State == drivers.TaskStateRunning || status.State == drivers.TaskStateExited {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s never started: still %q after %s", taskID, status.State, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func wait(t *testing.T, h *dtestutil.DriverHarness, taskID string, timeout time.Duration) *drivers.ExitResult {
	t.Helper()
	ch, err := h.WaitTask(context.Background(), taskID)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-ch:
		return res
	case <-time.After(timeout):
		t.Fatalf("task %s still running after %s", taskID, timeout)
		return nil
	}
}

// eventsOf collects the task events of taskID.
func eventsOf(t *testing.T, h *dtestutil.DriverHarness, taskID string) func(timeout time.Duration, prefix string) *drivers.TaskEvent {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := h.TaskEvents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return func(timeout time.Duration, prefix string) *drivers.TaskEvent {
		t.Helper()
		deadline := time.After(timeout)
		for {
			select {
			case ev := <-ch:
				if ev.TaskID == taskID && strings.HasPrefix(ev.Message, prefix) {
					return ev
				}
			case <-deadline:
				t.Fatalf("no task event %q within %s", prefix, timeout)
				return nil
			}
		}
	}
}

// awaitProgress waits for the trainer's first progress lines: it has set up its signal
// handlers by then (a signal before would end it).
func awaitProgress(t *testing.T, task *drivers.TaskConfig, lines int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(task.TaskDir().LocalDir, progressFileName))
		if strings.Count(string(b), "\n") >= lines {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the trainer wrote %d progress lines in 20s, want %d", strings.Count(string(b), "\n"), lines)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func progressLines(t *testing.T, task *drivers.TaskConfig) int {
	b, err := os.ReadFile(filepath.Join(task.TaskDir().LocalDir, progressFileName))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

func TestCompletesAndReportsRate(t *testing.T) {
	a := newAllocator(t)
	h, _, _ := newHarness(t, map[string]any{"allocator_address": a.srv.URL, "report_period": "200ms"})
	envOut := filepath.Join(t.TempDir(), "env.json")
	const rate = 100.0
	task := newTask(t, h, "", "-rate", "100", "-warmup", "10", "-every", "5", "-total", "300", "-restart", "300ms", "-env-out", envOut)
	start(t, h, task)
	if res := wait(t, h, task.ID, 30*time.Second); !res.Successful() {
		t.Fatalf("exit %+v", res)
	}
	// The follow loop reads and reports once more after the exit.
	r := a.await(t, "default/"+task.JobID, func(r report.Report) bool { return r.Done == 300 })
	if r.Done != 300 || r.GPUModel != "Tesla V100-SXM2-16GB" || r.GPUs != 2 {
		t.Errorf("report %+v: want done 300 on 2 Tesla V100-SXM2-16GB", r)
	}
	if r.ThroughputPerSecond != nil && r.RestartSeconds != nil {
		t.Logf("published throughput %.3f/s (true %g/s), restart %.3f s", *r.ThroughputPerSecond, rate, *r.RestartSeconds)
	}
	if r.ThroughputPerSecond == nil || math.Abs(*r.ThroughputPerSecond-rate)/rate > 0.05 {
		t.Errorf("throughput %v, want %g within 5%%", r.ThroughputPerSecond, rate)
	}
	if r.RestartSeconds == nil || *r.RestartSeconds < 0.3 || *r.RestartSeconds > 3 {
		t.Errorf("restart_seconds %v, want the trainer's 0.3 s start-up plus the first 5 units (0.2 s) and its launch", r.RestartSeconds)
	}
	var env map[string]string
	b, _ := os.ReadFile(envOut)
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatalf("the trainer's environment: %v (%s)", err, b)
	}
	for k, want := range map[string]string{
		EnvCUDAVisibleDevices: "GPU-aaaa,GPU-bbbb", EnvNVIDIAVisibleDevices: "GPU-aaaa,GPU-bbbb",
		EnvGPUModel: "Tesla V100-SXM2-16GB", EnvGPUCount: "2", EnvCheckpointSignal: "SIGUSR1",
		EnvCheckpointDir: filepath.Join(task.TaskDir().SharedAllocDir, "data", "fft-checkpoint", "train"),
	} {
		if env[k] != want {
			t.Errorf("the task's %s = %q, want %q", k, env[k], want)
		}
	}
}

// TestReportsCarryTheTaskIdentity: each report carries the reporting task's own workload
// identity, from secrets/nomad_token (identity { file = true }) or else NOMAD_TOKEN
// (identity { env = true }); a token file that is a symbolic link is not followed.
func TestReportsCarryTheTaskIdentity(t *testing.T) {
	for _, tc := range []struct {
		name, file, env, want string
		link                  bool
	}{
		{name: "file", file: "jwt.from.file\n", want: "jwt.from.file"},
		{name: "env", env: "jwt.from.env", want: "jwt.from.env"},
		{name: "file before env", file: "jwt.from.file", env: "jwt.from.env", want: "jwt.from.file"},
		{name: "link not followed", file: "jwt.of.another.task", link: true, env: "jwt.from.env", want: "jwt.from.env"},
		{name: "none", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAllocator(t)
			h, _, _ := newHarness(t, map[string]any{"allocator_address": a.srv.URL, "report_period": "100ms"})
			task := newTask(t, h, "", "-rate", "200", "-every", "5", "-total", "40")
			if tc.env != "" {
				task.Env = map[string]string{"NOMAD_TOKEN": tc.env}
			}
			if tc.file != "" {
				path := filepath.Join(task.TaskDir().SecretsDir, "nomad_token")
				if tc.link {
					other := filepath.Join(t.TempDir(), "other-token")
					if err := os.WriteFile(other, []byte(tc.file), 0o600); err != nil {
						t.Fatal(err)
					}
					if err := os.Symlink(other, path); err != nil {
						t.Fatal(err)
					}
				} else if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			start(t, h, task)
			wait(t, h, task.ID, 20*time.Second)
			a.await(t, "default/"+task.JobID, func(r report.Report) bool { return r.Done == 40 })
			a.mu.Lock()
			defer a.mu.Unlock()
			for i, got := range a.tokens["default/"+task.JobID] {
				if got != tc.want {
					t.Errorf("report %d: X-Nomad-Token %q, want %q", i, got, tc.want)
				}
			}
		})
	}
}

func TestStopWithinBudgetCheckpoints(t *testing.T) {
	a := newAllocator(t)
	h, _, _ := newHarness(t, map[string]any{"allocator_address": a.srv.URL, "report_period": "200ms"})
	task := newTask(t, h, "", "-rate", "50", "-bytes", "2500000", "-ckpt-time", "300ms")
	start(t, h, task)
	next := eventsOf(t, h, task.ID)
	awaitProgress(t, task, 5)
	began := time.Now()
	if err := h.StopTask(task.ID, 10*time.Second, "SIGTERM"); err != nil {
		t.Fatalf("StopTask: %v", err)
	}
	took := time.Since(began)
	ev := next(5*time.Second, "Checkpoint saved: ")
	if !strings.HasPrefix(ev.Message, "Checkpoint saved: 2.5 MB in ") || !strings.Contains(ev.Message, " at step ") {
		t.Errorf("event %q", ev.Message)
	}
	secs, err := strconv.ParseFloat(ev.Annotations["checkpoint_seconds"], 64)
	if ev.Annotations["checkpoint_bytes"] != "2500000" || ev.Annotations["reason"] != "stop" || ev.Annotations["step"] == "" || ev.Annotations["step"] == "0" || err != nil || secs < 0.3 {
		t.Errorf("annotations %v: want 2500000 bytes, a step, >= 0.3 s, reason stop", ev.Annotations)
	}
	if took > 5*time.Second {
		t.Errorf("stop took %s with a checkpoint of 0.3 s and the task exiting after it", took)
	}
	if res := wait(t, h, task.ID, 5*time.Second); !res.Successful() {
		t.Errorf("exit %+v, want 0 (the trainer exits after its checkpoint)", res)
	}
	r := a.await(t, "default/"+task.JobID, func(r report.Report) bool { return r.CheckpointBytes != nil })
	if *r.CheckpointBytes != 2500000 || r.CheckpointSeconds == nil || *r.CheckpointSeconds < 0.3 {
		t.Errorf("last report %+v: want the checkpoint's size and time", r)
	}
}

func TestStopBeyondBudgetKills(t *testing.T) {
	h, _, _ := newHarness(t, nil)
	task := newTask(t, h, "", "-ignore-stop")
	start(t, h, task)
	next := eventsOf(t, h, task.ID)
	awaitProgress(t, task, 1) // the trainer ignores SIGINT once it runs
	began := time.Now()
	if err := h.StopTask(task.ID, 700*time.Millisecond, "SIGINT"); err != nil {
		t.Fatalf("StopTask: %v", err)
	}
	if took := time.Since(began); took < 700*time.Millisecond || took > 5*time.Second {
		t.Errorf("stop took %s, want the 700ms budget then a kill", took)
	}
	ev := next(5*time.Second, "No checkpoint written")
	if ev.Message != "No checkpoint written within 700ms" || ev.Annotations["budget_seconds"] != "0.700" {
		t.Errorf("event %q %v", ev.Message, ev.Annotations)
	}
	if res := wait(t, h, task.ID, 5*time.Second); res.Signal != 9 {
		t.Errorf("exit %+v, want killed by signal 9", res)
	}
}

// With checkpoint_root, the job's next allocation (a new task folder, here in the same
// driver) resumes from the last checkpoint and reports its measured size and time.
func TestNextAllocationResumesFromSharedCheckpoint(t *testing.T) {
	a := newAllocator(t)
	root := t.TempDir()
	h, _, _ := newHarness(t, map[string]any{"allocator_address": a.srv.URL, "report_period": "200ms", "checkpoint_root": root})
	first := newTask(t, h, "", "-rate", "100", "-bytes", "3000")
	start(t, h, first)
	awaitProgress(t, first, 4)
	if err := h.StopTask(first.ID, 5*time.Second, "SIGINT"); err != nil {
		t.Fatalf("StopTask: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(root, "default", first.JobID, "create-index-1", "main", "train", markerFileName))
	if err != nil {
		t.Fatalf("no marker under checkpoint_root: %v", err)
	}
	m, err := parseMarker(b)
	if err != nil || m.Step < 20 {
		t.Fatalf("the marker under checkpoint_root: %+v, %v", m, err)
	}

	second := newTask(t, h, "", "-rate", "100", "-total", "30")
	second.JobID = first.JobID
	start(t, h, second)
	if res := wait(t, h, second.ID, 20*time.Second); !res.Successful() {
		t.Fatalf("exit %+v", res)
	}
	r := a.await(t, "default/"+first.JobID, func(r report.Report) bool { return r.Done == m.Step+30 })
	if r.CheckpointBytes == nil || *r.CheckpointBytes != 3000 || r.CheckpointSeconds == nil || r.RestartSeconds == nil {
		t.Errorf("the next allocation's report %+v: want the checkpoint's 3000 bytes and time, and its restart time", r)
	}
}

// TestReRegisteredJobStartsWithoutCheckpoint: with checkpoint_root, a job purged and
// registered again under the same ID (a new create index, as the allocator answers) starts
// with an empty checkpoint folder, not the purged job's checkpoint, and the purged job's
// folder is removed.
func TestReRegisteredJobStartsWithoutCheckpoint(t *testing.T) {
	a := newAllocator(t)
	a.setIndex(11)
	root := t.TempDir()
	h, _, _ := newHarness(t, map[string]any{"allocator_address": a.srv.URL, "report_period": "200ms", "checkpoint_root": root})
	envOut := filepath.Join(t.TempDir(), "env.json")
	first := newTask(t, h, "", "-rate", "100", "-bytes", "3000", "-env-out", envOut)
	start(t, h, first)
	awaitProgress(t, first, 4)
	if err := h.StopTask(first.ID, 5*time.Second, "SIGINT"); err != nil {
		t.Fatalf("StopTask: %v", err)
	}
	var env map[string]string
	if b, err := os.ReadFile(envOut); err != nil || json.Unmarshal(b, &env) != nil {
		t.Fatalf("the first task's environment: %v", err)
	}
	oldDir := env[EnvCheckpointDir]
	if m, err := os.ReadFile(filepath.Join(oldDir, markerFileName)); err != nil {
		t.Fatalf("the first incarnation wrote no checkpoint: %v", err)
	} else if pm, _ := parseMarker(m); pm.Step < 20 {
		t.Fatalf("the first incarnation's marker %s", m)
	}

	a.setIndex(42) // purged and registered again
	second := newTask(t, h, "", "-rate", "100", "-total", "30", "-env-out", envOut)
	second.JobID, second.AllocID = first.JobID, "alloc-of-the-new-job"
	start(t, h, second)
	if res := wait(t, h, second.ID, 20*time.Second); !res.Successful() {
		t.Fatalf("exit %+v", res)
	}
	r := a.await(t, "default/"+first.JobID, func(r report.Report) bool { return r.Done >= 30 })
	if r.Done != 30 || r.CheckpointBytes != nil {
		t.Errorf("the re-registered job's report %+v: want done 30, from no checkpoint", r)
	}
	if _, err := os.Stat(oldDir); !os.IsNotExist(err) {
		t.Errorf("the purged job's checkpoint folder %s is still there (%v)", oldDir, err)
	}
	if b, err := os.ReadFile(envOut); err != nil || json.Unmarshal(b, &env) != nil || env[EnvCheckpointDir] == oldDir {
		t.Errorf("the re-registered job's checkpoint folder %q: want a new one (%v)", env[EnvCheckpointDir], err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.asked != 2 || a.allocs[1] != "alloc-of-the-new-job" {
		t.Errorf("the driver asked the allocator %d times, for allocations %q: want once per task start, with its allocation", a.asked, a.allocs)
	}
}

// TestCheckpointRootNeedsTheAllocator: a task under checkpoint_root does not start without
// the allocator's word on its job's registration. Unreachable (or failing), the start fails
// recoverably (Nomad's restart policy tries again); refused for good (here: no identity
// under -progress-auth=nomad), it fails for good, naming the allocator's reason.
func TestCheckpointRootNeedsTheAllocator(t *testing.T) {
	saved := incarnationRetries
	incarnationRetries = []time.Duration{10 * time.Millisecond, 10 * time.Millisecond}
	t.Cleanup(func() { incarnationRetries = saved })
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error": "no token: send the task's workload identity"}`, http.StatusUnauthorized)
	}))
	t.Cleanup(refusing.Close)
	for _, tc := range []struct {
		name, address, wantErr string
		recoverable            bool
	}{
		{"unreachable", "http://127.0.0.1:1", "connection refused", true},
		{"refused", refusing.URL, "401 Unauthorized: {\"error\": \"no token", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _, _ := newHarness(t, map[string]any{"allocator_address": tc.address, "checkpoint_root": t.TempDir()})
			task := newTask(t, h, "", "-total", "1")
			_, _, err := h.StartTask(task)
			if err == nil || !strings.Contains(err.Error(), "checkpoint_root") || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("StartTask: %v, want an error naming checkpoint_root and %q", err, tc.wantErr)
			}
			if structs.IsRecoverable(err) != tc.recoverable {
				t.Errorf("recoverable: %v, want %v (%v)", structs.IsRecoverable(err), tc.recoverable, err)
			}
		})
	}
}

// A `sh -c` wrapper: the stop signal reaches the trainer it started, which checkpoints
// although the shell itself dies of SIGTERM at once.
func TestStopSignalReachesChildren(t *testing.T) {
	h, _, _ := newHarness(t, nil)
	self, _ := os.Executable()
	task := newTask(t, h, "/bin/sh", "-c", self+" fake-trainer -rate 50 -bytes 42; echo trainer ended")
	start(t, h, task)
	next := eventsOf(t, h, task.ID)
	awaitProgress(t, task, 2)
	if err := h.StopTask(task.ID, 10*time.Second, "SIGTERM"); err != nil {
		t.Fatalf("StopTask: %v", err)
	}
	if ev := next(5*time.Second, "Checkpoint saved: "); ev.Annotations["checkpoint_bytes"] != "42" {
		t.Errorf("event %q %v", ev.Message, ev.Annotations)
	}
}

func TestSignalAsksForCheckpoint(t *testing.T) {
	h, _, _ := newHarness(t, nil)
	task := newTask(t, h, "", "-rate", "50", "-bytes", "7")
	start(t, h, task)
	next := eventsOf(t, h, task.ID)
	awaitProgress(t, task, 2)
	if err := h.SignalTask(task.ID, "SIGUSR1"); err != nil {
		t.Fatalf("SignalTask: %v", err)
	}
	ev := next(5*time.Second, "Checkpoint saved: 7 B in ")
	if ev.Annotations["reason"] != "signal" {
		t.Errorf("event %q %v, want reason signal", ev.Message, ev.Annotations)
	}
	if st, err := h.InspectTask(task.ID); err != nil || st.State != drivers.TaskStateRunning {
		t.Errorf("after a checkpoint signal: %+v, %v; want the task running", st, err)
	}
	if err := h.SignalTask(task.ID, "SIGNOPE"); err == nil || !strings.Contains(err.Error(), `unknown signal "SIGNOPE"`) {
		t.Errorf("SignalTask(SIGNOPE) = %v", err)
	}
}

// A fresh driver (a restarted plugin) recovers the running task from its handle and follows
// its progress on from the saved offset: every line is counted once.
func TestRecoverWithoutDoubleCounting(t *testing.T) {
	a := newAllocator(t)
	cfg := map[string]any{"allocator_address": a.srv.URL, "report_period": "100ms"}
	h1, _, stop1 := newHarness(t, cfg)
	task := newTask(t, h1, "", "-rate", "100", "-every", "5", "-total", "400")
	handle := start(t, h1, task)
	awaitProgress(t, task, 20)
	stop1() // the old plugin's loops end; its executor (a separate process) runs on

	h2, d2, _ := newHarness(t, cfg)
	if err := h2.RecoverTask(handle); err != nil {
		t.Fatalf("RecoverTask: %v", err)
	}
	t.Cleanup(func() { _ = h2.DestroyTask(task.ID, true) })
	if res := wait(t, h2, task.ID, 30*time.Second); !res.Successful() {
		t.Fatalf("exit %+v", res)
	}
	r := a.await(t, "default/"+task.JobID, func(r report.Report) bool { return r.Done == 400 })
	hd, _ := d2.tasks.Get(task.ID)
	st := hd.follow.snapshot()
	if saved, ok, err := loadFollowState(filepath.Join(task.TaskDir().Dir, "private", stateFileName)); !ok || err != nil || saved.Tracker.Lines != st.Tracker.Lines {
		t.Errorf("the state file in the task's private folder: %v, %v, %d lines; want the driver's %d", ok, err, saved.Tracker.Lines, st.Tracker.Lines)
	}
	if lines := progressLines(t, task); st.Tracker.Lines != lines || st.Tracker.Lines != 80 {
		t.Errorf("the recovered driver counted %d lines; the file has %d, the trainer wrote 80", st.Tracker.Lines, lines)
	}
	if r.ThroughputPerSecond != nil {
		t.Logf("published throughput after recovery %.3f/s (true 100/s)", *r.ThroughputPerSecond)
	}
	if r.ThroughputPerSecond == nil || math.Abs(*r.ThroughputPerSecond-100) > 5 {
		t.Errorf("last report %+v, want done 400 at 100/s within 5%%", r)
	}
}

// A task that only prints its progress: the driver reads it from the stdout log.
func TestProgressFromStdoutPattern(t *testing.T) {
	a := newAllocator(t)
	h, _, _ := newHarness(t, map[string]any{"allocator_address": a.srv.URL, "report_period": "200ms"})
	task := newTask(t, h, "", "-stdout", "-rate", "200", "-total", "200")
	self, _ := os.Executable()
	if err := task.EncodeConcreteDriverConfig(map[string]any{"command": self, "args": []string{"fake-trainer", "-stdout", "-rate", "200", "-total", "200"},
		"progress": map[string]any{"pattern": `step (?P<done>[0-9]+)`}}); err != nil {
		t.Fatal(err)
	}
	start(t, h, task)
	if res := wait(t, h, task.ID, 30*time.Second); !res.Successful() {
		t.Fatalf("exit %+v", res)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		r, _ := a.last("default/" + task.JobID)
		if r.Done == 200 && r.ThroughputPerSecond != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("last report %+v, want done 200 with a rate", r)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestFingerprintHealthyWithoutAllocator(t *testing.T) {
	// Nothing listens on port 1; the driver is healthy all the same.
	h, _, _ := newHarness(t, map[string]any{"allocator_address": "http://127.0.0.1:1", "checkpoint_root": "/mnt/ckpt"})
	ch, err := h.Fingerprint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	select {
	case fp := <-ch:
		if fp.Health != drivers.HealthStateHealthy || fp.Attributes["driver.fft"] == nil {
			t.Errorf("fingerprint %+v", fp)
		}
		if v, _ := fp.Attributes["driver.fft.checkpoint_root"].GetString(); v != "/mnt/ckpt" {
			t.Errorf("checkpoint_root attribute %q", v)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no fingerprint")
	}
}

func TestStartRejectsBadConfigNamingTheField(t *testing.T) {
	h, _, _ := newHarness(t, nil)
	task := newTask(t, h, "/bin/true")
	if err := task.EncodeConcreteDriverConfig(map[string]any{"command": "/bin/true", "progress": map[string]any{"warmup_points": -3}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.StartTask(task); err == nil || !strings.Contains(err.Error(), "progress.warmup_points: must be between 0 and 1000, got -3") {
		t.Errorf("StartTask = %v", err)
	}
}
