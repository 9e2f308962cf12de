package loop

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/policy"
)

// BenchmarkWarmRound times the round loop's own work in a warm live round: fft-allocator's
// loop, with its default policy (policy.DefaultName) and full records, driven through the
// Harness and the MemStore, so the Nomad and Consul clients (their calls, decoding and
// encoding) are left out; the e2e BenchmarkWarmRound*Jobs measure them with real agents. The
// cluster and jobs are that benchmark's (LoadHarness), with 20 s rounds, after 10 rounds have
// run (the policy then parks and starts 32 jobs every few rounds, and changes nothing in the
// others: changes/op counts the plan's changes).
//
//	go test -run '^$' -bench WarmRound -benchmem ./allocator/loop/
func BenchmarkWarmRound(b *testing.B) {
	for _, jobs := range []int{5000, 20000} {
		b.Run(fmt.Sprintf("jobs=%d", jobs), func(b *testing.B) { benchmarkWarmRound(b, jobs) })
	}
}

func benchmarkWarmRound(b *testing.B, jobs int) {
	h := LoadHarness(jobs)
	round := loadRounds(b, h, h)
	// The cold round, and enough rounds after it that jobs have attained service and the
	// policy swaps some of them now and then.
	for range 10 {
		round()
	}
	var changes int
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		rec := round()
		for _, n := range rec.Apply.Applied {
			changes += n
		}
	}
	b.ReportMetric(float64(changes)/float64(b.N), "changes/op")
}

// loadRounds returns a function that runs the next round of the warm-round benchmarks' loop
// (the default policy, full records, 20 s rounds on a clock moved by hand) over h, with nomad
// applying its plans.
func loadRounds(tb testing.TB, h *Harness, nomad Applier) func() *RoundRecord {
	cfg := allocator.DefaultConfig()
	cfg.RoundSeconds = 20
	pol, err := policy.New(policy.DefaultName, policy.Options{RestartSeconds: cfg.RestartSeconds})
	if err != nil {
		tb.Fatal(err)
	}
	clock := &HarnessClock{T: time.Unix(1_700_000_000, 0)}
	l := New(h, nomad, NewMemStore(false), WithConfig(cfg), WithPolicy(pol), WithClock(clock.Now))
	return func() *RoundRecord {
		rec, err := l.RunRound(context.Background(), TriggerSchedule, nil)
		if err != nil {
			tb.Fatal(err)
		}
		clock.Advance(20 * time.Second)
		return rec
	}
}
