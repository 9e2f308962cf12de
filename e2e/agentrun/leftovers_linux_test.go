package agentrun

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// orphanIn starts a sleep that works in dir and whose parent (a shell) has exited at once, as a
// raw_exec task's has once its client stops.
func orphanIn(t *testing.T, dir string) int {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("sh", "-c", "cd '"+dir+"' && sleep 300 >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("pid %q: %v", out, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

// bystander starts a child of this test that works outside any folder being cleaned up.
func bystander(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.Dir = t.TempDir()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// An orphan that runs below the state folder is adopted and killed; a child elsewhere is left
// alone.
func TestKillDescendantsUnder(t *testing.T) {
	if err := AdoptOrphans(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	orphan := orphanIn(t, filepath.Join(dir, "client", "alloc", "1", "task"))
	other := bystander(t)

	// The orphan is ours now (adopted), so it can be found and reaped.
	waitFor(t, 5*time.Second, func() error {
		if parent := ppid(orphan); parent != os.Getpid() {
			return fmt.Errorf("the orphan %d was not adopted (parent %d)", orphan, parent)
		}
		return nil
	})
	if n := KillDescendantsUnder(dir); n != 1 {
		t.Errorf("KillDescendantsUnder killed %d processes, want the orphan alone", n)
	}
	if err := syscall.Kill(orphan, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the orphan %d is still there (or a zombie): %v", orphan, err)
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the child outside the folder was killed: %v", err)
	}
}

// KillUnder reaches a process below the folder whoever its parent is, but not one below a
// sibling folder whose name starts with the folder's.
func TestKillUnder(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "fft-e2e-12")
	inside := exec.Command("sleep", "300")
	inside.Dir = dir
	sibling := exec.Command("sleep", "300")
	sibling.Dir = dir + "3"
	for _, cmd := range []*exec.Cmd{inside, sibling} {
		if err := os.MkdirAll(cmd.Dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	if n := KillUnder(dir); n != 1 {
		t.Errorf("KillUnder killed %d processes, want 1", n)
	}
	if err := inside.Wait(); err == nil {
		t.Error("the process below the folder exited normally, want it killed")
	}
	if err := sibling.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the process below the sibling folder was killed: %v", err)
	}
}

// KillChildren reaches this process's children that run the executable, not their own
// children, and leaves the reaping to whoever started them.
func TestKillChildren(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep")
	}
	// /proc/<pid>/exe names the executable with links resolved.
	exe, err := filepath.EvalSymlinks(sleep)
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(exe, "300")
	// The same executable one generation down; "; true" keeps the shell from exec'ing it.
	shell := exec.Command("sh", "-c", exe+" 300; true")
	shell.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	for _, cmd := range []*exec.Cmd{child, shell} {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = syscall.Kill(-shell.Process.Pid, syscall.SIGKILL); _ = shell.Wait() })
	// Let the shell start its sleep, so that there is a grandchild to leave alone.
	time.Sleep(200 * time.Millisecond)
	if n := KillChildren(exe); n != 1 {
		t.Errorf("KillChildren(%s) killed %d processes, want the child alone", exe, n)
	}
	if err := child.Wait(); err == nil {
		t.Error("the child exited normally, want it killed")
	}
	if err := shell.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the shell whose sleep is a grandchild is gone: %v", err)
	}
}

// helperListenEnv names the sockets TestHelperListen listens on, when it runs as a helper
// process (the test binary started again by TestKillRemovesPluginSockets).
const helperListenEnv = "AGENTRUN_TEST_LISTEN"

// TestHelperListen is not a test: it is the helper process of TestKillRemovesPluginSockets.
// It listens on the Unix sockets helperListenEnv names (comma-separated) until it is killed.
func TestHelperListen(t *testing.T) {
	paths := os.Getenv(helperListenEnv)
	if paths == "" {
		t.Skip("the helper process of TestKillRemovesPluginSockets")
	}
	for _, p := range strings.Split(paths, ",") {
		if _, err := net.Listen("unix", p); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(5 * time.Minute)
}

// A process killed as a leftover (KillUnder) or with its group (KillGroup) loses its go-plugin
// sockets' files (named "plugin…") with it; its other sockets are not theirs to remove.
func TestKillRemovesPluginSockets(t *testing.T) {
	for _, tc := range []struct {
		name string
		kill func(dir string, pid int) int
	}{
		{"KillUnder", func(dir string, _ int) int { return KillUnder(dir) }},
		{"KillGroup", func(_ string, pid int) int { return KillGroup(pid) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			plugin, other := filepath.Join(dir, "plugin4242"), filepath.Join(dir, "other.sock")
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperListen$")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), helperListenEnv+"="+plugin+","+other)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			waitFor(t, 10*time.Second, func() error {
				_, err1 := os.Stat(plugin)
				_, err2 := os.Stat(other)
				if err1 != nil || err2 != nil {
					return fmt.Errorf("the helper is not listening: %v, %v", err1, err2)
				}
				return nil
			})
			if n := tc.kill(dir, cmd.Process.Pid); n != 1 {
				t.Fatalf("%s killed %d processes, want the helper", tc.name, n)
			}
			_ = cmd.Wait()
			if _, err := os.Lstat(plugin); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the killed helper's %s is still there: %v", plugin, err)
			}
			if fi, err := os.Lstat(other); err != nil || fi.Mode()&os.ModeSocket == 0 {
				t.Errorf("%s, not a go-plugin socket, was removed: %v", other, err)
			}
		})
	}
}
