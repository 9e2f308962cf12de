package agentrun

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Process is a program started in a process group of its own, with its output in a log file.
// Its group also holds what it starts without a group of their own (Nomad's plugins, logmon
// and executors), so one signal to the group reaches them too.
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
}

// Start starts bin with args, env added to this process's environment, and its output in
// <dir>/<name>.log. Its own group keeps a Ctrl-C in the terminal from reaching it directly, so
// the caller decides the order things stop in; on Linux it also dies with this process.
func Start(dir, name, bin string, args, env []string) (*Process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating %s's log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// StartNomad writes a Nomad agent's configuration to <dir>/<name>.hcl and starts
// `nomad agent -config` on it, logging to <dir>/<name>.log. Its plugins make their sockets in
// <dir>/<name>.tmp (pluginSocketDir).
func StartNomad(dir, name, bin, hcl string) (*Process, error) {
	path := filepath.Join(dir, name+".hcl")
	if err := os.WriteFile(path, []byte(hcl), 0o644); err != nil {
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	var env []string
	tmp, err := pluginSocketDir(dir, name)
	if err != nil {
		return nil, err
	}
	if tmp != "" {
		env = append(env, "TMPDIR="+tmp)
	}
	return Start(dir, name, bin, []string{"agent", "-config", path}, env)
}

// maxSocketPath is the longest Unix socket path Linux takes (sun_path's 108 bytes, less the
// NUL).
const maxSocketPath = 107

// pluginSocketDir makes <dir>/<name>.tmp, the agent's TMPDIR, and returns its absolute path,
// or "" when a socket in it would be too long a path (the agent then keeps the system's).
// go-plugin makes each plugin's Unix socket in TMPDIR (a temporary name, "plugin" and up to
// 10 digits), and the plugins inherit the agent's environment: its device and driver plugins,
// logmons and executors. An executor killed with SIGKILL, as every one is when a test or the
// dev cluster stops, leaves its socket behind: in dir, not in /tmp. The folder is kept when
// the agent restarts, so that it finds its executors again.
func pluginSocketDir(dir, name string) (string, error) {
	tmp, err := filepath.Abs(filepath.Join(dir, name+".tmp"))
	if err != nil {
		return "", fmt.Errorf("locating %s's temporary folder: %w", name, err)
	}
	if len(tmp)+len("/plugin")+10 > maxSocketPath {
		return "", nil
	}
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return "", fmt.Errorf("creating %s's temporary folder: %w", name, err)
	}
	return tmp, nil
}

// Done is closed once the process has ended and its log is closed.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGINT and waits for the process to exit; when grace passes or ctx ends first,
// its group gets SIGKILL. Whatever is left in its group gets SIGKILL afterwards either way:
// plugins may outlive the agent that started them.
func (p *Process) Stop(ctx context.Context, grace time.Duration) {
	if !p.Exited() {
		_ = p.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-p.done:
		case <-ctx.Done():
		case <-time.After(grace):
		}
	}
	p.Kill()
}

// Kill sends SIGKILL to the process's group at once, as a crash would, and waits for the
// process to end.
func (p *Process) Kill() {
	KillGroup(p.cmd.Process.Pid)
	<-p.done
}

// Tail returns the last n lines of the process's log (or why it cannot be read).
func (p *Process) Tail(n int) string {
	f, err := os.Open(p.LogPath)
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

// PortTaken reports whether the process has ended because a port it was to listen on was
// taken: another program bound it between FreePorts' draw and the agent's start.
func (p *Process) PortTaken() bool {
	return p.Exited() && strings.Contains(p.Tail(40), "address already in use")
}

// WithTempDir runs run with TMPDIR set to a new folder, then sets TMPDIR back, removes the
// folder, and returns run's exit code (1 if the folder could not be made or removed).
// go-plugin makes its Unix sockets in TMPDIR, and a plugin go-plugin itself kills after its
// grace period leaves its socket behind (the kills of this package remove them): a TestMain
// whose tests start plugins (run = m.Run) keeps those out of /tmp. The folder is 0755: tasks
// that run as another user must reach their folders below it.
func WithTempDir(prefix string, run func() int) int {
	outer, set := os.LookupEnv("TMPDIR")
	dir, err := os.MkdirTemp("", prefix)
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err == nil {
		err = os.Setenv("TMPDIR", dir)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "making the tests' temporary folder: %v\n", err)
		return 1
	}
	code := run()
	if set {
		_ = os.Setenv("TMPDIR", outer)
	} else {
		_ = os.Unsetenv("TMPDIR")
	}
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintf(os.Stderr, "removing the tests' temporary folder: %v\n", err)
		code = max(code, 1)
	}
	return code
}
