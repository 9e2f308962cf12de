package agentrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A program that ignores SIGINT is killed after the grace period, with what it started in its
// group; its output is in its log, with the environment it was given.
func TestStartStop(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "grandchild")
	script := `trap "" INT; echo "hello $GREETING"; sleep 300 & echo $! > ` + pidFile + `; wait`
	p, err := Start(dir, "stubborn", "sh", []string{"-c", script}, []string{"GREETING=agentrun"})
	if err != nil {
		t.Fatal(err)
	}
	var grandchild int
	waitFor(t, 5*time.Second, func() error {
		if b, err := os.ReadFile(pidFile); err == nil {
			_, _ = fmt.Sscan(string(b), &grandchild)
		}
		if grandchild == 0 {
			return errors.New("the program did not start its child")
		}
		return nil
	})
	start := time.Now()
	p.Stop(context.Background(), 300*time.Millisecond)
	if !p.Exited() {
		t.Error("Stop returned before the program ended")
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("Stop took %s, want the grace period first", waited)
	}
	if !dead(grandchild) {
		t.Errorf("the program's child %d outlived its group's SIGKILL", grandchild)
	}
	if got := p.Tail(1); got != "hello agentrun" {
		t.Errorf("log = %q, want the program's output", got)
	}
}

// waitFor calls cond every 20 ms until it returns nil, and fails the test with cond's last error
// once within has passed.
func waitFor(t *testing.T, within time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dead reports whether pid is gone or a zombie within a second: once killed, an orphan may wait
// unreaped for a while (for ever when this test process is a subreaper).
func dead(pid int) bool {
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if ProcessGone(pid) {
			return true
		}
	}
	return false
}

// PortTaken tells an agent that could not bind its port from one that failed otherwise or still
// runs.
func TestPortTaken(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		exits, want  bool
	}{
		{"bind refused", `echo 'Error starting agent: error="listen tcp 127.0.0.1:13971: bind: address already in use"'; exit 1`, true, true},
		{"other failure", `echo 'Error starting agent: no data dir'; exit 1`, true, false},
		{"still running", `echo 'bind: address already in use'; sleep 300`, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p, err := Start(dir, "agent", "sh", []string{"-c", tc.script}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Kill()
			if tc.exits {
				<-p.Done()
			} else {
				time.Sleep(200 * time.Millisecond)
			}
			if got := p.PortTaken(); got != tc.want {
				t.Errorf("PortTaken() = %v, want %v; log: %q", got, tc.want, p.Tail(3))
			}
		})
	}
}

// A Nomad agent's plugins make their sockets in its own folder under dir: TMPDIR names it,
// and it exists; a dir too deep for a socket path leaves the system's TMPDIR alone.
func TestStartNomadPluginSocketDir(t *testing.T) {
	deep := filepath.Join(t.TempDir(), strings.Repeat("d", 90))
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir string
		inDir     bool
	}{
		{"short", t.TempDir(), true},
		{"deep", deep, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := filepath.Join(tc.dir, "nomad")
			write(t, fake, "#!/bin/sh\necho \"TMPDIR=$TMPDIR\" > \"$(dirname \"$0\")/env\"\n", 0o755)
			p, err := StartNomad(tc.dir, "client-1", fake, "# no configuration\n")
			if err != nil {
				t.Fatal(err)
			}
			<-p.Done()
			b, err := os.ReadFile(filepath.Join(tc.dir, "env"))
			if err != nil {
				t.Fatal(err)
			}
			got := strings.TrimSpace(strings.TrimPrefix(string(b), "TMPDIR="))
			want := filepath.Join(tc.dir, "client-1.tmp")
			if !tc.inDir {
				want = os.Getenv("TMPDIR")
			}
			if got != want {
				t.Fatalf("the agent's TMPDIR is %q, want %q", got, want)
			}
			if fi, err := os.Stat(want); tc.inDir && (err != nil || !fi.IsDir() || len(want)+len("/plugin4294967295") > maxSocketPath) {
				t.Errorf("the agent's socket folder %s: %v, or too long a path for a socket", want, err)
			}
		})
	}
}
