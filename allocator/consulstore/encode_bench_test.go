package consulstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/roundtime"
)

// BenchmarkRecordEncoding times what Record encodes each round at the
// warm-round benchmark's sizes (loop.LoadHarness, as e2e
// BenchmarkWarmRound*Jobs: managed jobs on two hosts of 64 GPUs), without Consul: the round record and the job
// chunks that changed, in the memory Record keeps from round to round.
//
//	go test -run '^$' -bench RecordEncoding -benchmem ./allocator/consulstore/
func BenchmarkRecordEncoding(b *testing.B) {
	for _, n := range []int{5000, 20000} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			h := loop.LoadHarness(n)
			st := loop.NewMemStore(true)
			l := loop.New(h, h, st)
			var prev *loop.Ledger
			for range 2 {
				prev = st.Stored()
				if _, err := l.RunRound(context.Background(), loop.TriggerManual, nil); err != nil {
					b.Fatal(err)
				}
			}
			next := st.Stored()
			recs := st.Records()
			rec := recs[len(recs)-1]
			s := &Store{prefix: "b/"}
			sc := new(scratches) // kept between rounds, as Record keeps it
			b.ResetTimer()
			cpu0, _ := roundtime.CPU()
			defer func() {
				// The process's CPU, every thread and the collector included: the
				// encoding runs on several cores at once, so the wall time is not its cost.
				if cpu, ok := roundtime.CPU(); ok {
					b.ReportMetric(float64(cpu-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
				}
			}()
			for range b.N {
				round, err := sc[JobChunks].round(rec)
				if err != nil {
					b.Fatal(err)
				}
				ops, err := s.jobOps(prev.Jobs, next.Jobs, sc)
				if err != nil {
					b.Fatal(err)
				}
				size := len(round)
				for _, op := range ops {
					size += len(op.KV.Value)
				}
				b.ReportMetric(float64(len(round))/1024, "record-KiB")
				b.ReportMetric(float64(len(ops)), "chunks")
				b.ReportMetric(float64(size)/1024, "written-KiB")
			}
		})
	}
}
