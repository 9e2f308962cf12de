// Package testenv finds or builds what the plugin conformance and end-to-end tests run: the
// nomad-device-fft binary, the Nomad agent, free loopback ports, agent processes.
package testenv
