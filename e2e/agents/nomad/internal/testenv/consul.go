package testenv

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

const (
	// ConsulVersion is the agent version e2e/agents/build-consul.sh builds.
	ConsulVersion = "1.16.1"
	// EnvConsulBin names a Consul agent binary to use instead of looking for one.
	EnvConsulBin = "FFT_CONSUL_BIN"
)

// ErrNoConsul means no Consul agent binary was found.
var ErrNoConsul = errors.New("no Consul agent binary")

var consulBinary = agentBinary{"consul", ConsulVersion, EnvConsulBin, "e2e/agents/build-consul.sh", ErrNoConsul}

// FindConsul returns the Consul agent to run: $FFT_CONSUL_BIN, else `consul` on PATH, else the
// one e2e/agents/build-consul.sh caches in <repo>/.cache/agents/consul-v1.16.1/consul.
func FindConsul() (string, error) { return consulBinary.find() }

// RequireConsul returns the Consul agent, or skips the test when there is none, unless
// FFT_E2E=1, when a missing agent fails it.
func RequireConsul(t testing.TB) string { t.Helper(); return consulBinary.require(t) }

// Consul is a Consul dev agent started by a test.
type Consul struct {
	// HTTP is its API address as CONSUL_HTTP_ADDR takes it: 127.0.0.1:port.
	HTTP    string
	LogPath string
	proc    *Process
}

// StartConsul starts `consul agent -dev` bound to 127.0.0.1 on free ports, with its data in
// dir (DNS and gRPC off), waits until it has a leader and serves KV, and stops it when the test
// ends, passed or failed.
func StartConsul(t testing.TB, consul, dir string) *Consul {
	t.Helper()
	p := FreePorts(t, 4)
	dataDir := filepath.Join(dir, "consul-data")
	ports := fmt.Sprintf("ports { http = %d, server = %d, serf_lan = %d, serf_wan = %d, dns = -1, grpc = -1, grpc_tls = -1 }", p[0], p[1], p[2], p[3])
	proc := StartProcess(t, "consul", dir, consul, "agent", "-dev", "-bind", "127.0.0.1", "-client", "127.0.0.1",
		"-data-dir", dataDir, "-disable-host-node-id", "-hcl", ports, "-hcl", "disable_update_check = true")
	c := &Consul{HTTP: fmt.Sprintf("127.0.0.1:%d", p[0]), LogPath: proc.LogPath, proc: proc}
	Eventually(t, 60*time.Second, 250*time.Millisecond, "consul elects itself and serves KV", func() error {
		if proc.Exited() {
			t.Fatalf("the Consul agent exited")
		}
		_, code, err := c.Get("/v1/kv/fft-e2e-probe")
		if err != nil {
			return err
		}
		if code != http.StatusNotFound && code != http.StatusOK {
			return fmt.Errorf("KV answered %d", code)
		}
		return nil
	})
	return c
}

// Get reads an HTTP API path of the agent, returning the body and status code.
func (c *Consul) Get(path string) ([]byte, int, error) {
	resp, err := http.Get("http://" + c.HTTP + path)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, resp.StatusCode, err
}

// Process is a long-running program a test started (an agent or a service).
type Process struct {
	Name    string
	LogPath string
	cmd     *StartedCmd
}

// StartedCmd wraps the command and its end.
type StartedCmd struct {
	*exec.Cmd
	done chan struct{}
}

// StartProcess starts bin with args, its output in <dir>/<name>.log, in its own process group
// (and killed with the test process on Linux). When the test ends it gets SIGINT, then SIGKILL
// to its group after 15 s; on failure the tail of its log is printed.
func StartProcess(t testing.TB, name, dir, bin string, args ...string) *Process {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("creating %s: %v", logPath, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = agentProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: &StartedCmd{Cmd: cmd, done: make(chan struct{})}}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.cmd.done)
	}()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("--- last lines of %s (%s) ---\n%s", name, logPath, tail(logPath, 80))
		}
	})
	return p
}

// Stop ends the process: SIGINT, then SIGKILL to its group after 15 s.
func (p *Process) Stop() {
	select {
	case <-p.cmd.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.cmd.done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.cmd.done
	}
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.cmd.done:
		return true
	default:
		return false
	}
}

// Kill ends the process at once with SIGKILL to its group, as a crash would, and waits for it.
func (p *Process) Kill() {
	select {
	case <-p.cmd.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.cmd.done
}
