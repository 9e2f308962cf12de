// Package live runs FFT rounds against a live cluster: it observes the cluster, decides with the
// round engine, applies the plan and records the round, through interfaces its adapters implement.
package live
