package live

import (
	"context"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/report"
)

// storeReport writes r, from allocation alloc ("" when not verified),
// through the richest interface the store has: an AllocReporter checks it
// against the stored report (a *loop.BehindError when it goes back); a store
// without ReportStorer keeps the work done only.
func storeReport(ctx context.Context, rep loop.ProgressReporter, id, alloc string, jobIndex uint64, r report.Report) error {
	// The allocation and its job's index are the verified ones, never the client's word.
	r.Alloc, r.JobCreateIndex = "", jobIndex
	if ar, ok := rep.(loop.AllocReporter); ok && alloc != "" {
		return ar.StoreAllocReport(ctx, id, alloc, r)
	}
	if rs, ok := rep.(loop.ReportStorer); ok && r.Measured() {
		return rs.StoreReport(ctx, id, r)
	}
	return rep.ReportProgress(ctx, id, r.Done)
}
