package testenv

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/e2e/agentrun"
)

// stopGrace is how long a program a test started has to exit after SIGINT before its process
// group gets SIGKILL.
const stopGrace = 15 * time.Second

// Process is a long-running program a test started (an agent or a service).
type Process struct {
	Name    string
	LogPath string
	proc    *agentrun.Process
}

// StartProcess starts bin with args, its output in <dir>/<name>.log, in its own process group
// (and killed with the test process on Linux). When the test ends it is stopped (Stop); on
// failure the tail of its log is printed.
func StartProcess(t testing.TB, name, dir, bin string, args ...string) *Process {
	t.Helper()
	proc, err := agentrun.Start(dir, name, bin, args, nil)
	if err != nil {
		t.Fatal(err)
	}
	return stopAtEnd(t, proc)
}

// stopAtEnd stops proc when the test ends, passed or failed, and prints the tail of its log if
// the test failed.
func stopAtEnd(t testing.TB, proc *agentrun.Process) *Process {
	p := &Process{Name: proc.Name, LogPath: proc.LogPath, proc: proc}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("--- last lines of %s (%s) ---\n%s", p.Name, p.LogPath, proc.Tail(80))
		}
	})
	return p
}

// Stop ends the process: SIGINT, then SIGKILL to its group after 15 s; what it left in its
// group (an agent's plugins) gets SIGKILL too.
func (p *Process) Stop() { p.proc.Stop(context.Background(), stopGrace) }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool { return p.proc.Exited() }

// Kill ends the process at once with SIGKILL to its group, as a crash would, and waits for it.
func (p *Process) Kill() { p.proc.Kill() }

// Agent is a Nomad agent process started by a test.
type Agent struct {
	*Process
	HTTP    string // http://127.0.0.1:port
	RPCAddr string // 127.0.0.1:port
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

// StartAgent writes hclConfig (which must use the ports given) into dir, starts
// `nomad agent -config` on it, and stops the agent when the test ends, as StartProcess does.
func StartAgent(t testing.TB, nomad, name, dir string, ports agentrun.NomadPorts, hclConfig string) *Agent {
	t.Helper()
	proc, err := agentrun.StartNomad(dir, name, nomad, hclConfig)
	if err != nil {
		t.Fatal(err)
	}
	return &Agent{
		Process: stopAtEnd(t, proc),
		HTTP:    fmt.Sprintf("http://127.0.0.1:%d", ports.HTTP),
		RPCAddr: fmt.Sprintf("127.0.0.1:%d", ports.RPC),
	}
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
		agentrun.KillUnder(dir)
		if err := agentrun.UnmountUnder(dir); err != nil {
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
