package agentrun

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTail(t *testing.T) {
	dir := t.TempDir()
	var log strings.Builder
	for i := 1; i <= 5; i++ {
		fmt.Fprintf(&log, "line %d\n", i)
	}
	write(t, filepath.Join(dir, "agent.log"), log.String(), 0o644)
	p := &Process{Name: "agent", LogPath: filepath.Join(dir, "agent.log")}
	for _, tc := range []struct {
		n    int
		want string
	}{
		{2, "line 4\nline 5"},
		{5, "line 1\nline 2\nline 3\nline 4\nline 5"},
		{9, "line 1\nline 2\nline 3\nline 4\nline 5"},
	} {
		if got := p.Tail(tc.n); got != tc.want {
			t.Errorf("Tail(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	if got := (&Process{LogPath: filepath.Join(dir, "none.log")}).Tail(3); !strings.Contains(got, "no such file") {
		t.Errorf("Tail of a missing log = %q, want why it cannot be read", got)
	}
}

// WithTempDir runs its function in a TMPDIR of its own, 0755, and removes it with what the
// function left there; the function's exit code comes back.
func TestWithTempDir(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	outer := os.Getenv("TMPDIR")
	var inner string
	code := WithTempDir("fft-agentrun-test-", func() int {
		inner = os.Getenv("TMPDIR")
		if fi, err := os.Stat(inner); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o755 || filepath.Dir(inner) != outer {
			t.Errorf("TMPDIR %q in the run (%v, %v): want a new 0755 folder in %s", inner, fi, err, outer)
		}
		write(t, filepath.Join(inner, "plugin123"), "a socket killed with its plugin", 0o600)
		return 3
	})
	if code != 3 {
		t.Errorf("WithTempDir = %d, want the run's 3", code)
	}
	if _, err := os.Stat(inner); !os.IsNotExist(err) {
		t.Errorf("the run's TMPDIR %s is still there: %v", inner, err)
	}
	if got := os.Getenv("TMPDIR"); got != outer {
		t.Errorf("TMPDIR after the run is %q, want %q back", got, outer)
	}
}
