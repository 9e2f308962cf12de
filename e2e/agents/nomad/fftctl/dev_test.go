package fftctl

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// dev is a running `fftctl dev`, its output collected line by line.
type dev struct {
	cmd  *exec.Cmd
	bin  string
	done chan struct{}
	code int

	mu    sync.Mutex
	lines []string
	// Dir is the state folder it announced; NomadAddr and ConsulAddr are the
	// addresses it printed.
	Dir, NomadAddr, ConsulAddr string
}

var (
	dirLine    = regexp.MustCompile(`Starting a dev cluster in (\S+) \(`)
	exportLine = regexp.MustCompile(`export NOMAD_ADDR=(\S+) CONSUL_HTTP_ADDR=(\S+)`)
)

// startDev runs the built fftctl dev with args, handing it the agents and the other binaries
// through the variables it reads, and waits until the cluster is up. It is interrupted when
// the test ends, if still running.
func startDev(t *testing.T, args ...string) *dev {
	t.Helper()
	return startDevEnv(t, nil, args...)
}

// startDevEnv is startDev with env added to (and overriding) the variables it is given.
func startDevEnv(t *testing.T, env []string, args ...string) *dev {
	t.Helper()
	bin := testenv.MainBinary(t, "fftctl")
	env = append(append(os.Environ(),
		"FFT_NOMAD_BIN="+testenv.RequireNomad(t),
		"FFT_CONSUL_BIN="+testenv.RequireConsul(t),
		"FFT_PLUGIN_BIN="+filepath.Join(testenv.PluginDir(t), testenv.PluginName),
		"FFT_DRIVER_BIN="+testenv.MainBinary(t, testenv.DriverBinary),
		"FFT_ALLOCATOR_BIN="+testenv.MainBinary(t, "fft-allocator")), env...)
	d := &dev{bin: bin, done: make(chan struct{})}
	d.cmd = exec.Command(bin, append([]string{"dev"}, args...)...)
	d.cmd.Env = env
	d.cmd.Dir = t.TempDir() // not the repository: fftctl dev must not need it here
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stderr = d.cmd.Stdout
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go d.collect(out)
	t.Cleanup(func() {
		d.interrupt()
		select {
		case <-d.done:
		case <-time.After(90 * time.Second):
			_ = d.cmd.Process.Kill()
			<-d.done
		}
		if t.Failed() {
			t.Logf("fftctl dev output:\n%s", d.output())
		}
	})
	d.waitLine(t, 4*time.Minute, "==> Rounds")
	d.mu.Lock()
	defer d.mu.Unlock()
	all := strings.Join(d.lines, "\n")
	m, e := dirLine.FindStringSubmatch(all), exportLine.FindStringSubmatch(all)
	if m == nil || e == nil {
		t.Fatalf("fftctl dev did not print its folder and addresses:\n%s", all)
	}
	d.Dir, d.NomadAddr, d.ConsulAddr = m[1], e[1], e[2]
	return d
}

func (d *dev) collect(r io.Reader) {
	s := bufio.NewScanner(r)
	for s.Scan() {
		d.mu.Lock()
		d.lines = append(d.lines, s.Text())
		d.mu.Unlock()
	}
	_ = d.cmd.Wait()
	d.code = d.cmd.ProcessState.ExitCode()
	close(d.done)
}

func (d *dev) output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.lines, "\n")
}

func (d *dev) interrupt() {
	select {
	case <-d.done:
	default:
		_ = d.cmd.Process.Signal(syscall.SIGINT)
	}
}

// waitLine waits for an output line containing s and returns it.
func (d *dev) waitLine(t *testing.T, timeout time.Duration, s string) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		d.mu.Lock()
		for _, l := range d.lines {
			if strings.Contains(l, s) {
				d.mu.Unlock()
				return l
			}
		}
		d.mu.Unlock()
		select {
		case <-d.done:
			t.Fatalf("fftctl dev exited (%d) before printing %q:\n%s", d.code, s, d.output())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("fftctl dev did not print %q in %s:\n%s", s, timeout, d.output())
		}
	}
}

// wait waits for fftctl dev to exit and returns its exit code.
func (d *dev) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-d.done:
		return d.code
	case <-time.After(timeout):
		t.Fatalf("fftctl dev did not exit in %s:\n%s", timeout, d.output())
		return -1
	}
}

// ctl runs the built fftctl with args and returns its exit code, stdout and stderr.
func (d *dev) ctl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(d.bin, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("running fftctl %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// statusJSON runs fftctl status -json against the dev cluster.
func (d *dev) statusJSON(t *testing.T) status {
	t.Helper()
	code, out, errs := d.ctl(t, "status", "-json", "-consul-addr", d.ConsulAddr)
	var s status
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil {
		t.Fatalf("fftctl status -json: exit %d\n%s\n%s", code, out, errs)
	}
	return s
}

// status is the part of fftctl status -json the tests read.
type status struct {
	NextRound int `json:"next_round"`
	Jobs      []struct {
		ID        string  `json:"id"`
		Status    string  `json:"status"`
		Model     string  `json:"model"`
		Done      float64 `json:"done"`
		RoundsRun int     `json:"rounds_run"`
	} `json:"jobs"`
	Models []struct {
		Name string `json:"name"`
		GPUs int    `json:"gpus"`
		Used int    `json:"used"`
	} `json:"models"`
}

// leftovers lists what is still running, or mounted, below dir, and whether dir exists.
func leftovers(dir string) []string {
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if strings.Contains(string(cmdline), dir) || strings.HasPrefix(cwd, dir) {
			found = append(found, fmt.Sprintf("process %s: %s (in %s)", e.Name(), strings.ReplaceAll(string(cmdline), "\x00", " "), cwd))
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		if strings.Contains(line, dir) {
			found = append(found, "mount: "+line)
		}
	}
	if _, err := os.Stat(dir); err == nil {
		found = append(found, "the folder "+dir+" is still there")
	}
	return found
}

// fftctl dev with its sample workload: it starts, shows the rounds as they happen, runs the
// jobs on the fake GPUs (their tasks report progress), stops after -rounds, and leaves no
// process, mount or folder behind.
func TestDevRunsRoundsAndCleansUp(t *testing.T) {
	d := startDev(t, "-round", "2s", "-rounds", "4")
	d.waitLine(t, 60*time.Second, "Round 0 at ")
	// While it runs, the workload runs on the models the round chose, and its task driver
	// reports progress with the GPU model through the allocator into Consul.
	testenv.Eventually(t, 30*time.Second, time.Second, "a sample job reports its progress", func() error {
		b, code, err := get("http://" + d.ConsulAddr + "/v1/kv/nomad-fft/v2/progress/?recurse")
		if err != nil || code != 200 {
			return fmt.Errorf("progress keys: HTTP %d, %v", code, err)
		}
		var pairs []struct {
			Key   string
			Value []byte
		}
		if err := json.Unmarshal(b, &pairs); err != nil {
			return err
		}
		for _, p := range pairs {
			if strings.HasPrefix(p.Key, "nomad-fft/v2/progress/default/") && strings.Contains(string(p.Value), `"gpu_model":"`) {
				t.Logf("%s = %s", p.Key, p.Value)
				return nil
			}
		}
		return fmt.Errorf("no driver report yet: %s", b)
	})
	if code := d.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("fftctl dev -rounds 4 exited %d:\n%s", code, d.output())
	}
	out := d.output()
	for k := 0; k < 4; k++ {
		if !strings.Contains(out, fmt.Sprintf("Round %d at ", k)) {
			t.Errorf("round %d was not shown:\n%s", k, out)
		}
	}
	if strings.Contains(out, "Round 4 at ") {
		t.Errorf("a fifth round was shown after -rounds 4:\n%s", out)
	}
	for _, w := range []string{"Submitted default/resnet50", "Registered job fft-allocator from jobspecs/fft-allocator.nomad.hcl", " leads (status via ", "    start    ", " of 10 GPUs busy", "==> Stopped"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if left := leftovers(d.Dir); len(left) > 0 {
		t.Errorf("fftctl dev left behind:\n%s", strings.Join(left, "\n"))
	}
}
