package agentrun

import (
	"net"
	"testing"
)

// TestFreePortsBelowEphemeralRange checks what the chaos tests' restarts rely on: the ports
// are distinct, bindable for TCP and UDP, and never from the range outgoing connections take
// their source ports from.
func TestFreePortsBelowEphemeralRange(t *testing.T) {
	lo, hi := candidateRange()
	if hi == 0 {
		t.Skipf("no ephemeral range in %s here", ephemeralRangeFile)
	}
	for round := 0; round < 20; round++ {
		ports, err := FreePorts(12)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for _, p := range ports {
			if p < lo || p >= hi {
				t.Fatalf("port %d outside [%d, %d)", p, lo, hi)
			}
			if seen[p] {
				t.Fatalf("port %d returned twice in %v", p, ports)
			}
			seen[p] = true
			release, ok := hold(p)
			if !ok {
				t.Fatalf("port %d is not free for TCP and UDP", p)
			}
			release()
		}
	}
}

// TestHoldRefusesATakenPort checks the test FreePorts makes of each candidate: a port some
// program listens on is not returned.
func TestHoldRefusesATakenPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if release, ok := hold(l.Addr().(*net.TCPAddr).Port); ok {
		release()
		t.Fatalf("hold(%s) succeeded on a port a listener holds", l.Addr())
	}
}
