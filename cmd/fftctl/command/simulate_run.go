package command

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/policy"
	"github.com/nomad-fft/nomad-fft/allocator/sim"
	"github.com/nomad-fft/nomad-fft/allocator/sim/metrics"
	"github.com/nomad-fft/nomad-fft/allocator/workload"
)

// runKey names one simulation.
type runKey struct {
	policy string
	rate   float64
	seed   uint64
}

func (k runKey) file(prefix, ext string) string {
	return fmt.Sprintf("%s-%s-r%g-s%d%s", prefix, k.policy, k.rate, k.seed, ext)
}

// runOut is one simulation's log and, once analysed, its results.
type runOut struct {
	log  *sim.Log
	res  []metrics.JobResult
	sum  metrics.Summary
	err  error
	wall time.Duration
}

// runSimulations is `fftctl simulate` once its flags are checked: it runs
// every (policy, rate, seed), writes the per-run files and plots, and
// prints the table (or JSON) to stdout and progress to stderr.
func runSimulations(ctx context.Context, o *simulateOptions, stdout, stderr io.Writer) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("creating output directory %q: %w", o.out, err)
	}
	trace, err := loadTrace(o, stderr)
	if err != nil {
		return err
	}
	if len(o.adversaries) > 0 {
		return runAdversaries(ctx, o, trace, stdout, stderr)
	}
	names := o.policies
	if o.reference != "" {
		names = append([]string{o.reference}, names...)
	}
	results := runAll(ctx, o, runKeys(o, names), trace, stderr)
	rows, failed, err := analyseAll(o, names, results, trace != nil, stderr)
	if err != nil {
		return err
	}
	if err := printResults(o, rows, stdout); err != nil {
		return err
	}
	if len(failed) > 0 {
		sort.Strings(failed)
		return fmt.Errorf("%d run(s) failed:\n  %s", len(failed), strings.Join(failed, "\n  "))
	}
	return nil
}

// loadTrace reads -trace (nil without one) and reports skipped entries.
func loadTrace(o *simulateOptions, stderr io.Writer) (*workload.Trace, error) {
	if o.trace == "" {
		return nil, nil
	}
	t, err := workload.LoadTrace(o.trace, workload.TraceOptions{Table: o.table, Cluster: o.cluster, Skip: o.skipBad, Big: o.big})
	if err != nil {
		return nil, fmt.Errorf("loading trace: %w", err)
	}
	if t.Skipped > 0 {
		fmt.Fprintf(stderr, "warning: %d trace entries skipped; first ones:\n", t.Skipped)
		for _, w := range t.Warnings {
			fmt.Fprintf(stderr, "  %s\n", w)
		}
	}
	if len(t.Jobs) == 0 {
		return nil, fmt.Errorf("trace %q has no usable jobs", o.trace)
	}
	return t, nil
}

// runKeys lists the runs in a fixed order, each once: the reference run
// of a rate and seed comes before the policies that divide by it.
func runKeys(o *simulateOptions, names []string) []runKey {
	var keys []runKey
	seen := map[runKey]bool{}
	for _, r := range o.rates {
		for _, s := range o.seeds {
			for _, p := range names {
				k := runKey{p, r, s}
				if !seen[k] {
					seen[k] = true
					keys = append(keys, k)
				}
			}
		}
	}
	return keys
}

// runAll runs keys on o.parallel workers.
func runAll(ctx context.Context, o *simulateOptions, keys []runKey, trace *workload.Trace, stderr io.Writer) map[runKey]*runOut {
	results := make(map[runKey]*runOut, len(keys))
	var mu sync.Mutex
	prog := &simProgress{w: stderr, quiet: o.quiet, last: time.Now()}
	work := make(chan runKey)
	var wg sync.WaitGroup
	for w := 0; w < o.parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				ro := runOne(ctx, o, k, trace, prog)
				mu.Lock()
				results[k] = ro
				mu.Unlock()
			}
		}()
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	return results
}

// runOne simulates one policy on one rate and seed's workload.
func runOne(ctx context.Context, o *simulateOptions, k runKey, trace *workload.Trace, prog *simProgress) *runOut {
	return runOneWith(ctx, o, k, trace, prog, nil)
}

// runOneWith is runOne with liars (sim.Config.Adversaries).
func runOneWith(ctx context.Context, o *simulateOptions, k runKey, trace *workload.Trace, prog *simProgress, advs []sim.Adversary) *runOut {
	pol, err := policy.New(k.policy, policy.Options{Seed: int64(k.seed), RestartSeconds: o.restartSeconds})
	if err != nil {
		return &runOut{err: err}
	}
	var src workload.Source
	if trace != nil {
		src = &workload.SliceSource{Jobs: trace.Jobs}
	} else {
		src = workload.NewGenerator(workload.GenConfig{Rate: k.rate, Seed: k.seed, MultiGPU: o.multiGPU, Jobs: o.jobs, Burst: o.burst,
			Stream: o.stream, Table: o.table})
	}
	engine := allocator.DefaultConfig()
	engine.GapTolerance = o.gapTolerance
	cfg := sim.Config{Engine: &engine, Cluster: o.cluster, HostGPUs: o.hostGPUs, RoundSeconds: o.roundSeconds, RestartSeconds: o.restartSeconds, MinRoundGapSeconds: o.minRoundGap.Seconds(),
		Window: o.window, MaxRounds: o.maxRounds, MaxSimSeconds: o.maxSimTime.Seconds(), ProgressEvery: 500, KeepRecords: o.records,
		Learn: o.learn && k.policy != o.reference, Adversaries: advs}
	if o.tenantPerJob {
		cfg.TenantOf, cfg.TenantShares = sim.TenantPerJob, &loop.TenantShares{By: loop.TenantByNamespace}
	}
	if !o.quiet {
		cfg.Progress = func(p sim.Progress) { prog.round(k, p) }
	}
	t0 := time.Now()
	lg, err := sim.Run(ctx, pol, src, cfg)
	ro := &runOut{log: lg, err: err, wall: time.Since(t0)}
	prog.done(k, ro)
	return ro
}

// simProgress prints the runs' progress to stderr, at most every 2 s.
type simProgress struct {
	mu    sync.Mutex
	w     io.Writer
	quiet bool
	last  time.Time
}

func (p *simProgress) round(k runKey, s sim.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.last) < 2*time.Second {
		return
	}
	p.last = time.Now()
	win := ""
	if s.Window > 0 {
		win = fmt.Sprintf(", measured %d/%d", s.Measured, s.Window)
	}
	fmt.Fprintf(p.w, "  %s rate %g seed %d: round %d (%.0f h), %d active, %d finished%s\n",
		s.Policy, k.rate, k.seed, s.Round, s.Now/3600, s.Active, s.Finished, win)
}

func (p *simProgress) done(k runKey, ro *runOut) {
	if p.quiet {
		return
	}
	status := "done"
	if ro.err != nil {
		status = "FAILED: " + ro.err.Error()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "%s rate %g seed %d: %s in %.1fs\n", k.policy, k.rate, k.seed, status, ro.wall.Seconds())
}

// analyseAll computes every run's metrics, writes its files and the
// plots, and returns the table's rows and the failed runs.
func analyseAll(o *simulateOptions, names []string, results map[runKey]*runOut, fromTrace bool, stderr io.Writer) ([]tableRow, []string, error) {
	var failed []string
	var rows []tableRow
	for _, r := range o.rates {
		for _, p := range o.policies {
			row := tableRow{Policy: p, Rate: r}
			for _, s := range o.seeds {
				k := runKey{p, r, s}
				ro := results[k]
				if ro.err != nil {
					failed = append(failed, fmt.Sprintf("%s (rate %g, seed %d): %v", p, r, s, ro.err))
					continue
				}
				var ref *sim.Log
				if o.reference != "" {
					if rr := results[runKey{o.reference, r, s}]; rr != nil && rr.err == nil {
						ref = rr.log
					}
				}
				ro.res, ro.sum = metrics.Analyse(ro.log, ref)
				notePolicyStats(stderr, k, ro.sum.PolicyStats)
				row.Runs, row.Seeds = append(row.Runs, ro.sum), append(row.Seeds, s)
				if err := writeRun(o, k, ro); err != nil {
					return nil, nil, err
				}
			}
			if len(row.Runs) > 0 {
				rows = append(rows, row)
			}
		}
		if err := writeRateOutputs(o, r, names[0], results, fromTrace); err != nil {
			return nil, nil, err
		}
	}
	return rows, failed, nil
}

// notePolicyStats reports a policy's non-zero counters (LP fallbacks,
// solver limits), which would otherwise hide in the JSON.
func notePolicyStats(w io.Writer, k runKey, stats map[string]float64) {
	names := make([]string, 0, len(stats))
	for n := range stats {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if v := stats[n]; v > 0 && n != "max_gap" {
			fmt.Fprintf(w, "note: %s rate %g seed %d: %s = %g\n", k.policy, k.rate, k.seed, n, v)
		}
	}
}

// writeRateOutputs draws one rate's plots and writes each seed's workload
// as a replayable trace (not for a trace, which is its own), so that every
// seed's runs can be replayed and checked.
func writeRateOutputs(o *simulateOptions, rate float64, first string, results map[runKey]*runOut, fromTrace bool) error {
	if o.plots {
		for _, s := range o.seeds {
			if err := drawPlots(o, rate, s, results); err != nil {
				return err
			}
		}
	}
	if fromTrace {
		return nil
	}
	models := make([]string, len(o.cluster))
	for k, m := range o.cluster {
		models[k] = m.Name
	}
	for _, seed := range o.seeds {
		ro := results[runKey{first, rate, seed}]
		if ro == nil || ro.err != nil {
			continue
		}
		err := writeFile(filepath.Join(o.out, fmt.Sprintf("workload-r%g-s%d.csv", rate, seed)), func(w io.Writer) error {
			return workload.WriteTrace(w, ro.log.Jobs, models)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// printResults prints the table, or with -json every run's summary.
func printResults(o *simulateOptions, rows []tableRow, stdout io.Writer) error {
	if !o.asJSON {
		fmt.Fprintln(stdout, roundsHeader(o))
		if o.wide {
			writeWideTable(stdout, rows)
		} else {
			writeTable(stdout, rows)
		}
		fmt.Fprintf(stdout, "\nOutputs in %s\n", o.out)
		return nil
	}
	for _, row := range rows {
		for k, s := range row.Runs {
			if err := writeSummaryJSON(stdout, row.Rate, row.Seeds[k], o.restartSeconds, o.gapTolerance, s); err != nil {
				return err
			}
		}
	}
	return nil
}

// roundsHeader says how the runs' rounds were scheduled.
func roundsHeader(o *simulateOptions) string {
	if o.minRoundGap > 0 {
		return fmt.Sprintf("Rounds: the fft-allocator's schedule, every R and early ones at least %s apart\n"+
			"(-min-round-gap %s): an arrival while GPUs are idle, a finish while jobs wait.\n", o.minRoundGap, o.minRoundGap)
	}
	return "Rounds: every R exactly, arrivals wait for the next one, as Gavel's simulator\n" +
		"(-min-round-gap 0s; the fft-allocator runs early rounds, 5s apart by default).\n"
}

func writeFile(path string, f func(io.Writer) error) error {
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	if err := f(fh); err != nil {
		fh.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return fh.Close()
}

// writeRun writes one run's per-job and per-round CSVs and summary JSON.
func writeRun(o *simulateOptions, k runKey, ro *runOut) error {
	if o.records {
		if err := writeFile(filepath.Join(o.out, k.file("records", ".jsonl")), func(w io.Writer) error { return writeRecords(w, ro.log.Records) }); err != nil {
			return err
		}
	}
	if err := writeFile(filepath.Join(o.out, k.file("jobs", ".csv")), func(w io.Writer) error { return writeJobsCSV(w, ro.res) }); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(o.out, k.file("rounds", ".csv")), func(w io.Writer) error { return writeRoundsCSV(w, ro.log.Rounds) }); err != nil {
		return err
	}
	return writeFile(filepath.Join(o.out, k.file("summary", ".json")), func(w io.Writer) error {
		return writeSummaryJSON(w, k.rate, k.seed, o.restartSeconds, o.gapTolerance, ro.sum)
	})
}

// writeRecords writes round records as JSON lines.
func writeRecords(w io.Writer, recs []*loop.RoundRecord) error {
	enc := json.NewEncoder(w)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}
