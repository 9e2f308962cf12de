package agentrun

import (
	"fmt"
	"math/rand"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// FreePorts draws from [lowestPort, highestPort): above the well-known and most registered
// service ports, and below Nomad's default dynamic port range (20000-32000), from which a
// Nomad client gives tasks ports without checking what else listens there.
const (
	lowestPort  = 10000
	highestPort = 20000
)

// blockSize is how many ports a process reserves at a time: its first (the sentinel) is held
// for as long as the process runs, and the others are handed out only by that process.
const blockSize = 50

// ephemeralRangeFile holds the range the kernel takes outgoing connections' source ports from.
const ephemeralRangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// FreePorts returns n distinct ports free for both TCP and UDP on 127.0.0.1 now, which no other
// process calling FreePorts is given while this one runs.
//
// Why blocks: the agents bind their ports a moment after they are drawn, and `go test ./...`
// runs several test binaries at once, each starting agents (and `fftctl dev` starts its own).
// Two processes drawing ports at random once chose the same one within that moment, and one
// agent failed to bind, or a readiness probe reached the other process's agent. So a process
// reserves a block of ports by listening on the block's first port for the rest of its life,
// and draws only from its own blocks; another process finds that port taken and skips the
// block. When every block is reserved, a process goes round its own blocks again, skipping
// ports still bound.
//
// The ports lie below the kernel's ephemeral range and Nomad's dynamic ports. A port from the
// ephemeral range (what ":0" gives) is also the source port of any outgoing connection, so an
// agent restarted on its old ports (the chaos tests' restart faults) found them taken by some
// client's connection often enough to fail a test now and then.
func FreePorts(n int) ([]int, error) {
	lo, hi := candidateRange()
	if hi-lo < 4*n || hi-lo < 2*blockSize {
		return listenPorts(n)
	}
	return processPorts.take(n, lo, hi)
}

// processPorts is this process's reservation.
var processPorts portBlocks

// portBlocks hands out ports from the blocks this process reserved.
type portBlocks struct {
	mu        sync.Mutex
	sentinels []net.Listener // one per reserved block, held until the process exits
	block     int            // index in sentinels of the block ports are drawn from
	next      int            // the next port to try in that block
}

// take returns n ports free now from the process's blocks in [lo, hi), reserving blocks as
// needed.
func (b *portBlocks) take(n, lo, hi int) ([]int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ports []int
	// Two passes over every block of the range find n ports unless nearly all are bound.
	for tries := 0; len(ports) < n; tries++ {
		if tries > 2*(hi-lo) {
			return nil, fmt.Errorf("finding %d free ports in %d-%d: only %d after %d tries", n, lo, hi-1, len(ports), tries)
		}
		if len(b.sentinels) == 0 || b.next >= b.blockStart()+blockSize {
			if err := b.nextBlock(lo, hi); err != nil {
				return nil, err
			}
		}
		p := b.next
		b.next++
		if release, ok := hold(p); ok {
			release()
			ports = append(ports, p)
		}
	}
	return ports, nil
}

func (b *portBlocks) blockStart() int {
	return b.sentinels[b.block].Addr().(*net.TCPAddr).Port
}

// nextBlock moves to a newly reserved block, or, when every block of [lo, hi) is reserved, to
// the process's next own block.
func (b *portBlocks) nextBlock(lo, hi int) error {
	count := (hi - lo) / blockSize
	first := rand.Intn(count)
	for i := 0; i < count; i++ {
		start := lo + (first+i)%count*blockSize
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(start)))
		if err != nil {
			continue
		}
		b.sentinels = append(b.sentinels, l)
		b.block = len(b.sentinels) - 1
		b.next = start + 1
		return nil
	}
	if len(b.sentinels) == 0 {
		return fmt.Errorf("reserving ports in %d-%d: every block of %d is held by another process", lo, hi-1, blockSize)
	}
	b.block = (b.block + 1) % len(b.sentinels)
	b.next = b.blockStart() + 1
	return nil
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

// hold binds port p for TCP and UDP on 127.0.0.1 (an agent's serf uses both, so both must be
// free) and returns what releases it.
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
