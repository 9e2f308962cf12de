// Package agentrun runs the local Nomad and Consul agents that both the dev cluster (fftctl dev)
// and the end-to-end tests start: it finds the pinned agent binaries, writes their
// configuration, starts programs in process groups of their own and stops them, and cleans up
// what Nomad clients leave behind (executors, tasks, mounts).
//
// It is a module of its own, with no requirements, because the main module and the
// e2e/agents/nomad module both need it and neither can import the other: the e2e module pins the
// Nomad 1.6.1-era nomad/api that the agent build needs, and requiring the main module would raise
// it. A module without requirements adds nothing to either one's module graph.
package agentrun
