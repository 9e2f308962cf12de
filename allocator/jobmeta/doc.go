// Package jobmeta parses and validates the `fft.` job meta contract by which a Nomad job opts in
// to FFT rounds.
package jobmeta
