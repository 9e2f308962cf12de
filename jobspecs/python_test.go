package jobspecs

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/nomad/api"
)

// The helper's own tests (python/test_fft_train.py) with whatever python3 is first on PATH:
// it is standard library only. A missing python3 fails the test rather than skipping it.
func TestFFTTrainPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed to test python/fft_train.py: %v", err)
	}
	cmd := exec.Command(py, "-m", "unittest", "-v", "test_fft_train")
	cmd.Dir = "python"
	cmd.Env = append(withoutRank(os.Environ()), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s -m unittest: %v\n%s", py, err, out)
	}
	if !strings.Contains(string(out), "\nOK") {
		t.Fatalf("unittest did not report OK:\n%s", out)
	}
	t.Logf("%s", lastLines(string(out), 3))
}

func TestTorchTrainJobspec(t *testing.T) {
	job := parse(t, TorchTrain, "python_dir=/srv/py", "work=300", "gpu_count=3", "seed=7", "checkpoint_write_seconds=1.5")
	if *job.ID != "torch-train" || *job.Type != api.JobTypeBatch || job.Meta["fft.work"] != "300" {
		t.Fatalf("job %q type %q meta %v: want the batch job torch-train with fft.work 300", *job.ID, *job.Type, job.Meta)
	}
	task := job.TaskGroups[0].Tasks[0]
	args := fmt.Sprint(task.Config["args"])
	for _, want := range []string{"/srv/py/torch_train.py", "--steps 300", "--seed 7", "--checkpoint-write-seconds 1.5"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %s: want %q", args, want)
		}
	}
	if task.Driver != "fft" || task.Config["command"] != "/usr/bin/python3" {
		t.Errorf("driver %q command %v: want fft running /usr/bin/python3", task.Driver, task.Config["command"])
	}
	if d := task.Resources.Devices; len(d) != 1 || *d[0].Count != 3 {
		t.Errorf("devices %+v: want 3 nvidia/gpu", d)
	}
	if r := job.TaskGroups[0].RestartPolicy; *r.Attempts < 1 {
		t.Errorf("restart %+v: a task killed mid-way must restart in place and resume", r)
	}
}

// requireTorch returns the Python that imports torch; without one the test is skipped, or
// fails under FFT_REQUIRE_TORCH=1 (make test sets it).
func requireTorch(t *testing.T) string {
	t.Helper()
	py, version, err := TorchPython(context.Background())
	if err != nil {
		if os.Getenv("FFT_REQUIRE_TORCH") == "1" {
			t.Fatalf("FFT_REQUIRE_TORCH=1: %v", err)
		}
		t.Skipf("%v (FFT_REQUIRE_TORCH=1 makes this a failure)", err)
	}
	t.Logf("PyTorch %s with %s", version, py)
	return py
}

// torchRun is one run of python/torch_train.py with the driver's environment around it.
type torchRun struct {
	py, dir string
	args    []string
}

func (r torchRun) cmd(t *testing.T) *exec.Cmd {
	cmd := exec.Command(r.py, append([]string{filepath.Join("python", "torch_train.py")}, r.args...)...)
	cmd.Env = append(withoutRank(os.Environ()), "PYTHONDONTWRITEBYTECODE=1",
		"FFT_CHECKPOINT_DIR="+filepath.Join(r.dir, "ckpt"),
		"FFT_CHECKPOINT_MARKER="+filepath.Join(r.dir, "ckpt", "fft-checkpoint.json"),
		"FFT_PROGRESS_FILE="+filepath.Join(r.dir, "progress.jsonl"),
		"FFT_CHECKPOINT_SIGNAL=SIGUSR1", "FFT_GPU_COUNT=", "CUDA_VISIBLE_DEVICES=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

func (r torchRun) params(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, "ckpt", "final-params.json"))
	if err != nil {
		t.Fatalf("the run's final parameters: %v", err)
	}
	var p map[string]any
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// A run stopped mid-way by its stop signal (SIGINT to its process group, as the driver
// sends it) and started again resumes from its checkpoint and ends with parameters bit for
// bit equal to an uninterrupted run's; another seed ends elsewhere (the comparison can fail).
func TestTorchTrainResumesBitExact(t *testing.T) {
	py := requireTorch(t)
	const steps = "60"
	ref := torchRun{py: py, dir: t.TempDir(), args: []string{"--steps", steps, "--seed", "3"}}
	if out, err := ref.cmd(t).CombinedOutput(); err != nil {
		t.Fatalf("the uninterrupted run: %v\n%s", err, out)
	}
	other := torchRun{py: py, dir: t.TempDir(), args: []string{"--steps", steps, "--seed", "4"}}
	if out, err := other.cmd(t).CombinedOutput(); err != nil {
		t.Fatalf("the run with another seed: %v\n%s", err, out)
	}

	run := torchRun{py: py, dir: t.TempDir(), args: []string{"--steps", steps, "--seed", "3", "--step-seconds", "0.05"}}
	cmd := run.cmd(t)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	var stoppedAt string
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "step 20 ") {
			if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
		}
		if s, ok := strings.CutPrefix(line, "stopped at step "); ok {
			stoppedAt = s
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the run stopped by SIGINT exited with %v", err)
	}
	if stoppedAt == "" || stoppedAt == steps {
		t.Fatalf("the run did not stop mid-way on SIGINT (stopped at %q)", stoppedAt)
	}
	var marker struct{ Step int }
	if b, err := os.ReadFile(filepath.Join(run.dir, "ckpt", "fft-checkpoint.json")); err != nil || json.Unmarshal(b, &marker) != nil || fmt.Sprint(marker.Step) != stoppedAt {
		t.Fatalf("marker after the stop: %s (%v), want step %s", b, err, stoppedAt)
	}
	resumed := run
	resumed.args = []string{"--steps", steps, "--seed", "3"}
	out, err := resumed.cmd(t).CombinedOutput()
	if err != nil {
		t.Fatalf("the resumed run: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "training from step "+stoppedAt+" to "+steps) {
		t.Errorf("the second run did not resume from step %s:\n%s", stoppedAt, out)
	}
	got, want := run.params(t), ref.params(t)
	if !equalJSON(got, want) {
		t.Errorf("the interrupted run's final parameters differ from the uninterrupted run's")
	}
	if equalJSON(other.params(t)["params"], want["params"]) {
		t.Errorf("seeds 3 and 4 end with the same parameters: the comparison proves nothing")
	}
}

func equalJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// withoutRank drops the torchrun variables a caller's environment may hold: the script
// would take itself for one worker of a gang.
func withoutRank(env []string) []string {
	var out []string
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != "RANK" && k != "WORLD_SIZE" && k != "LOCAL_RANK" {
			out = append(out, kv)
		}
	}
	return out
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}
