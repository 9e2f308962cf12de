// Package testenv finds or builds what the plugin conformance and end-to-end tests run: the
// nomad-device-fft binary, the Nomad and Consul agents, free loopback ports, agent processes.
// The agent lookup, configuration, processes and clean-up are internal/agentrun's, shared with
// fftctl dev; this package ties them to a test's lifetime.
package testenv
