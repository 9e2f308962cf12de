// Package report is a job's progress report to the allocator: the work it has done and what
// its task driver measured (throughput, restart and checkpoint costs), with a strict parser.
package report
