package command

import (
	"errors"
	"fmt"
	"net"
)

// Without a cluster every command that talks to one fails on its first
// request with Go's "dial tcp ...: connection refused", which says what
// broke but not what to do. These hints name the fix: the local cluster,
// or the flag and variable that point fftctl at another.

// unreachable reports whether err is a failure to reach an address at all
// (refused, no route, no such host), not an answer the agent gave.
func unreachable(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// consulHint is what to do when err says no Consul agent answers at addr;
// "" for any other error.
func consulHint(err error, addr string) string {
	if !unreachable(err) {
		return ""
	}
	return fmt.Sprintf("\n\nNo Consul agent answers at %s. Start a local cluster with `make dev` "+
		"(its Consul listens on 127.0.0.1:8500 when the port is free), or point fftctl at yours "+
		"with -consul-addr or CONSUL_HTTP_ADDR.", addr)
}

// nomadHint is what to do when err says no Nomad agent answers at addr; ""
// for any other error.
func nomadHint(err error, addr string) string {
	if !unreachable(err) {
		return ""
	}
	return fmt.Sprintf("\n\nNo Nomad agent answers at %s. Start a local cluster with `make dev` "+
		"(its Nomad listens on 127.0.0.1:4646 when the port is free), or point fftctl at yours "+
		"with -address or NOMAD_ADDR.", addr)
}

// allocatorHint is what to do when err says no fft-allocator answers at
// addr; "" for any other error.
func allocatorHint(err error, addr string) string {
	if !unreachable(err) {
		return ""
	}
	return fmt.Sprintf("\n\nNo fft-allocator answers at %s. Give the address of a running one "+
		"(its -http-addr; `fftctl dev` prints the local cluster's) with -allocator-addr or "+
		"FFT_ALLOCATOR_ADDR, or leave both empty to report through Consul.", addr)
}
