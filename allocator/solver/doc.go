// Package solver finds the exact optimum of one FFT round: a multiple-choice
// assignment of gang jobs to GPU models under per-model capacity and a
// work-conserving lower bound on total usage.
package solver
