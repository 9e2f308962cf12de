// Package sim is a deterministic discrete-round simulator: it runs the
// allocator's own round loop (package loop) with any policy.Policy over a
// workload (package workload), on a simulated cluster with a virtual clock
// in place of Nomad, and records every event of the run in a Log.
package sim
