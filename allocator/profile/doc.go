// Package profile estimates each job's throughput on every GPU model from a log-additive model
// (job factor plus model factor, with family and gang-size corrections) learned across jobs,
// seeded by a prior table and refined by every measurement.
package profile
