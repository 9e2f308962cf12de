// Package conformance drives the built nomad-device-fft and nomad-driver-fft binaries through
// Nomad 1.6.1's own plugin loader: handshake, config, fingerprint, reserve and stats; a task
// started, recovered by a new plugin process and stopped with a checkpoint.
package conformance
