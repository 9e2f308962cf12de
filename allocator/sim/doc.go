// Package sim is a deterministic discrete-round simulator that drives any
// policy.Policy over a workload (Gavel's Philly-like generator, Gavel and
// Shockwave trace files, or a documented CSV) on a cluster given as GPU
// counts per model, and computes every metric of fft.md from one event log.
package sim
