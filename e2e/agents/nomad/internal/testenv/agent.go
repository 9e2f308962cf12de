package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	// start starts the program again, the same way (Restart).
	start func() (*agentrun.Process, error)
	// runs counts the starts, so that a restart keeps the earlier log.
	runs int
}

// StartProcess starts bin with args, its output in <dir>/<name>.log, in its own process group
// (and killed with the test process on Linux). When the test ends it is stopped (Stop); on
// failure the tail of its log is printed.
func StartProcess(t testing.TB, name, dir, bin string, args ...string) *Process {
	t.Helper()
	return startAndStopAtEnd(t, func() (*agentrun.Process, error) { return agentrun.Start(dir, name, bin, args, nil) })
}

// startAndStopAtEnd starts a program with start and stops it when the test ends, passed or
// failed, printing the tail of its log if the test failed.
func startAndStopAtEnd(t testing.TB, start func() (*agentrun.Process, error)) *Process {
	t.Helper()
	proc, err := start()
	if err != nil {
		t.Fatal(err)
	}
	p := &Process{Name: proc.Name, LogPath: proc.LogPath, proc: proc, start: start, runs: 1}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("--- last lines of %s (%s) ---\n%s", p.Name, p.LogPath, p.proc.Tail(80))
		}
	})
	return p
}

// Restart stops the process (Stop) unless it has ended, and starts it again with the same
// program, arguments and configuration. The earlier run's log is kept as <name>.log.<n>.
func (p *Process) Restart() error {
	p.Stop()
	return p.StartAgain()
}

// StartAgain starts a process that has ended (after Kill or Stop) again, as Restart does.
func (p *Process) StartAgain() error {
	if !p.Exited() {
		return fmt.Errorf("starting %s again: it is still running", p.Name)
	}
	if _, err := os.Stat(p.LogPath); err == nil {
		if err := os.Rename(p.LogPath, fmt.Sprintf("%s.%d", p.LogPath, p.runs)); err != nil {
			return fmt.Errorf("keeping %s's log: %w", p.Name, err)
		}
	}
	proc, err := p.start()
	if err != nil {
		return fmt.Errorf("starting %s again: %w", p.Name, err)
	}
	p.proc, p.runs = proc, p.runs+1
	return nil
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
	HTTP    string // http://127.0.0.1:port, https:// with TLS
	RPCAddr string // 127.0.0.1:port
	// TLS is what its API clients need when it serves HTTPS, else nil.
	TLS *api.TLSConfig
}

// Client returns an API client for the agent.
func (a *Agent) Client(t testing.TB) *api.Client {
	t.Helper()
	c, err := api.NewClient(&api.Config{Address: a.HTTP, TLSConfig: a.TLS})
	if err != nil {
		t.Fatalf("API client for %s: %v", a.Name, err)
	}
	return c
}

// StartAgent writes hclConfig (which must use the ports given) into dir, starts
// `nomad agent -config` on it, and stops the agent when the test ends, as StartProcess does.
func StartAgent(t testing.TB, nomad, name, dir string, ports agentrun.NomadPorts, hclConfig string) *Agent {
	t.Helper()
	p := startAndStopAtEnd(t, func() (*agentrun.Process, error) { return agentrun.StartNomad(dir, name, nomad, hclConfig) })
	return &Agent{
		Process: p,
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
	// Traversable, as Nomad makes its alloc dir's parents (0711): the task driver runs tasks
	// as an unprivileged user, which must reach its task folder below.
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatalf("creating a temporary folder: %v", err)
	}
	t.Cleanup(func() {
		agentrun.KillUnder(dir)
		if err := agentrun.UnmountUnder(dir); err != nil {
			t.Errorf("cleaning up %s: %v", dir, err)
		}
		if os.Getenv(EnvKeep) == "1" {
			t.Logf("%s=1: kept %s", EnvKeep, dir)
			return
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

// Traversable gives every folder above the clients' alloc dirs the search bit, as a
// packaged Nomad's data_dir has (0755): the driver's tasks run as nobody, which must reach
// its task folder; Nomad makes the alloc dir itself 0711.
func Traversable(t testing.TB, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if d.Name() == "alloc" {
			for p := path; strings.HasPrefix(p, root); p = filepath.Dir(p) {
				if fi, err := os.Stat(p); err == nil {
					_ = os.Chmod(p, fi.Mode().Perm()|0o011)
				}
			}
			return filepath.SkipDir
		}
		if strings.Count(strings.TrimPrefix(path, root), string(filepath.Separator)) > 4 {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
