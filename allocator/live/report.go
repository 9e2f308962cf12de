package live

import (
	"context"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/report"
)

// ReportStorer is an optional Store interface (found by type assertion): it
// stores a job's full progress report, with what its task driver measured,
// where ProgressReader still reads the work done.
type ReportStorer interface {
	StoreReport(ctx context.Context, id string, r report.Report) error
}

// storeReport writes r through the richest interface the store has; a store
// without ReportStorer keeps the work done only.
func storeReport(ctx context.Context, rep loop.ProgressReporter, id string, r report.Report) error {
	if rs, ok := rep.(ReportStorer); ok && r.Measured() {
		return rs.StoreReport(ctx, id, r)
	}
	return rep.ReportProgress(ctx, id, r.Done)
}
