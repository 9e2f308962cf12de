// Package metrics computes a simulated run's per-job results and summary
// (JCT, starvation, finish-time fairness, utilisation) from its sim.Log.
package metrics
