// Package conformance drives the built nomad-device-fft binary through Nomad 1.6.1's own
// plugin loader: handshake, config, fingerprint, reserve and stats.
package conformance
