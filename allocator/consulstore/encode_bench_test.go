package consulstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/roundtime"
)

// BenchmarkRecordEncoding times what Record encodes each round at the warm-round benchmark's
// sizes (loop.LoadHarness, as e2e BenchmarkWarmRound*Jobs: managed jobs on two hosts of 32 GPUs
// of each model), without Consul, in the memory Record keeps from round to round: part=prepare
// is what Prepare encodes while the round waits on Nomad (the job chunks that changed, the
// record's job lines), part=record what is left for Record (the rest of the round record,
// around the prepared lines), and part=unprepared what Record encodes without Prepare.
//
//	go test -run '^$' -bench RecordEncoding -benchmem ./allocator/consulstore/
func BenchmarkRecordEncoding(b *testing.B) {
	for _, n := range []int{5000, 20000} {
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
		parts := map[string]func(sc *scratches) (written int, err error){
			"prepare": func(sc *scratches) (int, error) {
				ops, err := s.jobOpsBeside(prev.Jobs, next.Jobs, sc, func() error { return sc[JobChunks].prepareLines(rec.Jobs) })
				return sizeOf(ops), err
			},
			"record": func(sc *scratches) (int, error) {
				round, err := sc[JobChunks].roundPrepared(rec)
				return len(round), err
			},
			"unprepared": func(sc *scratches) (int, error) {
				round, err := sc[JobChunks].round(rec)
				if err != nil {
					return 0, err
				}
				ops, err := s.jobOps(prev.Jobs, next.Jobs, sc)
				return len(round) + sizeOf(ops), err
			},
		}
		for _, part := range []string{"prepare", "record", "unprepared"} {
			b.Run(fmt.Sprintf("jobs=%d/part=%s", n, part), func(b *testing.B) {
				sc := new(scratches) // kept between rounds, as Record keeps it
				if err := sc[JobChunks].prepareLines(rec.Jobs); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				cpu0, _ := roundtime.CPU()
				var written int
				for range b.N {
					var err error
					if written, err = parts[part](sc); err != nil {
						b.Fatal(err)
					}
				}
				// The process's CPU, every thread and the collector included: the
				// encoding runs on several cores at once, so the wall time is not its cost.
				if cpu, ok := roundtime.CPU(); ok {
					b.ReportMetric(float64(cpu-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
				}
				b.ReportMetric(float64(written)/1024, "written-KiB")
			})
		}
	}
}

// sizeOf is the bytes of the values ops write.
func sizeOf(ops api.TxnOps) int {
	size := 0
	for _, op := range ops {
		size += len(op.KV.Value)
	}
	return size
}
