package command

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/cli"
	"gonum.org/v1/gonum/stat"

	"github.com/nomad-fft/nomad-fft/allocator/sim"
	"github.com/nomad-fft/nomad-fft/allocator/solver"
)

// TabulateCommand reads back what `fftctl simulate -out` wrote and prints
// one Markdown row per run, so that long runs (HEADLINE.md's "Runs to
// completion") are reported from their files, not retyped.
type TabulateCommand struct {
	Meta
}

var _ cli.Command = &TabulateCommand{}

func (c *TabulateCommand) Synopsis() string { return "Tabulate saved simulate runs as Markdown" }

func (c *TabulateCommand) Help() string {
	return helpText("tabulate DIR...", `
Reads every summary-<policy>-r<rate>-s<seed>.json that fftctl simulate
wrote to each DIR (its -out), with the rounds-*.csv beside it, and prints a
Markdown table: one row per run (policy, seed, restart cost, wall time,
rounds, measured jobs finished, mean and p50 JCT, mean and max FTF, the
share of jobs with FTF > 1, preemptions and switches per finished job,
solve p50/p99/max, rounds not proven optimal with their largest gap, and
the slowest round with its jobs), then, for each policy, rate and restart
cost with several runs, their mean ± sample standard deviation (for the
gap, the largest; a seed that comes twice in one group gets no mean, as do
summaries written before they recorded their restart cost). Rounds not
proven are counted over the rounds file; without one, the policy's own
counts are shown, which also count the placement stage's re-decides. A run
with a gap tolerance (simulate -gap-tolerance) is named so, and its rounds
proven within the tolerance count as proven; its max gap is still the
largest of any round not proven optimal. A run stopped early (Ctrl-C,
-max-rounds, -max-sim-time) says so.
`, 0, "", nil)
}

func (c *TabulateCommand) Run(args []string) int {
	fs := c.FlagSet("tabulate")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if fs.NArg() == 0 {
		c.Ui.Error("This command takes at least one argument: DIR\n\n" + c.Help())
		return 1
	}
	var runs []savedRun
	for _, dir := range fs.Args() {
		r, err := readSavedRuns(dir)
		if err != nil {
			return c.fail("Error reading the runs in %s: %v", dir, err)
		}
		runs = append(runs, r...)
	}
	writeRunsMarkdown(c.Stdout, runs)
	return 0
}

// savedRun is one run as simulate saved it: its summary, and what its
// rounds file adds.
type savedRun struct {
	jsonSummary
	// Slowest is the round with the longest solve; HaveRounds says whether
	// a rounds file was found. Unproven counts its rounds whose decision
	// was not proven optimal, or within the run's gap tolerance when it had
	// one, and Gap is the largest gap of a round not proven optimal.
	Slowest    sim.RoundStats
	HaveRounds bool
	Unproven   int
	Gap        float64
}

// readSavedRuns reads every summary-*.json of dir, in name order, with
// its rounds-*.csv when there is one.
func readSavedRuns(dir string) ([]savedRun, error) {
	names, err := filepath.Glob(filepath.Join(dir, "summary-*.json"))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, errors.New("no summary-*.json (is it a fftctl simulate -out directory?)")
	}
	sort.Strings(names)
	runs := make([]savedRun, 0, len(names))
	for _, name := range names {
		var r savedRun
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &r.jsonSummary); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		rounds := filepath.Join(dir, "rounds-"+strings.TrimPrefix(filepath.Base(name), "summary-"))
		rounds = strings.TrimSuffix(rounds, ".json") + ".csv"
		f, err := os.Open(rounds)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, err
		default:
			rs, err := readRoundsCSV(f)
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", rounds, err)
			}
			r.Slowest, r.HaveRounds = slowestRound(rs)
			r.Unproven, r.Gap = unproven(rs, r.GapTolerance)
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// readRoundsCSV reads what writeRoundsCSV wrote.
func readRoundsCSV(r io.Reader) ([]sim.RoundStats, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, errors.New("empty file")
	}
	col := map[string]int{}
	for k, h := range rows[0] {
		col[h] = k
	}
	for _, h := range []string{"round", "active", "solve_s", "status"} {
		if _, ok := col[h]; !ok {
			return nil, fmt.Errorf("no %q column", h)
		}
	}
	// Columns added later (wall_s ... nodes) may be missing from older
	// files: they read as zero.
	out := make([]sim.RoundStats, len(rows)-1)
	for n, row := range rows[1:] {
		var errs []error
		for _, c := range roundColumns {
			if k, ok := col[c.name]; ok && k < len(row) && row[k] != "" {
				if err := c.read(&out[n], row[k]); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
				}
			}
		}
		if len(errs) > 0 {
			return nil, fmt.Errorf("line %d: %w", n+2, errors.Join(errs...))
		}
	}
	return out, nil
}

// slowestRound is the round with the longest solve, the first of equals.
func slowestRound(rounds []sim.RoundStats) (sim.RoundStats, bool) {
	if len(rounds) == 0 {
		return sim.RoundStats{}, false
	}
	best := rounds[0]
	for _, r := range rounds[1:] {
		if r.Solve > best.Solve {
			best = r
		}
	}
	return best, true
}

// runColumns are the table's columns after policy and seed: each a value
// of a run (NaN where it has none), how it prints, and whether the mean
// row shows the largest value instead of a mean.
var runColumns = []struct {
	head    string
	value   func(*savedRun) float64
	show    func(float64) string
	largest bool
}{
	{"wall", func(r *savedRun) float64 { return r.Wall.Seconds() }, minSec, false},
	{"rounds", func(r *savedRun) float64 { return float64(r.Rounds) }, count, false},
	{"finished", func(r *savedRun) float64 { return float64(r.Finished) }, count, false},
	{"mean JCT h", func(r *savedRun) float64 { return r.JCT.Mean / 3600 }, fixed(1), false},
	{"p50 JCT h", func(r *savedRun) float64 { return r.JCT.P50 / 3600 }, fixed(1), false},
	{"FTF mean", func(r *savedRun) float64 { return r.FTF.Mean }, fixed(3), false},
	{"FTF max", func(r *savedRun) float64 { return r.FTF.Max }, fixed(2), false},
	{"unfair", func(r *savedRun) float64 { return 100 * r.FTF.Unfair }, percent, false},
	{"preempt/job", func(r *savedRun) float64 { return perJob(preemptions)(&r.Summary) }, fixed(2), false},
	{"switch/job", func(r *savedRun) float64 { return perJob(switches)(&r.Summary) }, fixed(2), false},
	{"solve p50", func(r *savedRun) float64 { return r.Solve.P50 }, seconds, false},
	{"solve p99", func(r *savedRun) float64 { return r.Solve.P99 }, seconds, false},
	{"solve max", func(r *savedRun) float64 { return r.Solve.Max }, seconds, false},
	{"not proven", func(r *savedRun) float64 { return notProven(r, float64(r.Unproven), "rounds_not_optimal") }, count, false},
	{"max gap", func(r *savedRun) float64 { return notProven(r, r.Gap, "max_gap") }, sci, true},
}

// notProven is fromRounds, counted over the rounds file, when there is
// one; else the policy's counter of that name, which also counts the
// placement stage's re-decides within a round. NaN if the policy keeps no
// counter: it does not search, so it has nothing to prove.
func notProven(r *savedRun, fromRounds float64, name string) float64 {
	v, ok := r.PolicyStats[name]
	switch {
	case !ok:
		return math.NaN()
	case r.HaveRounds:
		return fromRounds
	}
	return v
}

// unproven counts the rounds whose decision a search stopped before
// proving it optimal, and their largest gap.
func unproven(rounds []sim.RoundStats, gapTolerance float64) (int, float64) {
	n, gap := 0, 0.0
	for _, r := range rounds {
		if r.Status != "" && r.Status != "optimal" {
			// The rounds file keeps 6 digits of a gap.
			if !solver.WithinGapTolerance(r.Gap, gapTolerance*(1+1e-5)) {
				n++
			}
			gap = max(gap, r.Gap)
		}
	}
	return n, gap
}

// writeRunsMarkdown prints the runs, then a mean ± sd row for each policy
// and rate with several runs (the largest of the max gaps). A negative value is one the summary could
// not compute (writeSummaryJSON writes NaN as -1) and prints as "-".
func writeRunsMarkdown(w io.Writer, runs []savedRun) {
	head := []string{"policy", "seed", "restart"}
	for _, c := range runColumns {
		head = append(head, c.head)
	}
	head = append(head, "slowest round (jobs)")
	line := func(cells []string) { fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | ")) }
	line(head)
	line(strings.Split(strings.Repeat("---,", len(head)-1)+"---", ","))
	type key struct {
		policy  string
		rate    float64
		restart float64 // -1: not recorded
		gapTol  float64
	}
	var order []key
	groups := map[key][]*savedRun{}
	for k := range runs {
		r := &runs[k]
		restart := -1.0
		if r.RestartSeconds != nil {
			restart = *r.RestartSeconds
		}
		cells := []string{policyCell(r.Policy, r.GapTolerance), strconv.FormatUint(r.Seed, 10), restartCell(restart)}
		for _, c := range runColumns {
			cells = append(cells, show(c.show, c.value(r)))
		}
		cells[3] += stoppedNote(r.Stopped)
		slow := "-"
		if r.HaveRounds {
			slow = fmt.Sprintf("%d (%s): %s", r.Slowest.Round, count(float64(r.Slowest.Active)), seconds(r.Slowest.Solve.Seconds()))
			// Only a searching policy's status means anything (files from
			// before 55511c5 wrote "Status(0)" for the others).
			if _, searched := r.PolicyStats["rounds_not_optimal"]; searched && r.Slowest.Status != "optimal" {
				slow += ", " + r.Slowest.Status
			}
		}
		line(append(cells, slow))
		g := key{r.Policy, r.Rate, restart, r.GapTolerance}
		if groups[g] == nil {
			order = append(order, g)
		}
		groups[g] = append(groups[g], r)
	}
	for _, g := range order {
		rs := groups[g]
		seeds := make([]string, len(rs))
		for k, r := range rs {
			seeds[k] = strconv.FormatUint(r.Seed, 10)
		}
		// A seed twice is two settings (from summaries that did not record
		// their restart cost, say): their mean would mean nothing.
		if len(rs) < 2 || len(slices.Compact(slices.Sorted(slices.Values(seeds)))) < len(rs) {
			continue
		}
		cells := []string{policyCell(g.policy, g.gapTol) + ", mean ± sd", strings.Join(seeds, ","), restartCell(g.restart)}
		for _, c := range runColumns {
			vals := make([]float64, len(rs))
			for k, r := range rs {
				vals[k] = c.value(r)
			}
			m, sd := meanSD(vals)
			cell := show(c.show, m)
			if c.largest && cell != "-" {
				cell = "≤ " + c.show(slices.Max(vals))
			} else if cell != "-" {
				cell += " ± " + c.show(sd)
			}
			cells = append(cells, cell)
		}
		line(append(cells, ""))
	}
}

// restartCell prints a run's restart cost, "-" when its summary did not
// record one (-1).
func restartCell(seconds float64) string {
	return show(func(v float64) string { return fixed(0)(v) + " s" }, seconds)
}

// stoppedNote says why a run ended early, "" if it ran to completion.
// policyCell names a run's policy, and its solver's gap tolerance when it
// had one (-gap-tolerance), so that such runs are told from exact ones.
func policyCell(policy string, gapTolerance float64) string {
	if gapTolerance > 0 {
		return fmt.Sprintf("%s (gap tolerance %g)", policy, gapTolerance)
	}
	return policy
}

func stoppedNote(why string) string {
	switch {
	case why == "":
		return ""
	case strings.Contains(why, "canceled"):
		return " (stopped by hand)"
	}
	return " (stopped: " + why + ")"
}

// meanSD is the mean and sample standard deviation of vals; NaN if any
// value is missing, so that a mean never hides a run without the value.
func meanSD(vals []float64) (float64, float64) {
	for _, v := range vals {
		if math.IsNaN(v) || v < 0 {
			return math.NaN(), math.NaN()
		}
	}
	return stat.MeanStdDev(vals, nil)
}

func show(f func(float64) string, v float64) string {
	if math.IsNaN(v) || v < 0 {
		return "-"
	}
	return f(v)
}

func fixed(digits int) func(float64) string {
	return func(v float64) string { return strconv.FormatFloat(v, 'f', digits, 64) }
}

// count prints a whole number with thousands separators (4,483).
func count(v float64) string {
	s := strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	for k := len(s) - 3; k > 0; k -= 3 {
		s = s[:k] + "," + s[k:]
	}
	return s
}

// seconds prints a time in ms below a second, else in s.
func seconds(v float64) string {
	if v < 1 {
		return strconv.FormatFloat(v*1000, 'f', 1, 64) + " ms"
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + " s"
}

// minSec prints a wall time as "9 min 29 s".
func minSec(v float64) string {
	s := int(math.Round(v))
	if s < 60 {
		return fmt.Sprintf("%d s", s)
	}
	return fmt.Sprintf("%d min %d s", s/60, s%60)
}

func percent(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) + "%" }

func sci(v float64) string {
	if v == 0 {
		return "0"
	}
	return strconv.FormatFloat(v, 'e', 1, 64)
}
