package agentrun

import (
	"fmt"
	"math/rand"
	"net"
	"os"
	"strconv"
	"strings"
)

// FreePorts draws from [lowestPort, highestPort): above the well-known and most registered
// service ports, and below Nomad's default dynamic port range (20000-32000), from which a
// Nomad client gives tasks ports without checking what else listens there.
const (
	lowestPort  = 10000
	highestPort = 20000
)

// ephemeralRangeFile holds the range the kernel takes outgoing connections' source ports from.
const ephemeralRangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// FreePorts returns n distinct ports free for both TCP and UDP on 127.0.0.1 now. The agents
// bind them a moment later; on a busy machine another program may take one first, and the
// agent then fails with the port in its log.
//
// The ports lie below the kernel's ephemeral range and Nomad's dynamic ports. A port from the
// ephemeral range (what ":0" gives) is also the source port of any outgoing connection, so an
// agent restarted on its old ports (the chaos tests' restart faults) found them taken by some
// client's connection often enough to fail a test now and then.
func FreePorts(n int) ([]int, error) {
	lo, hi := candidateRange()
	if hi-lo < 4*n {
		return listenPorts(n)
	}
	var held []func()
	defer func() {
		for _, release := range held {
			release()
		}
	}()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 100*n {
			return nil, fmt.Errorf("finding %d free ports in %d-%d: only %d after %d tries", n, lo, hi-1, len(ports), tries)
		}
		p := lo + rand.Intn(hi-lo)
		release, ok := hold(p)
		if !ok {
			continue
		}
		held = append(held, release)
		ports = append(ports, p)
	}
	return ports, nil
}

// candidateRange returns [lo, hi): FreePorts' range cut below the ephemeral range, or an empty
// range when the ephemeral range cannot be read (not Linux) or starts below lowestPort.
func candidateRange() (lo, hi int) {
	b, err := os.ReadFile(ephemeralRangeFile)
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0
	}
	start, err := strconv.Atoi(f[0])
	if err != nil || start <= lowestPort {
		return 0, 0
	}
	return lowestPort, min(start, highestPort)
}

// hold binds port p for TCP and UDP on 127.0.0.1 (so that one call never returns it twice and
// an agent's serf, which uses both, finds both free) and returns what releases it.
func hold(p int) (release func(), ok bool) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, false
	}
	c, err := net.ListenPacket("udp", addr)
	if err != nil {
		l.Close()
		return nil, false
	}
	return func() { l.Close(); c.Close() }, true
}

// listenPorts is the fallback where no range below the ephemeral one is known: the kernel's
// choice of ":0".
func listenPorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
