// Package task is the nomad-driver-fft Nomad task driver: it runs a training process on
// Nomad's shared executor with exactly its allocated GPUs visible, asks it for a checkpoint on
// stop, follows its progress file and reports what it measured to the fft-allocator.
package task
