// Package chaos holds the chaos suite: fft-allocator replicas, real Consul and Nomad agents and
// fake-GPU clients under seeded, logged faults, with invariants checked afterwards from Nomad's
// allocations and the Consul audit log.
package chaos
