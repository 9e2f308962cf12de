// Package devcluster runs a local FFT cluster for development: a Consul dev agent, a Nomad
// server, Nomad clients whose nomad-device-fft plugin presents fake GPU models, and the
// fft-allocator as a Nomad job (jobspecs/fft-allocator.nomad.hcl) on two more clients with a
// Consul agent each, all on loopback under one state folder, and stops them without leftovers.
// Finding the agents, their configuration, process groups and clean-up are e2e/agentrun's,
// shared with the e2e tests.
package devcluster
