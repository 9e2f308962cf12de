package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/cli"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/policy"
	"github.com/nomad-fft/nomad-fft/allocator/sim"
	"github.com/nomad-fft/nomad-fft/allocator/solver"
	"github.com/nomad-fft/nomad-fft/allocator/workload"
)

// defaultSimMinRoundGap is the fft-allocator's own default, so that a run
// without flags simulates the schedule the shipped service keeps.
const defaultSimMinRoundGap = 5 * time.Second

// defaultSimPolicies run when -policies is not given: the paper's FFT, four
// of our variants and every baseline but fifo-perf (14 of the registry's
// policies; -list names them all).
const defaultSimPolicies = "fft,fft-rate-w0.25,fft-rate,fft-remaining,fft-sticky,fifo,binpack,las,gavel-las,ftf,gavel-ftf,tiresias,allox,sia"

// SimulateCommand compares scheduling policies in the simulator
// (allocator/sim). It writes to the raw streams: progress goes to stderr
// while the runs go on, and the tables can be long.
type SimulateCommand struct {
	Meta
	flags simulateFlags
}

var _ cli.Command = &SimulateCommand{}

// simulateFlags are the flags as given; check turns them into a
// simulateOptions.
type simulateFlags struct {
	policies, cluster, rates, seeds, window, bigJobs, rng, trace, reference, out string
	throughputs                                                                  string
	jobs, burst, parallel, maxRounds                                             int
	roundSeconds, restartSeconds, gapTolerance                                   float64
	minRoundGap, maxSimTime                                                      time.Duration
	multiGPU, skipBad, plots, asJSON, wide, quiet, list, records, learn          bool
	adversaries                                                                  string
	tenantPerJob                                                                 bool
}

// simulateOptions is one checked `fftctl simulate` invocation.
type simulateOptions struct {
	policies       []string
	cluster        []allocator.Model
	hostGPUs       map[string]int
	rates          []float64
	seeds          []uint64
	jobs           int
	burst          int
	table          *workload.Throughputs
	window         sim.Window
	multiGPU       bool
	stream         workload.Stream
	trace          string
	skipBad        bool
	big            workload.BigJobs
	roundSeconds   float64
	restartSeconds float64
	// minRoundGap is the live schedule's least gap between round starts
	// (sim.Config.MinRoundGapSeconds); 0 runs fixed rounds.
	minRoundGap time.Duration
	// reference is the run FTF gavel divides by ("" for none).
	reference string
	out       string
	plots     bool
	parallel  int
	maxRounds int
	// gapTolerance is the solver's relative gap tolerance in every round
	// the exact solver decides, FFT's and sia's (allocator.Config.GapTolerance;
	// 0 proves optimality).
	gapTolerance float64
	// maxSimTime stops each run at this simulated time (0: none).
	maxSimTime time.Duration
	asJSON     bool
	wide       bool
	quiet      bool
	// records writes every round's full record, as the allocator's audit
	// log holds it.
	records bool
	// learn hides the jobs' throughputs from the policies (sim.Config.Learn).
	learn bool
	// adversaries, when given, run each policy, rate and seed twice,
	// honest and with these liars, and compare (simulate_adversary.go);
	// tenantPerJob makes every job its own tenant in both runs.
	adversaries  []sim.Adversary
	tenantPerJob bool
}

func (c *SimulateCommand) Synopsis() string { return "Compare scheduling policies by simulation" }

func (c *SimulateCommand) Help() string {
	return helpText("simulate [options]", fmt.Sprintf(`
Runs scheduling policies on the same workload and cluster in a
deterministic discrete-round simulator that drives the fft-allocator's own
round loop, and prints a table per arrival rate, averaged over the seeds.
It writes per-job CSV, per-run JSON, the workload as a replayable CSV
trace, and plots (JCT CDF, finish-time-fairness CDF, utilisation over
time; PNG and SVG) to -out.

With no options: 12 V100 + 12 P100 + 12 K80, 300 jobs of Gavel's
multi-GPU Philly-like generator at 0.6 jobs/hour, seed 0, the %d policies
of -policies' default (-list has them all), on the fft-allocator's own
schedule (-min-round-gap 5s; 0s for Gavel's fixed rounds). The ratio
columns divide each policy's value by the first policy's at the same rate.
-wide prints every metric; -json every run's full summary.
`, len(splitList(defaultSimPolicies))), 0, "Simulate", c.ownFlags)
}

func (c *SimulateCommand) ownFlags(fs *flag.FlagSet) {
	f := &c.flags
	// The default is spelled out in the text, with spaces, so that the
	// help wraps it; an empty -policies is the default.
	fs.StringVar(&f.policies, "policies", "", "Comma-separated `list` of policies to run; -list prints them. Defaults to "+
		strings.Join(splitList(defaultSimPolicies), ", ")+".")
	fs.StringVar(&f.cluster, "cluster", "v100=12,p100=12,k80=12",
		"GPUs per model, a `spec` model=gpus[:memGB] or model=HOSTSxGPUS[:memGB] (hosts of GPUs each),..., for example v100=36,p100=36,k80=36 or v100=3x4,p100=3x4,k80=3x4. A model given as gpus is one host. Each policy is placed on hosts as its own system places jobs (gavel-* and Gavel's other policies: Gavel's, sia: Sia's, the rest: the paper's Placer), and a job spread over hosts runs at Gavel's unconsolidated rate.")
	fs.StringVar(&f.rates, "rates", "0.6", "Comma-separated arrival `rates` in jobs/hour to sweep.")
	fs.StringVar(&f.seeds, "seeds", "0", "Comma-separated workload `seeds` to average over, for example 0,1,2. Defaults to 0.")
	fs.IntVar(&f.jobs, "jobs", 300, "Jobs to generate; 0 is an endless stream and needs -window.")
	fs.IntVar(&f.burst, "burst", 0, "The first `n` generated jobs all arrive at time 0; the stream at -rates follows.")
	fs.StringVar(&f.throughputs, "throughputs", workload.TableGavel,
		"The throughput `table` jobs run at: gavel (Gavel's measured V100, P100, K80) or gavel-8 (those and five synthetic models derived from them, allocator/workload/README.md).")
	fs.StringVar(&f.window, "window", "",
		"Measure only jobs lo..hi-1, as `lo:hi`, and stop when they finish (Gavel's continuous mode: -jobs=0 -window=4000:5000).")
	fs.BoolVar(&f.multiGPU, "multi-gpu", true, "Let the generator draw 1/2/4/8-GPU jobs.")
	fs.StringVar(&f.rng, "rng", string(workload.StreamOurs),
		"The generator's random `stream`: ours, or gavel for the jobs Gavel's simulator generates for the same seed.")
	fs.StringVar(&f.trace, "trace", "", "Replay a trace `file` (Gavel .trace, Shockwave .trace or our CSV) instead of generating.")
	fs.BoolVar(&f.skipBad, "skip-bad", false, "Skip bad trace entries with a counted warning instead of failing.")
	fs.StringVar(&f.bigJobs, "big-jobs", "reject",
		"What to do with trace jobs with more GPUs than the throughput table: reject, skip or extrapolate (the `rule`).")
	fs.Float64Var(&f.roundSeconds, "round-seconds", 0,
		"Round length for every policy, in `seconds`; 0 uses each policy's own (Gavel's 360, FFT's 300).")
	fs.Float64Var(&f.restartSeconds, "restart-seconds", 0,
		"Time in `seconds` lost when a job changes model or resumes; 0 as Gavel's simulator.")
	fs.DurationVar(&f.minRoundGap, "min-round-gap", defaultSimMinRoundGap,
		"Run the rounds on the fft-allocator's schedule: a round every R and an early one, at least this `duration` after the last start, "+
			"when a job arrives while GPUs are idle or finishes while jobs wait (the allocator's -min-round-gap, same default). "+
			"0s runs a round every R exactly, arrivals waiting for the next one, as Gavel's simulator.")
	fs.StringVar(&f.reference, "reference", policy.IsolatedName,
		"Also run this `policy`, as the denominator of Gavel's FTF; none skips it.")
	fs.StringVar(&f.out, "out", filepath.Join("out", "simulate"), "Output `directory`.")
	fs.BoolVar(&f.plots, "plots", true, "Draw plots.")
	fs.IntVar(&f.parallel, "parallel", 1, "Runs at once.")
	fs.IntVar(&f.maxRounds, "max-rounds", 0, "Stop a run after this many rounds; 0 is 10,000,000.")
	fs.Float64Var(&f.gapTolerance, "gap-tolerance", 0,
		"Let the exact solver (the FFT policies' and sia's) stop each round once its answer is proven within this relative `gap` of the optimum, for example 1e-4 (the fft-allocator's engine gap_tolerance); 0 proves every round optimal.")
	fs.DurationVar(&f.maxSimTime, "max-sim-time", 0,
		"Stop a run once this much simulated `time` has passed, for example 1000h, counting the jobs left as unfinished (a policy that never finishes some jobs then still ends); 0 runs until the jobs are done.")
	fs.BoolVar(&f.wide, "wide", false, "Print every metric of the table (24 columns) instead of the main ones.")
	fs.BoolVar(&f.asJSON, "json", false, "Print every run's summary as JSON instead of the table.")
	fs.BoolVar(&f.quiet, "quiet", false, "Print no progress on stderr.")
	fs.BoolVar(&f.learn, "learn", false, "Jobs declare no throughput: the allocator measures and estimates them online, and every policy sees only its values (the -reference run keeps the true rates).")
	fs.BoolVar(&f.records, "records", false, "Write every round's record, each job's cost terms included, as the fft-allocator's audit log holds it, to records-<policy>-r<rate>-s<seed>.jsonl in -out (one JSON object a line; slow on long runs).")
	fs.StringVar(&f.adversaries, "adversaries", "",
		"Comma-separated `KIND:FRACTION` list: that fraction of the jobs lies, one kind each ("+strings.Join(adversaryKindNames(), ", ")+
			"). Each policy, rate and seed runs twice, honest and with the liars, and the table compares each liar's JCT and GPU time with the same job honest, and the honest jobs' mean JCT with and without liars.")
	fs.BoolVar(&f.tenantPerJob, "tenant-per-job", false, "Tenant shares with every job its own tenant (equal shares: the paper's per-job reference), and a split job's parts one tenant.")
	fs.BoolVar(&f.list, "list", false, "List the policies with a description and exit.")
}

func (c *SimulateCommand) Run(args []string) int {
	if _, ok := c.parse(c, "simulate", 0, c.ownFlags, args); !ok {
		return 1
	}
	if c.flags.list {
		c.listPolicies()
		return 0
	}
	o, err := c.flags.check()
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error: %v\n\n%s", err, c.Help()))
		return 1
	}
	// Ctrl-C stops the runs between rounds.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := runSimulations(ctx, o, c.Stdout, c.Stderr); err != nil {
		return c.fail("Error: %v", err)
	}
	return 0
}

// listPolicies prints the registry: each name, (default) on the
// allocator's, and its description.
func (c *SimulateCommand) listPolicies() {
	tw := tabwriter.NewWriter(c.Stdout, 0, 0, 2, ' ', 0)
	for _, n := range policy.Names() {
		name := n
		if n == policy.DefaultName {
			name += " (default)"
		}
		fmt.Fprintf(tw, "%s\t%s\n", name, policy.Describe(n))
	}
	tw.Flush()
}

// check validates the flags; errors name the flag and what it wants.
func (f *simulateFlags) check() (*simulateOptions, error) {
	o := &simulateOptions{jobs: f.jobs, burst: f.burst, multiGPU: f.multiGPU, trace: f.trace, skipBad: f.skipBad,
		roundSeconds: f.roundSeconds, restartSeconds: f.restartSeconds, minRoundGap: f.minRoundGap, reference: f.reference, out: f.out,
		plots: f.plots, parallel: f.parallel, maxRounds: f.maxRounds, gapTolerance: f.gapTolerance, maxSimTime: f.maxSimTime, asJSON: f.asJSON, wide: f.wide, quiet: f.quiet, records: f.records, learn: f.learn, tenantPerJob: f.tenantPerJob}
	var err error
	policies := f.policies
	if policies == "" {
		policies = defaultSimPolicies
	}
	if o.policies, err = parsePolicies(policies); err != nil {
		return nil, err
	}
	if o.cluster, o.hostGPUs, err = parseCluster(f.cluster); err != nil {
		return nil, err
	}
	if o.table, err = workload.ThroughputTable(f.throughputs); err != nil {
		return nil, fmt.Errorf("-throughputs: %w", err)
	}
	if err := checkClusterModels(o.cluster, o.table, f.throughputs, f.trace != ""); err != nil {
		return nil, err
	}
	if o.rates, err = parseRates(f.rates); err != nil {
		return nil, err
	}
	for _, s := range splitList(f.seeds) {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("-seeds: %q is not a seed (non-negative integer)", s)
		}
		o.seeds = append(o.seeds, v)
	}
	if len(o.seeds) == 0 || (len(o.rates) == 0 && o.trace == "") {
		return nil, errors.New("-seeds and -rates need at least one value")
	}
	if o.window, err = parseWindow(f.window); err != nil {
		return nil, err
	}
	if o.jobs < 0 || (o.jobs == 0 && o.window.Hi == 0 && o.trace == "") {
		return nil, errors.New("-jobs=0 (an endless stream) needs -window")
	}
	if f.adversaries != "" {
		if o.adversaries, err = sim.ParseAdversaries(f.adversaries); err != nil {
			return nil, fmt.Errorf("-adversaries: %w", err)
		}
		for _, a := range o.adversaries {
			if f.learn && (a.Kind == sim.AdvOverReport || a.Kind == sim.AdvInflate) {
				// Their reports stop growing, so they are never measured and
				// the loop holds them (profile.go, maxProfileRounds): they
				// never finish, and neither does the run.
				return nil, fmt.Errorf("-adversaries %s with -learn: the liars' reports stop growing after one round, so they are never measured and are held for good (they gain nothing, but the run cannot end); use poison or split with -learn", a.Kind)
			}
		}
	}
	if o.big, err = workload.ParseBigJobs(f.bigJobs); err != nil {
		return nil, fmt.Errorf("-big-jobs: %w", err)
	}
	if o.stream, err = workload.ParseStream(f.rng); err != nil {
		return nil, fmt.Errorf("-rng: %w", err)
	}
	if err := checkCounts(o); err != nil {
		return nil, err
	}
	if !solver.ValidGapTolerance(o.gapTolerance) {
		return nil, fmt.Errorf("-gap-tolerance=%g: want a relative gap in [0, 1), for example 1e-4 (0 proves every round optimal)", o.gapTolerance)
	}
	if o.maxSimTime < 0 {
		return nil, fmt.Errorf("-max-sim-time=%s: want 0s (no limit) or more, for example 1000h", o.maxSimTime)
	}
	if o.minRoundGap < 0 {
		return nil, fmt.Errorf("-min-round-gap=%s: want 0s (fixed rounds) or more", o.minRoundGap)
	}
	if o.reference == "none" {
		o.reference = ""
	} else if _, ok := policy.Builtin[o.reference]; !ok {
		return nil, fmt.Errorf("-reference: unknown policy %q (known: %s, or none)", o.reference, strings.Join(policy.Names(), ", "))
	}
	if o.trace != "" {
		o.rates = []float64{0}
	}
	return o, nil
}

func parsePolicies(s string) ([]string, error) {
	var out []string
	for _, p := range splitList(s) {
		if _, ok := policy.Builtin[p]; !ok {
			return nil, fmt.Errorf("-policies: unknown policy %q (known: %s)", p, strings.Join(policy.Names(), ", "))
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-policies: %q names no policy (-list prints them)", s)
	}
	return out, nil
}

func parseRates(s string) ([]float64, error) {
	var out []float64
	for _, r := range splitList(s) {
		v, err := strconv.ParseFloat(r, 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("-rates: %q is not a rate > 0", r)
		}
		out = append(out, v)
	}
	return out, nil
}

// parseWindow reads "lo:hi" ("" is no window).
func parseWindow(s string) (sim.Window, error) {
	if s == "" {
		return sim.Window{}, nil
	}
	lo, hi, ok := strings.Cut(s, ":")
	a, err1 := strconv.Atoi(lo)
	b, err2 := strconv.Atoi(hi)
	if !ok || err1 != nil || err2 != nil || a < 0 || b <= a {
		return sim.Window{}, fmt.Errorf("-window: %q is not lo:hi with 0 <= lo < hi", s)
	}
	return sim.Window{Lo: a, Hi: b}, nil
}

// checkCounts checks the numeric flags with bounds of their own, naming the flag; the times'
// ranges are the engine's.
func checkCounts(o *simulateOptions) error {
	switch {
	case o.roundSeconds != 0 && !allocator.ValidRoundSeconds(o.roundSeconds):
		return fmt.Errorf("-round-seconds=%g: want 0 (each policy's own) or a round length in [%g, %g] seconds", o.roundSeconds, allocator.MinRoundSeconds, allocator.MaxRoundSeconds)
	case !allocator.ValidRestartSeconds(o.restartSeconds):
		return fmt.Errorf("-restart-seconds=%g: want a number of seconds in [0, %g]", o.restartSeconds, allocator.MaxRestartSeconds)
	case o.maxRounds < 0:
		return fmt.Errorf("-max-rounds=%d: want 0 (10,000,000) or more", o.maxRounds)
	case o.burst < 0:
		return fmt.Errorf("-burst=%d: want 0 (no burst) or more", o.burst)
	case o.parallel < 1:
		return fmt.Errorf("-parallel=%d: want 1 or more", o.parallel)
	}
	return nil
}

// parseCluster reads "model=gpus,..." or "model=HOSTSxGPUS,..." (hosts of
// GPUs each), optionally with ":memGB", and returns the models and the GPUs
// per host of each model given in hosts.
func parseCluster(s string) ([]allocator.Model, map[string]int, error) {
	var out []allocator.Model
	hosts := map[string]int{}
	seen := map[string]bool{}
	for _, f := range splitList(s) {
		name, count, ok := strings.Cut(f, "=")
		if !ok || name == "" {
			return nil, nil, fmt.Errorf("-cluster: %q is not model=gpus or model=HOSTSxGPUS", f)
		}
		mem := 0.0
		if c, m, ok := strings.Cut(count, ":"); ok {
			v, err := strconv.ParseFloat(m, 64)
			if err != nil {
				return nil, nil, fmt.Errorf("-cluster: memory %q of %q is not a number of GB", m, name)
			}
			count, mem = c, v
		}
		n, per := 0, 0
		if h, g, ok := strings.Cut(count, "x"); ok {
			nh, err1 := strconv.Atoi(h)
			ng, err2 := strconv.Atoi(g)
			if err1 != nil || err2 != nil || nh < 1 || ng < 1 || nh > 1<<20 || ng > 1<<10 {
				return nil, nil, fmt.Errorf("-cluster: %q of model %q is not HOSTSxGPUS with both >= 1, for example 3x4 (3 hosts of 4 GPUs)", count, name)
			}
			n, per = nh*ng, ng
		} else {
			v, err := strconv.Atoi(count)
			if err != nil || v < 1 {
				return nil, nil, fmt.Errorf("-cluster: %q of model %q is not a GPU count >= 1 (or HOSTSxGPUS, for example 3x4)", count, name)
			}
			n = v
		}
		if seen[name] {
			return nil, nil, fmt.Errorf("-cluster: model %q listed twice", name)
		}
		seen[name] = true
		m := allocator.Model{Name: name, GPUs: n, MemoryGB: mem}
		if err := m.Validate(); err != nil {
			return nil, nil, fmt.Errorf("-cluster: %w", err)
		}
		out = append(out, m)
		if per > 0 {
			hosts[name] = per
		}
	}
	if len(out) == 0 {
		return nil, nil, errors.New("-cluster is empty: give GPUs per model, for example v100=12,p100=12 (or hosts: v100=3x4)")
	}
	return out, hosts, nil
}

// checkClusterModels rejects a -cluster model the throughput table has no
// column for: its jobs would fit nowhere on it. A trace may name its own
// models (rate:<model> columns), so with -trace the check is left to the
// trace's loader.
func checkClusterModels(cluster []allocator.Model, table *workload.Throughputs, name string, trace bool) error {
	if trace {
		return nil
	}
	for _, m := range cluster {
		if !table.HasModel(m.Name) {
			hint := ""
			if name != workload.TableGavel8 && workload.Gavel8Throughputs().HasModel(m.Name) {
				hint = "; -throughputs " + workload.TableGavel8 + " has it"
			}
			return fmt.Errorf("-cluster: model %q is not in the -throughputs %s table (its models: %s)%s",
				m.Name, name, strings.Join(table.Models, ", "), hint)
		}
	}
	return nil
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
