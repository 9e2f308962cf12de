package live

import (
	"context"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/report"
)

// storeReport writes r through the richest interface the store has; a store
// without ReportStorer keeps the work done only.
func storeReport(ctx context.Context, rep loop.ProgressReporter, id string, r report.Report) error {
	if rs, ok := rep.(loop.ReportStorer); ok && r.Measured() {
		return rs.StoreReport(ctx, id, r)
	}
	return rep.ReportProgress(ctx, id, r.Done)
}
