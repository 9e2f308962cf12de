package agentrun

import (
	"fmt"
	"net"
)

// FreePorts returns n distinct TCP ports free on 127.0.0.1 now. The agents bind them a moment
// later; on a busy machine another program may take one first, and the agent then fails with
// the port in its log.
func FreePorts(n int) ([]int, error) {
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
