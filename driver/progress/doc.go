// Package progress turns a training task's progress lines into work done, a robust steady
// throughput and a restart time; it is pure (no I/O, no clock).
package progress
