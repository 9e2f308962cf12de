package sim

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator/policy"
)

// CommandSynopsis is the one-line summary of `fftctl simulate`.
const CommandSynopsis = "Compare scheduling policies by simulation"

// DefaultPolicies run when -policies is not given: FFT and every baseline.
const DefaultPolicies = "fft,fft-rate-w0.25,fft-remaining,fft-sticky,fifo,binpack,las,gavel-las,ftf,gavel-ftf,tiresias,allox,sia"

// CommandHelp is the help text of `fftctl simulate`.
func CommandHelp() string {
	return strings.TrimSpace(`
Usage: fftctl simulate [options]

  Runs several scheduling policies on the same workload and cluster in a
  deterministic discrete-round simulator, prints a side-by-side table
  (averaged over seeds, one block per arrival rate), and writes per-job CSV,
  per-run JSON, the workload as a replayable CSV trace, and plots (JCT CDF,
  finish-time-fairness CDF, utilisation over time; PNG and SVG).

  With no options: 12 V100 + 12 P100 + 12 K80, 300 jobs of Gavel's
  multi-GPU Philly-like generator at 0.6 jobs/hour, seed 0, every policy.
  Ratio columns divide each policy's value by the first policy's at the
  same rate.

Simulate Options:

  -policies=<list>     Comma-separated policy names (default: ` + DefaultPolicies + `).
                       -list prints the registry.
  -cluster=<spec>      GPUs per model, e.g. v100=36,p100=36,k80=36 (default v100=12,p100=12,k80=12).
  -rates=<list>        Arrival rates in jobs/hour to sweep (default 0.6).
  -seeds=<list>        Workload seeds to average over, e.g. 0,1,2 (default 0).
  -jobs=<n>            Jobs to generate; 0 = endless stream, needs -window (default 300).
  -window=<lo:hi>      Measure only jobs lo..hi-1 and stop when they finish
                       (Gavel's continuous mode: -jobs=0 -window=4000:5000).
  -multi-gpu=<bool>    Generator draws 1/2/4/8-GPU jobs (default true).
  -rng=<stream>        Generator's random numbers: ours (default) or gavel, the
                       jobs Gavel's simulator generates for the same seed.
  -trace=<file>        Replay a trace (Gavel .trace, Shockwave .trace or our CSV) instead of generating.
  -skip-bad            Skip bad trace entries with a counted warning instead of failing.
  -big-jobs=<rule>     Jobs with more GPUs than the throughput table: reject, skip or extrapolate (default reject).
  -round-seconds=<s>   Round length for every policy (default: each policy's own; Gavel's 360, FFT's 300).
  -restart-seconds=<s> Time lost when a job changes model or resumes (default 0, as Gavel's simulator);
                       the policies are told it, and fft-rate and the other unit-free FFTs price it.
  -reference=<policy>  Run this policy too, as the denominator of Gavel's FTF (default gavel-isolated; "none" skips).
  -out=<dir>           Output directory (default out/simulate).
  -plots=<bool>        Draw plots (default true).
  -parallel=<n>        Runs at once (default 1).
  -max-rounds=<n>      Stop a run after n rounds (default 10,000,000).
  -json                Print the summaries as JSON instead of the table.
  -quiet               No progress on stderr.
  -list                List the policies and exit.
`)
}

type commandOptions struct {
	policies       []string
	cluster        []ClusterModel
	rates          []float64
	seeds          []uint64
	jobs           int
	window         Window
	multiGPU       bool
	stream         Stream
	trace          string
	skipBad        bool
	big            BigJobs
	roundSeconds   float64
	restartSeconds float64
	reference      string
	out            string
	plots          bool
	parallel       int
	maxRounds      int
	json           bool
	quiet          bool
}

// RunCommand is `fftctl simulate`: it parses args, runs the simulations and
// writes the table to stdout and progress and errors to stderr. It returns
// the exit code: 0 on success, 1 when a run failed, 2 on bad usage.
func RunCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opt, code := parseCommand(args, stdout, stderr)
	if code >= 0 {
		return code
	}
	if err := runCommand(ctx, opt, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 1
	}
	return 0
}

func parseCommand(args []string, stdout, stderr io.Writer) (*commandOptions, int) {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var (
		policies = fs.String("policies", DefaultPolicies, "")
		cluster  = fs.String("cluster", "v100=12,p100=12,k80=12", "")
		rates    = fs.String("rates", "0.6", "")
		seeds    = fs.String("seeds", "0", "")
		window   = fs.String("window", "", "")
		big      = fs.String("big-jobs", "reject", "")
		stream   = fs.String("rng", string(StreamOurs), "")
		list     = fs.Bool("list", false, "")
		o        = &commandOptions{}
	)
	fs.IntVar(&o.jobs, "jobs", 300, "")
	fs.BoolVar(&o.multiGPU, "multi-gpu", true, "")
	fs.StringVar(&o.trace, "trace", "", "")
	fs.BoolVar(&o.skipBad, "skip-bad", false, "")
	fs.Float64Var(&o.roundSeconds, "round-seconds", 0, "")
	fs.Float64Var(&o.restartSeconds, "restart-seconds", 0, "")
	fs.StringVar(&o.reference, "reference", policy.IsolatedName, "")
	fs.StringVar(&o.out, "out", filepath.Join("out", "simulate"), "")
	fs.BoolVar(&o.plots, "plots", true, "")
	fs.IntVar(&o.parallel, "parallel", 1, "")
	fs.IntVar(&o.maxRounds, "max-rounds", 0, "")
	fs.BoolVar(&o.json, "json", false, "")
	fs.BoolVar(&o.quiet, "quiet", false, "")
	usage := func(err error) (*commandOptions, int) {
		fmt.Fprintf(stderr, "Error: %v\n\n%s\n", err, CommandHelp())
		return nil, 2
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stdout, CommandHelp())
			return nil, 0
		}
		return usage(err)
	}
	if fs.NArg() > 0 {
		return usage(fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if *list {
		for _, n := range policy.Names() {
			fmt.Fprintln(stdout, n)
		}
		return nil, 0
	}
	var err error
	for _, p := range splitList(*policies) {
		if _, ok := policy.Builtin[p]; !ok {
			return usage(fmt.Errorf("unknown policy %q (known: %s)", p, strings.Join(policy.Names(), ", ")))
		}
		o.policies = append(o.policies, p)
	}
	if len(o.policies) == 0 {
		return usage(errors.New("-policies is empty"))
	}
	if o.cluster, err = ParseCluster(*cluster); err != nil {
		return usage(err)
	}
	for _, r := range splitList(*rates) {
		v, err := strconv.ParseFloat(r, 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return usage(fmt.Errorf("-rates: %q is not a rate > 0", r))
		}
		o.rates = append(o.rates, v)
	}
	for _, s := range splitList(*seeds) {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return usage(fmt.Errorf("-seeds: %q is not a seed (non-negative integer)", s))
		}
		o.seeds = append(o.seeds, v)
	}
	if len(o.seeds) == 0 || (len(o.rates) == 0 && o.trace == "") {
		return usage(errors.New("-seeds and -rates need at least one value"))
	}
	if *window != "" {
		lo, hi, ok := strings.Cut(*window, ":")
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if !ok || err1 != nil || err2 != nil || a < 0 || b <= a {
			return usage(fmt.Errorf("-window: %q is not lo:hi with 0 <= lo < hi", *window))
		}
		o.window = Window{a, b}
	}
	if o.jobs < 0 || (o.jobs == 0 && o.window.Hi == 0 && o.trace == "") {
		return usage(errors.New("-jobs=0 (an endless stream) needs -window"))
	}
	if o.big, err = ParseBigJobs(*big); err != nil {
		return usage(err)
	}
	if o.stream, err = ParseStream(*stream); err != nil {
		return usage(err)
	}
	if o.roundSeconds < 0 || o.restartSeconds < 0 || o.parallel < 1 || o.maxRounds < 0 {
		return usage(errors.New("-round-seconds, -restart-seconds and -max-rounds must be >= 0, -parallel >= 1"))
	}
	if o.reference == "none" {
		o.reference = ""
	} else if _, ok := policy.Builtin[o.reference]; !ok {
		return usage(fmt.Errorf("-reference: unknown policy %q", o.reference))
	}
	if o.trace != "" {
		o.rates = []float64{0}
	}
	return o, -1
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// ParseCluster reads "model=gpus,..." (optionally "model=gpus:memGB").
func ParseCluster(s string) ([]ClusterModel, error) {
	var out []ClusterModel
	seen := map[string]bool{}
	for _, f := range splitList(s) {
		name, count, ok := strings.Cut(f, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("-cluster: %q is not model=gpus", f)
		}
		mem := 0.0
		if c, m, ok := strings.Cut(count, ":"); ok {
			v, err := strconv.ParseFloat(m, 64)
			if err != nil || v < 0 {
				return nil, fmt.Errorf("-cluster: memory %q of %q is not a number of GB", m, name)
			}
			count, mem = c, v
		}
		n, err := strconv.Atoi(count)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-cluster: %q of model %q is not a GPU count >= 1", count, name)
		}
		if seen[name] {
			return nil, fmt.Errorf("-cluster: model %q listed twice", name)
		}
		seen[name] = true
		out = append(out, ClusterModel{Name: name, GPUs: n, MemoryGB: mem})
	}
	if len(out) == 0 {
		return nil, errors.New("-cluster is empty")
	}
	return out, nil
}

// runKey names one simulation.
type runKey struct {
	policy string
	rate   float64
	seed   uint64
}

func (k runKey) file(prefix, ext string) string {
	return fmt.Sprintf("%s-%s-r%g-s%d%s", prefix, k.policy, k.rate, k.seed, ext)
}

type runOut struct {
	log  *Log
	res  []JobResult
	sum  Summary
	err  error
	wall time.Duration
}

func runCommand(ctx context.Context, o *commandOptions, stdout, stderr io.Writer) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("creating output directory: %w", err)
	}
	var trace *Trace
	if o.trace != "" {
		t, err := LoadTrace(o.trace, TraceOptions{Cluster: o.cluster, Skip: o.skipBad, Big: o.big})
		if err != nil {
			return fmt.Errorf("loading trace: %w", err)
		}
		if t.Skipped > 0 {
			fmt.Fprintf(stderr, "warning: %d trace entries skipped; first ones:\n", t.Skipped)
			for _, w := range t.Warnings {
				fmt.Fprintf(stderr, "  %s\n", w)
			}
		}
		if len(t.Jobs) == 0 {
			return fmt.Errorf("trace %q has no usable jobs", o.trace)
		}
		trace = t
	}
	source := func(rate float64, seed uint64) Source {
		if trace != nil {
			return &SliceSource{Jobs: trace.Jobs}
		}
		return NewGenerator(GenConfig{Rate: rate, Seed: seed, MultiGPU: o.multiGPU, Jobs: o.jobs, Stream: o.stream})
	}
	names := o.policies
	if o.reference != "" {
		names = append([]string{o.reference}, names...)
	}
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
	results := make(map[runKey]*runOut, len(keys))
	var mu sync.Mutex
	var progMu sync.Mutex
	lastPrint := time.Now()
	work := make(chan runKey)
	var wg sync.WaitGroup
	for w := 0; w < o.parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				pol, _ := policy.New(k.policy, policy.Options{Seed: int64(k.seed), RestartSeconds: o.restartSeconds})
				cfg := Config{Cluster: o.cluster, RoundSeconds: o.roundSeconds, RestartSeconds: o.restartSeconds,
					Window: o.window, MaxRounds: o.maxRounds, ProgressEvery: 500}
				if !o.quiet {
					cfg.Progress = func(p Progress) {
						progMu.Lock()
						defer progMu.Unlock()
						if time.Since(lastPrint) < 2*time.Second {
							return
						}
						lastPrint = time.Now()
						win := ""
						if p.Window > 0 {
							win = fmt.Sprintf(", measured %d/%d", p.Measured, p.Window)
						}
						fmt.Fprintf(stderr, "  %s rate %g seed %d: round %d (%.0f h), %d active, %d finished%s\n",
							p.Policy, k.rate, k.seed, p.Round, p.Now/3600, p.Active, p.Finished, win)
					}
				}
				t0 := time.Now()
				lg, err := Run(ctx, pol, source(k.rate, k.seed), cfg)
				ro := &runOut{log: lg, err: err, wall: time.Since(t0)}
				if f, ok := pol.(*policy.FFT); ok && err != nil && f.LastInstance != nil {
					// Keep the round that failed, for `fftctl round` and the solver's tests.
					path := filepath.Join(o.out, k.file("failed-instance", ".json"))
					if b, jerr := json.MarshalIndent(f.LastInstance, "", " "); jerr == nil && os.WriteFile(path, b, 0o644) == nil {
						ro.err = fmt.Errorf("%w (instance saved to %s)", err, path)
					}
				}
				mu.Lock()
				results[k] = ro
				mu.Unlock()
				if !o.quiet {
					status := "done"
					if err != nil {
						status = "FAILED: " + err.Error()
					}
					progMu.Lock()
					fmt.Fprintf(stderr, "%s rate %g seed %d: %s in %.1fs\n", k.policy, k.rate, k.seed, status, ro.wall.Seconds())
					progMu.Unlock()
				}
			}
		}()
	}
	// Reference runs first so that analysis can use them; order is fixed.
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()

	var failed []string
	var rows []Row
	for _, r := range o.rates {
		for _, p := range o.policies {
			row := Row{Policy: p, Rate: r}
			for _, s := range o.seeds {
				k := runKey{p, r, s}
				ro := results[k]
				if ro.err != nil {
					failed = append(failed, fmt.Sprintf("%s (rate %g, seed %d): %v", p, r, s, ro.err))
					continue
				}
				var ref *Log
				if o.reference != "" {
					if rr := results[runKey{o.reference, r, s}]; rr != nil && rr.err == nil {
						ref = rr.log
					}
				}
				ro.res, ro.sum = Analyse(ro.log, ref)
				for _, name := range sortedKeys(ro.sum.PolicyStats) {
					if v := ro.sum.PolicyStats[name]; v > 0 && name != "max_gap" {
						fmt.Fprintf(stderr, "note: %s rate %g seed %d: %s = %g\n", p, r, s, name, v)
					}
				}
				row.Runs = append(row.Runs, ro.sum)
				if err := writeRun(o, k, ro); err != nil {
					return err
				}
			}
			if len(row.Runs) > 0 {
				rows = append(rows, row)
			}
		}
		if o.plots {
			for _, s := range o.seeds {
				if err := drawPlots(o, r, s, results); err != nil {
					return err
				}
			}
		}
		if trace == nil {
			if ro := results[runKey{names[0], r, o.seeds[0]}]; ro != nil && ro.err == nil {
				if err := writeFile(filepath.Join(o.out, fmt.Sprintf("workload-r%g-s%d.csv", r, o.seeds[0])), func(w io.Writer) error {
					return WriteTrace(w, ro.log.Jobs, modelNames(o.cluster))
				}); err != nil {
					return err
				}
			}
		}
	}
	if o.json {
		for _, row := range rows {
			for k, s := range row.Runs {
				if err := WriteSummaryJSON(stdout, row.Rate, o.seeds[min(k, len(o.seeds)-1)], s); err != nil {
					return err
				}
			}
		}
	} else {
		WriteTable(stdout, rows)
		fmt.Fprintf(stdout, "\nOutputs in %s\n", o.out)
	}
	if len(failed) > 0 {
		sort.Strings(failed)
		return fmt.Errorf("%d run(s) failed:\n  %s", len(failed), strings.Join(failed, "\n  "))
	}
	return nil
}

func modelNames(c []ClusterModel) []string {
	out := make([]string, len(c))
	for k, m := range c {
		out[k] = m.Name
	}
	return out
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

func writeRun(o *commandOptions, k runKey, ro *runOut) error {
	if err := writeFile(filepath.Join(o.out, k.file("jobs", ".csv")), func(w io.Writer) error { return WriteJobsCSV(w, ro.res) }); err != nil {
		return err
	}
	return writeFile(filepath.Join(o.out, k.file("summary", ".json")), func(w io.Writer) error {
		return WriteSummaryJSON(w, k.rate, k.seed, ro.sum)
	})
}

func drawPlots(o *commandOptions, rate float64, seed uint64, results map[runKey]*runOut) error {
	var jct, ftf, util []Series
	for _, p := range o.policies {
		ro := results[runKey{p, rate, seed}]
		if ro == nil || ro.err != nil || ro.res == nil {
			continue
		}
		var j, f []float64
		for _, r := range ro.res {
			if r.Measured && r.Finished {
				j = append(j, r.JCT/3600)
				f = append(f, r.FTF)
			}
		}
		jct = append(jct, Series{p, CDF(j, 2000)})
		ftf = append(ftf, Series{p, CDF(f, 2000)})
		util = append(util, Series{p, UtilisationSeries(ro.log, 1000)})
	}
	tag := fmt.Sprintf("r%g-s%d", rate, seed)
	if err := SavePlot(filepath.Join(o.out, "jct-cdf-"+tag), "JCT CDF ("+tag+")", "JCT (hours, log scale)", "fraction of jobs", true, jct); err != nil {
		return err
	}
	if err := SavePlot(filepath.Join(o.out, "ftf-cdf-"+tag), "Finish-time fairness CDF ("+tag+")", "rho = T_shared / T_isolated (log scale)", "fraction of jobs", true, ftf); err != nil {
		return err
	}
	return SavePlot(filepath.Join(o.out, "utilisation-"+tag), "GPU utilisation ("+tag+")", "time (hours)", "busy / available GPU time", false, util)
}

func sortedKeys(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
