// Package guide runs the operator guide, cmd/fft-allocator/GUIDE.md, as its test: its marked
// files and commands in order, on real Consul and Nomad agents with ACLs and TLS on, then
// checks the end state the guide promises.
package guide
