// Package allocator holds the end-to-end tests of fft-allocator against real Consul and Nomad
// agents whose clients present fake GPU models.
//
// The scheduling tests run on two or more hosts (Nomad clients) per model, so that each
// decision must also be placed on a host, as in a real cluster; where a test's story needs
// every GPU of a model busy, its jobs come in pairs, one gang a host. One model on one host is
// left only where placement is not what a test checks: the ACL, TLS and jobspec tests, and
// BenchmarkRound200Jobs, whose numbers are compared across sessions.
package allocator
