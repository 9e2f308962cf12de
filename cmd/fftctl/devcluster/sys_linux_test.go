package devcluster

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// An orphan that runs below the state folder (as a raw_exec task left by
// its client does) is adopted and killed; a child elsewhere is left alone.
func TestKillOrphans(t *testing.T) {
	if err := adoptOrphans(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	task := filepath.Join(dir, "client", "alloc", "1", "task")
	if err := os.MkdirAll(task, 0o755); err != nil {
		t.Fatal(err)
	}
	// The shell starts a sleep below the folder and exits at once: the
	// sleep's parent is gone, as a task's is once its client stops.
	out, err := exec.Command("sh", "-c", "cd '"+task+"' && sleep 300 >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("pid %q: %v", out, err)
	}
	bystander := exec.Command("sleep", "300")
	bystander.Dir = t.TempDir()
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = bystander.Process.Kill(); _ = bystander.Wait() }()

	// The orphan is ours now (adopted), so it can be found and reaped.
	deadline := time.Now().Add(5 * time.Second)
	for ppid(orphan) != os.Getpid() {
		if time.Now().After(deadline) {
			t.Fatalf("the orphan %d was not adopted (parent %d)", orphan, ppid(orphan))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := killOrphans(dir); n != 1 {
		t.Errorf("killOrphans killed %d processes, want the orphan alone", n)
	}
	if err := syscall.Kill(orphan, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the orphan %d is still there (or a zombie): %v", orphan, err)
	}
	if err := bystander.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the child outside the folder was killed: %v", err)
	}
}
