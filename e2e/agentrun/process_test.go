package agentrun

import (
	"fmt"
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
