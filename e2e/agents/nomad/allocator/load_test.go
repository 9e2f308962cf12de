package allocator

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// BenchmarkWarmRound200Jobs to BenchmarkWarmRound20000Jobs time the warm rounds of a long-running
// fft-allocator (its job cache filled by the first round and kept by Nomad's event stream) against
// a real Nomad server with that many managed jobs, registered held through the API, on four
// fake-GPU clients of 32 GPUs, two of each model. Per warm round they report the Nomad API calls of
// the observation and of the apply, the plan's changes, the Consul KV keys the round wrote, the
// transactions it took and the largest values stored, each phase's duration, and the round's wall
// time as the allocator logged it (record included). It splits that time into what the round waited
// on Nomad and Consul (wait-s: wall time with a call outstanding, the apply's concurrent calls
// counted once) and the rest, the allocator's own (own-s: its work, or waiting for a core), and
// reports the process's CPU time (cpu-s, every thread), per phase too (PHASE-wait-s, PHASE-cpu-s),
// from the allocator's log. FFT_BENCH_LOG_LEVEL sets the allocator's log level (debug says which
// jobs a round read itself, and whether it took the job list from the event stream);
// FFT_BENCH_APPLY_CONCURRENCY its -apply-concurrency; FFT_BENCH_POLICY its -policy (default: the
// paper's fft, which here parks every running job each round, the worst case for Nomad's writes).
// FFT_BENCH_DRIVER=mock_driver runs the jobs' tasks with Nomad's mock driver instead of raw_exec.
//
//	cd e2e/agents/nomad && FFT_E2E=1 go test -run '^$' -bench 'WarmRound(5000|20000)Jobs' -benchtime 3x -timeout 60m ./allocator/
func BenchmarkWarmRound200Jobs(b *testing.B) { benchmarkWarmRound(b, 200) }

func BenchmarkWarmRound2000Jobs(b *testing.B) { benchmarkWarmRound(b, 2000) }

func BenchmarkWarmRound5000Jobs(b *testing.B) { benchmarkWarmRound(b, 5000) }

func BenchmarkWarmRound20000Jobs(b *testing.B) { benchmarkWarmRound(b, 20000) }

func benchmarkWarmRound(b *testing.B, jobs int) {
	driver := os.Getenv("FFT_BENCH_DRIVER")
	if driver != "" && driver != "raw_exec" && driver != "mock_driver" {
		b.Fatalf("FFT_BENCH_DRIVER=%q: set mock_driver, or raw_exec (the default)", driver)
	}
	st := startStack(b, []testenv.FakeGPUClient{
		{Name: "v100-1", Model: modelV100, Count: 32, Extra: `memory_mib = 16384`},
		{Name: "v100-2", Model: modelV100, Count: 32, Extra: `memory_mib = 16384`},
		{Name: "a100-1", Model: modelA100, Count: 32},
		{Name: "a100-2", Model: modelA100, Count: 32},
	})
	c, cs := st.Cluster, st.consul
	base := parseJob(b, c.API, trainJobspec(b), "load", "seconds = 3600")
	if driver == "mock_driver" {
		// Nomad's mock driver (in agents built without the release tag) runs a task as a
		// timer inside the client: no executor and logmon processes started and stopped per
		// task, whose CPU the clients otherwise take from the cores the server and the
		// allocator run on. The job's devices, meta and constraints stay the example's.
		task := base.TaskGroups[0].Tasks[0]
		task.Driver, task.Config = "mock_driver", map[string]any{"run_for": "3600s"}
	}
	registerMany(b, c.API, base, jobs)

	// Rounds long enough that one never runs into the next.
	// Trace: the record phase's duration is only in the log (the record holds the others).
	level := cmp.Or(os.Getenv("FFT_BENCH_LOG_LEVEL"), "trace")
	args := []string{"-round", "20s", "-min-round-gap", "0", "-http-addr", "", "-log-level", level}
	if n := os.Getenv("FFT_BENCH_APPLY_CONCURRENCY"); n != "" {
		args = append(args, "-apply-concurrency", n)
	}
	if p := os.Getenv("FFT_BENCH_POLICY"); p != "" {
		args = append(args, "-policy", p) // the last -policy wins over the stack's fft
	}
	proc := st.allocator(b, "fft-allocator", args...)
	waitRecord(b, cs, proc, 0, 10*time.Minute) // the cold round reads every job
	// A round's job records may follow its record in more transactions: wait for them.
	const recordTail = 2 * time.Second
	time.Sleep(recordTail)
	_, _, before := written(b, cs, 0)
	var observe, apply, changes, keys, txns, seconds, wall, recordKiB, chunkKiB float64
	var waited, cpu, omitted float64
	phase, phaseWait, phaseCPU := map[string]float64{}, map[string]float64{}, map[string]float64{}
	b.ResetTimer()
	for n := 1; n <= b.N; n++ {
		rec := waitRecord(b, cs, proc, n, 2*time.Minute)
		b.StopTimer()
		time.Sleep(recordTail)
		if len(rec.Jobs) != jobs {
			b.Fatalf("round %d saw %d jobs, want %d", n, len(rec.Jobs), jobs)
		}
		observe += float64(rec.ObserveCalls)
		if rec.OptionsOmitted {
			omitted++
		}
		apply += float64(rec.Apply.Calls)
		for _, k := range rec.Apply.Applied {
			changes += float64(k)
		}
		for name, d := range rec.Phases {
			seconds += d
			phase[name] += d
		}
		lines := roundLog(b, proc.LogPath, n) // read once: the allocator works on beside the benchmark
		w := roundWall(b, lines, n)
		wall += w
		rw, _ := loggedField(b, lines, "waited=", "round done")
		rc, _ := loggedField(b, lines, "cpu=", "round done")
		waited, cpu = waited+rw, cpu+rc
		split := map[string]string{}
		for _, name := range benchPhases {
			pw, _ := loggedField(b, lines, "waited=", "phase done", "-"+name+" ")
			pc, _ := loggedField(b, lines, "cpu=", "phase done", "-"+name+" ")
			phaseWait[name] += pw
			phaseCPU[name] += pc
			split[name] = fmt.Sprintf("wait %.3f cpu %.3f", pw, pc)
		}
		b.Logf("round %d: waited %.2f s on Nomad and Consul, CPU %.2f s; per phase %v", n, rw, rc, split)
		if r, ok := recordPhase(b, lines); ok {
			rec.Phases["record"] = r
			phase["record"] += r
			seconds += r
		}
		b.Logf("round %d: %.2f s, observe %d calls, apply %d calls for %v, phases %v", n, w, rec.ObserveCalls, rec.Apply.Calls, rec.Apply.Applied, rec.Phases)
		k, x, last, largest := writtenSizes(b, cs, before)
		keys, txns, before = keys+float64(k), txns+float64(x), last
		recordKiB, chunkKiB = max(recordKiB, float64(largest["rounds"])/1024), max(chunkKiB, float64(largest["jobs"])/1024)
		b.StartTimer()
	}
	per := func(v float64) float64 { return v / float64(b.N) }
	if raw, err := os.ReadFile(proc.LogPath); err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.Contains(line, "event stream") || strings.Contains(line, "the event stream has not brought") {
				b.Log(line)
			}
		}
	}
	b.ReportMetric(per(observe), "observe-calls/op")
	b.ReportMetric(per(apply), "apply-calls/op")
	b.ReportMetric(per(changes), "changes/op")
	b.ReportMetric(per(keys), "kv-keys-written/op")
	b.ReportMetric(per(txns), "kv-txns/op")
	b.ReportMetric(per(seconds), "round-s/op")
	b.ReportMetric(per(wall), "wall-s/op")
	// What the phases leave out: the reads of progress reports and overrides, the ledger.
	b.ReportMetric(per(wall-seconds), "between-phases-s/op")
	b.ReportMetric(recordKiB, "record-max-KiB")
	b.ReportMetric(per(omitted), "options-omitted/op")
	b.ReportMetric(chunkKiB, "job-chunk-max-KiB")
	for _, name := range []string{"observe", "solve", "place", "claim", "apply", "record"} {
		b.ReportMetric(per(phase[name]), name+"-s/op")
	}
	b.ReportMetric(per(waited), "wait-s/op")
	b.ReportMetric(per(wall-waited), "own-s/op")
	b.ReportMetric(per(cpu), "cpu-s/op")
	for _, name := range benchPhases {
		b.ReportMetric(per(phaseWait[name]), name+"-wait-s/op")
		b.ReportMetric(per(phaseCPU[name]), name+"-cpu-s/op")
	}
}

// benchPhases are the round's phases as its trace lines name them ("phase=2-build").
var benchPhases = []string{"observe", "build", "solve", "place", "claim", "apply", "record"}

// roundLog is the allocator's log lines of round n.
func roundLog(b *testing.B, logPath string, n int) []string {
	b.Helper()
	raw, err := os.ReadFile(logPath)
	if err != nil {
		b.Fatalf("reading the allocator's log: %v", err)
	}
	tag := fmt.Sprintf(" round=%d ", n)
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.Contains(line, tag) {
			out = append(out, line)
		}
	}
	return out
}

// roundWall is round n's duration as the allocator logged it when the round was done: from
// loading the ledger to the last Consul write, the phases and the record's writes included.
func roundWall(b *testing.B, lines []string, n int) float64 {
	b.Helper()
	d, ok := loggedField(b, lines, "duration=", "round done")
	if !ok {
		b.Fatalf("no \"round done\" line for round %d in the allocator's log", n)
	}
	return d
}

// recordPhase is the round's record phase (advancing the ledger, encoding and writing the
// record and job chunks) as the allocator logged it at trace level; ok is false without such a
// line.
func recordPhase(b *testing.B, lines []string) (seconds float64, ok bool) {
	b.Helper()
	return loggedField(b, lines, "duration=", "phase done", "phase=5-record")
}

// loggedField is the duration logged as key (with its "=") on the first of a round's log lines
// that holds every one of marks, in seconds; ok is false without such a line.
func loggedField(b *testing.B, lines []string, key string, marks ...string) (seconds float64, ok bool) {
	b.Helper()
next:
	for _, line := range lines {
		for _, m := range marks {
			if !strings.Contains(line, m) {
				continue next
			}
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, key); ok {
				d, err := time.ParseDuration(strings.Trim(v, `"`)) // quoted when not ASCII: "789µs"
				if err != nil {
					b.Fatalf("duration %q in %q: %v", v, line, err)
				}
				return d.Seconds(), true
			}
		}
	}
	return 0, false
}

// registerMany registers n copies of base (load-0000, ...), held outside the GPU pool, with
// eight writers at once.
func registerMany(b *testing.B, c *api.Client, base *api.Job, n int) {
	b.Helper()
	ids := make(chan int)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ids {
				job := *base
				id := fmt.Sprintf("load-%04d", i)
				job.ID, job.Name = &id, &id
				job.Meta = map[string]string{}
				for k, v := range base.Meta {
					job.Meta[k] = v
				}
				job.Meta["fft.work"] = fmt.Sprint(20 + i%37*5)
				if _, _, err := c.Jobs().Register(&job, nil); err != nil {
					errs <- fmt.Errorf("registering %s: %w", id, err)
					return
				}
			}
		}()
	}
	began := time.Now()
	for i := 0; i < n; i++ {
		select {
		case ids <- i:
		case err := <-errs:
			b.Fatal(err)
		}
	}
	close(ids)
	wg.Wait()
	b.Logf("registered %d jobs in %s", n, time.Since(began).Round(time.Second))
}

// loadRecord is the part of a round record the load benchmark reads.
type loadRecord struct {
	ObserveCalls int `json:"observe_calls"`
	Apply        struct {
		Calls   int            `json:"calls"`
		Applied map[string]int `json:"applied"`
	} `json:"apply"`
	Phases map[string]float64 `json:"phases"`
	Jobs   []struct{}         `json:"jobs"`
	// OptionsOmitted: the record was over what a Consul transaction carries with every job
	// line's options.
	OptionsOmitted bool `json:"options_omitted"`
}

// waitRecord waits for round n's full record and returns it.
func waitRecord(b *testing.B, cs *testenv.Consul, proc *testenv.Process, n int, timeout time.Duration) *loadRecord {
	b.Helper()
	var rec loadRecord
	testenv.Eventually(b, timeout, 250*time.Millisecond, fmt.Sprintf("round %d's record", n), func() error {
		if proc.Exited() { // a refused flag (-policy from FFT_BENCH_POLICY): its log says why
			b.Fatalf("%s exited before round %d's record; its log: %s", proc.Name, n, proc.LogPath)
		}
		var state struct {
			State string `json:"state"`
		}
		raw, err := kvRaw(cs, fmt.Sprintf("%s/rounds/%012d", prefix, n))
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, &state); err != nil || state.State != "" {
			return fmt.Errorf("round %d is %q (%v)", n, state.State, err)
		}
		return json.Unmarshal(raw, &rec)
	})
	return &rec
}

// kvPair is a key as Consul's KV API lists it.
type kvPair struct {
	Key         string
	ModifyIndex uint64
	Value       []byte
}

func kvRaw(cs *testenv.Consul, key string) ([]byte, error) {
	body, code, err := cs.Get("/v1/kv/" + key + "?raw=true")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d", key, code)
	}
	return gunzipped(body)
}

// written counts the keys below the prefix (the leader lock aside) written after index, and
// the distinct indexes (one per transaction) they were written at; last is the highest index.
func written(b *testing.B, cs *testenv.Consul, index uint64) (keys, txns int, last uint64) {
	keys, txns, last, _ = writtenSizes(b, cs, index)
	return keys, txns, last
}

// writtenSizes is written, plus the largest stored value (gzipped when large) among those keys
// by kind ("rounds", "jobs"): Consul takes a value of at most 512 KiB, the store 320 KiB.
func writtenSizes(b *testing.B, cs *testenv.Consul, index uint64) (keys, txns int, last uint64, largest map[string]int) {
	b.Helper()
	body, code, err := cs.Get("/v1/kv/" + prefix + "/?recurse=true")
	if err != nil || code != http.StatusOK {
		b.Fatalf("listing %s: %d %v", prefix, code, err)
	}
	var pairs []kvPair
	if err := json.Unmarshal(body, &pairs); err != nil {
		b.Fatalf("decoding %s: %v", prefix, err)
	}
	at := map[uint64]bool{}
	last = index
	largest = map[string]int{}
	for _, p := range pairs {
		if p.ModifyIndex > index && p.Key != prefix+"/leader" {
			keys++
			at[p.ModifyIndex] = true
			last = max(last, p.ModifyIndex)
			kind, _, _ := strings.Cut(strings.TrimPrefix(p.Key, prefix+"/"), "/")
			largest[kind] = max(largest[kind], len(p.Value))
		}
	}
	return keys, len(at), last, largest
}
