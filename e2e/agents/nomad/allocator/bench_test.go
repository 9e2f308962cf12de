package allocator

import (
	"fmt"
	"os/exec"
	"testing"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// BenchmarkRound200Jobs times one observe-solve-apply-record pass of fft-allocator (-once, a
// fresh process each time, so the first observation reads every job) against a real Nomad
// cluster with 200 managed jobs of 1 and 2 GPUs and 8 GPUs of two models, two hosts of 2 GPUs
// each, and reports the Nomad API calls the round made and the round's own duration (without
// process start-up).
//
//	cd e2e/agents/nomad && FFT_E2E=1 go test -run '^$' -bench '^BenchmarkRound200Jobs$' -benchtime 3x ./allocator/
func BenchmarkRound200Jobs(b *testing.B) {
	st := startStack(b, []testenv.FakeGPUClient{
		{Name: "v100-1", Model: modelV100, Count: 2, Extra: `memory_mib = 16384`},
		{Name: "v100-2", Model: modelV100, Count: 2, Extra: `memory_mib = 16384`},
		{Name: "a100-1", Model: modelA100, Count: 2},
		{Name: "a100-2", Model: modelA100, Count: 2},
	})
	c, cs := st.Cluster, st.consul
	jobspec := trainJobspec(b)
	const jobs = 200
	for i := 0; i < jobs; i++ {
		vars := fmt.Sprintf("work = \"%d\"\nseconds = 600\ngpu_count = %d\nthroughput = \"%s=%g,%s=%g\"",
			20+i%37*5, 1+i%2, modelA100, 2+float64(i%5), modelV100, 1+float64(i%3)/2)
		register(b, c.API, parseJob(b, c.API, jobspec, fmt.Sprintf("bench-%03d", i), vars))
	}

	var calls, observeCalls, roundSeconds float64
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		cmd := exec.Command(st.bin, st.args("-once", "-http-addr", "", "-log-level", "warn")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("fft-allocator -once: %v\n%s", err, out)
		}
		b.StopTimer()
		var rec struct {
			ObserveCalls int                 `json:"observe_calls"`
			Apply        struct{ Calls int } `json:"apply"`
			Phases       map[string]float64  `json:"phases"`
			Jobs         []struct{}          `json:"jobs"`
		}
		readKV(b, cs, fmt.Sprintf("%s/rounds/%012d", prefix, n), &rec)
		if len(rec.Jobs) != jobs {
			b.Fatalf("round %d saw %d jobs, want %d", n, len(rec.Jobs), jobs)
		}
		calls += float64(rec.ObserveCalls + rec.Apply.Calls)
		observeCalls += float64(rec.ObserveCalls)
		for _, d := range rec.Phases {
			roundSeconds += d
		}
		b.StartTimer()
	}
	b.ReportMetric(calls/float64(b.N), "api-calls/op")
	b.ReportMetric(observeCalls/float64(b.N), "observe-calls/op")
	b.ReportMetric(roundSeconds/float64(b.N), "round-s/op")
}
