package agentrun

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
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

// TestFreePortsComeFromHeldBlocks checks what keeps processes apart: every port returned lies
// in a block whose first port this process listens on, so another process cannot reserve it.
func TestFreePortsComeFromHeldBlocks(t *testing.T) {
	lo, hi := candidateRange()
	if hi == 0 {
		t.Skipf("no ephemeral range in %s here", ephemeralRangeFile)
	}
	seen := map[int]bool{}
	for i := 0; i < 40; i++ {
		ports, err := FreePorts(7)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ports {
			if seen[p] {
				t.Fatalf("port %d returned by two calls", p)
			}
			seen[p] = true
			start := lo + (p-lo)/blockSize*blockSize
			if p == start {
				t.Fatalf("port %d is a block's sentinel", p)
			}
			if release, ok := hold(start); ok {
				release()
				t.Fatalf("port %d's block (from %d) is not held", p, start)
			}
		}
	}
}

// TestFreePortsApartAcrossProcesses runs this test binary again as a second process drawing
// many ports, and checks that none falls in a block this process reserved.
func TestFreePortsApartAcrossProcesses(t *testing.T) {
	if os.Getenv("FFT_PORTS_CHILD") == "1" {
		ports, err := FreePorts(1000)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(ports)
		os.Exit(0)
	}
	lo, hi := candidateRange()
	if hi == 0 {
		t.Skipf("no ephemeral range in %s here", ephemeralRangeFile)
	}
	mine, err := FreePorts(2 * blockSize)
	if err != nil {
		t.Fatal(err)
	}
	ours := map[int]bool{}
	for _, p := range mine {
		ours[lo+(p-lo)/blockSize*blockSize] = true
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestFreePortsApartAcrossProcesses$")
	cmd.Env = append(os.Environ(), "FFT_PORTS_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("second process: %v\n%s", err, out)
	}
	fields := strings.Fields(strings.Trim(strings.TrimSpace(string(out)), "[]"))
	if len(fields) != 1000 {
		t.Fatalf("second process printed %d ports, want 1000:\n%s", len(fields), out)
	}
	for _, f := range fields {
		p, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("second process printed %q", f)
		}
		if ours[lo+(p-lo)/blockSize*blockSize] {
			t.Fatalf("second process got port %d, in a block this process holds", p)
		}
	}
}

// TestPortBlocksGoRoundWhenAllAreReserved checks the fallback: with every block of the range
// reserved, a process draws again from its own blocks, skipping ports that are bound.
func TestPortBlocksGoRoundWhenAllAreReserved(t *testing.T) {
	var b portBlocks
	lo := findFreeBlock(t)
	first, err := b.take(blockSize-1, lo, lo+blockSize)
	if err != nil {
		t.Fatal(err)
	}
	defer b.sentinels[0].Close()
	if first[0] != lo+1 || first[len(first)-1] != lo+blockSize-1 {
		t.Fatalf("first pass = %v, want %d..%d", first, lo+1, lo+blockSize-1)
	}
	busy, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(lo+1)))
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	again, err := b.take(2, lo, lo+blockSize)
	if err != nil {
		t.Fatal(err)
	}
	if again[0] != lo+2 || again[1] != lo+3 {
		t.Fatalf("second pass = %v, want [%d %d] (port %d is bound)", again, lo+2, lo+3, lo+1)
	}
	if len(b.sentinels) != 1 {
		t.Fatalf("%d blocks reserved in a range of one", len(b.sentinels))
	}
}

// findFreeBlock returns the start of a block below 10000 whose ports are all free now, for
// tests that need a range of their own outside FreePorts'.
func findFreeBlock(t *testing.T) int {
	t.Helper()
	for lo := 5000; lo+blockSize <= lowestPort; lo += blockSize {
		ok := true
		for p := lo; p < lo+blockSize && ok; p++ {
			release, free := hold(p)
			if free {
				release()
			}
			ok = free
		}
		if ok {
			return lo
		}
	}
	t.Skip("no free block of ports in 5000-9999")
	return 0
}
