// Package fftctl holds the end-to-end tests of the built fftctl binary: fftctl dev against the
// pinned Nomad and Consul agents, and run, report, status, explain and audit against the
// cluster it starts.
package fftctl
