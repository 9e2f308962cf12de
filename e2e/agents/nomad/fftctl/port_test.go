package fftctl

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nomad-fft/nomad-fft/e2e/agentrun"
	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// takePortFirst is a Consul wrapper whose first start finds its HTTP port taken, as when
// another program binds it between fftctl dev's choice and the agent's start: a listener on
// that port (Python's, in the agent's process group) is up before the real agent starts. Later
// starts run the agent as it is.
const takePortFirst = `#!/bin/sh
if [ ! -e "$FFT_TEST_MARK" ]; then
	: > "$FFT_TEST_MARK"
	port=$(echo "$*" | sed -n 's/.*ports { http = \([0-9]*\),.*/\1/p')
	python3 -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()
print("holding", flush=True); time.sleep(600)' "$port" > "$FFT_TEST_MARK.holder" 2>&1 &
	holder=$!
	echo $holder > "$FFT_TEST_MARK.pid"
	while ! grep -q holding "$FFT_TEST_MARK.holder" && kill -0 $holder 2>/dev/null; do sleep 0.1; done
fi
exec "$FFT_TEST_CONSUL" "$@"
`

// When another program takes the Consul dev agent's port before it binds it, fftctl dev says
// so, sets that start's files aside, starts the cluster again on other ports, and runs on its
// own agent; the program holding the port is stopped with the failed start.
func TestDevStartsAgainWhenAPortIsTaken(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv(testenv.EnvE2E) == "1" {
			t.Fatalf("%s=1 but no python3, which holds the port: %v", testenv.EnvE2E, err)
		}
		t.Skip("needs python3 to hold a port")
	}
	work := t.TempDir()
	wrapper := filepath.Join(work, "consul")
	if err := os.WriteFile(wrapper, []byte(takePortFirst), 0o755); err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(work, "taken")
	// A state folder of the test's, kept when fftctl dev exits.
	d := startDevEnv(t, []string{"FFT_CONSUL_BIN=" + wrapper, "FFT_TEST_MARK=" + mark,
		"FFT_TEST_CONSUL=" + testenv.RequireConsul(t)},
		"-dir", filepath.Join(work, "state"), "-round", "2s", "-no-workload")
	d.waitLine(t, time.Second, "could not bind its port")
	aside := filepath.Join(d.Dir, "failed-start-1")
	if b, err := os.ReadFile(filepath.Join(aside, "consul.log")); err != nil || !strings.Contains(string(b), "address already in use") {
		t.Errorf("the failed start's Consul log in %s: %v\n%s", aside, err, b)
	}
	if err := agentrun.ConsulReady(d.ConsulAddr, filepath.Join(d.Dir, "consul-data")); err != nil {
		t.Errorf("the cluster's Consul: %v", err)
	}
	b, err := os.ReadFile(mark + ".pid")
	if err != nil {
		t.Fatalf("the wrapper did not take the port: %v", err)
	}
	holder, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if holder <= 0 || !agentrun.ProcessGone(holder) {
		t.Errorf("the program that held the port (pid %d) outlived the failed start", holder)
	}
	// It runs rounds on that cluster and stops cleanly on Ctrl-C. (With -rounds it could stop
	// its agents before the checks above reach them.)
	d.waitLine(t, time.Minute, "Round 0 at ")
	d.interrupt()
	if code := d.wait(t, 2*time.Minute); code != 0 {
		t.Errorf("fftctl dev exited %d:\n%s", code, d.output())
	}
}
