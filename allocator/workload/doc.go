// Package workload supplies the jobs a simulation runs: Gavel's Philly-like
// generator, Gavel and Shockwave trace files and our CSV, and Gavel's
// isolated throughput table that converts durations to steps.
package workload
