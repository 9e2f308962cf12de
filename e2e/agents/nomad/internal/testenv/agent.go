package testenv

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Agent is a Nomad agent process started by a test.
type Agent struct {
	Name    string
	HTTP    string // http://127.0.0.1:port
	RPCAddr string // 127.0.0.1:port
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
}

// Client returns an API client for the agent.
func (a *Agent) Client(t testing.TB) *api.Client {
	t.Helper()
	c, err := api.NewClient(&api.Config{Address: a.HTTP})
	if err != nil {
		t.Fatalf("API client for %s: %v", a.Name, err)
	}
	return c
}

// AgentPorts are the three ports a Nomad agent binds.
type AgentPorts struct{ HTTP, RPC, Serf int }

// StartAgent writes hclConfig (which must use the ports given) into dir, starts
// `nomad agent -config` on it, and stops the agent when the test ends, passed or failed: SIGINT,
// then SIGKILL to its process group after 15 s. The agent also dies with the test process
// (Pdeathsig on Linux). On failure the tail of the agent's log is printed.
func StartAgent(t testing.TB, nomad, name, dir string, ports AgentPorts, hclConfig string) *Agent {
	t.Helper()
	cfgPath := filepath.Join(dir, name+".hcl")
	if err := os.WriteFile(cfgPath, []byte(hclConfig), 0o644); err != nil {
		t.Fatalf("writing %s: %v", cfgPath, err)
	}
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("creating %s: %v", logPath, err)
	}
	cmd := exec.Command(nomad, "agent", "-config", cfgPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = agentProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	a := &Agent{
		Name:    name,
		HTTP:    fmt.Sprintf("http://127.0.0.1:%d", ports.HTTP),
		RPCAddr: fmt.Sprintf("127.0.0.1:%d", ports.RPC),
		LogPath: logPath,
		cmd:     cmd,
		done:    make(chan struct{}),
	}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(a.done)
	}()
	t.Cleanup(func() {
		a.stop()
		if t.Failed() {
			t.Logf("--- last lines of %s (%s) ---\n%s", name, logPath, tail(logPath, 60))
		}
	})
	return a
}

func (a *Agent) stop() {
	select {
	case <-a.done:
		return
	default:
	}
	_ = a.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-a.done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
		<-a.done
	}
	// Plugins (logmon, the device plugin) share the agent's process group
	// and may outlive it.
	_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
}

// Exited reports whether the agent process has ended.
func (a *Agent) Exited() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		lines = append(lines, s.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// TempDir returns a new folder for agent data, removed when the test ends, after the agents
// it holds have stopped (register it before starting them) and after unmounting what
// Nomad clients left mounted in it.
func TempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fft-e2e-")
	if err != nil {
		t.Fatalf("creating a temporary folder: %v", err)
	}
	t.Cleanup(func() {
		killUnder(dir)
		if err := unmountUnder(dir); err != nil {
			t.Errorf("cleaning up %s: %v", dir, err)
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing %s: %v", dir, err)
		}
	})
	return dir
}

// Eventually calls cond every interval until it returns nil or timeout passes, then fails
// the test with the last error.
func Eventually(t testing.TB, timeout, interval time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not done after %s: %v", what, timeout, err)
		}
		time.Sleep(interval)
	}
}
