// Package policy defines the scheduling-policy interface shared by the
// simulator and the live allocator, the registry of built-in policies by
// name, the baselines (FIFO, binpack, Gavel's LAS and FTF, Tiresias, AlloX,
// a Sia-like program) and the FFT policy over the round engine.
package policy
