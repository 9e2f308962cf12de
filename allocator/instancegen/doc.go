// Package instancegen draws realistic FFT round instances (Gavel-like
// throughput ratios between GPU models, gang sizes 1/2/4/8, spread-out
// fairness compensation) for benchmarks, tests and examples.
package instancegen
