package allocator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// BenchmarkRound200Jobs times one observe-solve-apply-record pass of fft-allocator (-once, a
// fresh process each time, so the first observation reads every job) against a real Nomad
// cluster with 200 managed jobs and 8 GPUs of two models, and reports the Nomad API calls the
// round made and the round's own duration (without process start-up).
//
//	cd e2e/agents/nomad && FFT_E2E=1 go test -run '^$' -bench Round200 -benchtime 3x ./allocator/
func BenchmarkRound200Jobs(b *testing.B) {
	st := startStack(b, []testenv.FakeGPUClient{
		{Name: "v100", Model: modelV100, Count: 4, Extra: `memory_mib = 16384`},
		{Name: "a100", Model: modelA100, Count: 4},
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

// BenchmarkWarmRound2000Jobs runs one long-lived fft-allocator against a real Nomad cluster
// with 2,000 managed jobs and 8 GPUs of two models, and reports per warm round (every round
// after the first, whose reads fill the job cache) the Nomad API calls made observing and
// applying, and the round's own duration. The first round's observe calls are reported too.
// One op is one warm round.
//
//	cd e2e/agents/nomad && FFT_E2E=1 go test -run '^$' -bench WarmRound2000 -benchtime 3x -timeout 20m ./allocator/
func BenchmarkWarmRound2000Jobs(b *testing.B) {
	st := startStack(b, []testenv.FakeGPUClient{
		{Name: "v100", Model: modelV100, Count: 4, Extra: `memory_mib = 16384`},
		{Name: "a100", Model: modelA100, Count: 4},
	})
	c, cs := st.Cluster, st.consul
	const jobs = 2000
	// One parsed job, re-registered under each name with its own meta.
	job := parseJob(b, c.API, trainJobspec(b), "warm-0000", "seconds = 3600")
	for i := 0; i < jobs; i++ {
		id := fmt.Sprintf("warm-%04d", i)
		job.ID, job.Name = &id, &id
		job.Meta["fft.work"] = fmt.Sprint(20 + i%37*5)
		job.Meta["fft.throughput"] = fmt.Sprintf("%s=%g,%s=%g", modelA100, 2+float64(i%5), modelV100, 1+float64(i%3)/2)
		*job.TaskGroups[0].Tasks[0].Resources.Devices[0].Count = uint64(1 + i%2)
		register(b, c.API, job)
	}
	b.ResetTimer()
	proc := st.allocator(b, "fft-allocator", "-round", "1s", "-min-round-gap", "0", "-http-addr", "", "-log-level", "warn")
	type round struct {
		ObserveCalls int                 `json:"observe_calls"`
		Apply        struct{ Calls int } `json:"apply"`
		Phases       map[string]float64  `json:"phases"`
		Jobs         []struct{}          `json:"jobs"`
	}
	read := func(n int) round {
		var rec round
		key := fmt.Sprintf("%s/rounds/%012d", prefix, n)
		testenv.Eventually(b, 10*time.Minute, time.Second, "round record "+key, func() error {
			if proc.Exited() {
				b.Fatalf("fft-allocator exited")
			}
			_, code, err := cs.Get("/v1/kv/" + key)
			if err != nil || code != http.StatusOK {
				return fmt.Errorf("HTTP %d %v", code, err)
			}
			return nil
		})
		readRecord(b, cs, n, &rec)
		if len(rec.Jobs) != jobs {
			b.Fatalf("round %d saw %d jobs, want %d", n, len(rec.Jobs), jobs)
		}
		return rec
	}
	first := read(0)
	var observe, apply, seconds float64
	for n := 1; n <= b.N; n++ {
		rec := read(n)
		observe += float64(rec.ObserveCalls)
		apply += float64(rec.Apply.Calls)
		for _, d := range rec.Phases {
			seconds += d
		}
	}
	b.ReportMetric(float64(first.ObserveCalls), "first-round-observe-calls")
	b.ReportMetric(observe/float64(b.N), "observe-calls/op")
	b.ReportMetric(apply/float64(b.N), "apply-calls/op")
	b.ReportMetric(seconds/float64(b.N), "round-s/op")
}

// readRecord decodes round n's record, joining its parts when the store wrote it in parts
// (fairness/consulstore/parts.go).
func readRecord(tb testing.TB, cs *testenv.Consul, n int, v any) {
	tb.Helper()
	var stub struct {
		Parts  int    `json:"record_parts"`
		Digest string `json:"record_sha256"`
	}
	key := fmt.Sprintf("%s/rounds/%012d", prefix, n)
	readKV(tb, cs, key, &stub)
	if stub.Parts == 0 {
		readKV(tb, cs, key, v)
		return
	}
	var whole []byte
	for k := 0; k < stub.Parts; k++ {
		b, code, err := cs.Get(fmt.Sprintf("/v1/kv/%s/roundparts/%012d/%s/%04d?raw", prefix, n, stub.Digest, k))
		if err != nil || code != http.StatusOK {
			tb.Fatalf("round %d part %d: HTTP %d %v", n, k, code, err)
		}
		whole = append(whole, b...)
	}
	if err := json.Unmarshal(whole, v); err != nil {
		tb.Fatalf("decoding round %d's %d parts: %v", n, stub.Parts, err)
	}
}
