// Package devcluster runs a local FFT cluster for development: a Consul dev agent, a Nomad
// server, Nomad clients whose nomad-device-fft plugin presents fake GPU models, and the
// fft-allocator, all on loopback under one state folder, and stops them without leftovers.
package devcluster
