// Package agentrun runs the local Nomad and Consul agents that both the dev cluster (fftctl dev)
// and the end-to-end tests start: it finds the pinned agent binaries, writes their
// configuration, starts programs in process groups of their own and stops them, and cleans up
// what Nomad clients leave behind (executors, tasks, mounts).
//
// It is a package of the main module, importing only the standard library, so that the main
// module needs no replace (go install works) and the e2e/agents/nomad module, which requires
// the main module through a replace to this checkout, adds nothing to its build list for it.
package agentrun
