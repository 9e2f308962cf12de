package command

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/sim"
	"github.com/nomad-fft/nomad-fft/allocator/sim/metrics"
)

// writeJobsCSV writes one row per job of a run.
func writeJobsCSV(w io.Writer, res []metrics.JobResult) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"index", "id", "type", "gpus", "arrival_s", "finish_s", "jct_s", "first_run_s", "starvation_s",
		"switches", "preemptions", "rejected", "finished", "measured", "n_avg", "n_arrival", "ftf", "ftf_arrival", "ftf_gavel"})
	f := func(v float64) string {
		if math.IsNaN(v) {
			return ""
		}
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	for _, r := range res {
		_ = cw.Write([]string{strconv.Itoa(r.Index), r.ID, r.Type, strconv.Itoa(r.GPUs), f(r.Arrival), f(r.Finish), f(r.JCT),
			f(r.FirstRun), f(r.Starvation), strconv.Itoa(r.Switches), strconv.Itoa(r.Preemptions),
			strconv.FormatBool(r.Rejected), strconv.FormatBool(r.Finished), strconv.FormatBool(r.Measured),
			f(r.NAvg), strconv.Itoa(r.NArrival), f(r.FTF), f(r.FTFArrival), f(r.FTFGavel)})
	}
	cw.Flush()
	return cw.Error()
}

// writeRoundsCSV writes one row per round of a run: when it started, its
// jobs, and where its time went (the whole round, the solve, the
// placement), with the decision's status, gap and search nodes, so that a
// slow round can be named. Its columns are roundColumns.
func writeRoundsCSV(w io.Writer, rounds []sim.RoundStats) error {
	cw := csv.NewWriter(w)
	row := make([]string, len(roundColumns))
	for k, c := range roundColumns {
		row[k] = c.name
	}
	_ = cw.Write(row)
	for r := range rounds {
		for k, c := range roundColumns {
			row[k] = c.write(&rounds[r])
		}
		_ = cw.Write(row)
	}
	cw.Flush()
	return cw.Error()
}

// roundColumn is one column of the rounds file: its header, how a round
// is written in it, and how readRoundsCSV sets it back.
type roundColumn struct {
	name  string
	write func(*sim.RoundStats) string
	read  func(*sim.RoundStats, string) error
}

// roundColumns are the rounds file's columns, in order.
var roundColumns = []roundColumn{
	intColumn("round", func(r *sim.RoundStats) *int { return &r.Round }),
	floatColumn("start_s", func(r *sim.RoundStats) *float64 { return &r.Start }),
	intColumn("active", func(r *sim.RoundStats) *int { return &r.Active }),
	floatColumn("seconds", func(r *sim.RoundStats) *float64 { return &r.Seconds }),
	{"trigger", func(r *sim.RoundStats) string { return string(r.Trigger) },
		func(r *sim.RoundStats, s string) error { r.Trigger = loop.TriggerKind(s); return nil }},
	secondsColumn("wall_s", func(r *sim.RoundStats) *time.Duration { return &r.Wall }),
	secondsColumn("solve_s", func(r *sim.RoundStats) *time.Duration { return &r.Solve }),
	secondsColumn("place_s", func(r *sim.RoundStats) *time.Duration { return &r.Place }),
	{"status", func(r *sim.RoundStats) string { return r.Status },
		func(r *sim.RoundStats, s string) error { r.Status = s; return nil }},
	floatColumn("gap", func(r *sim.RoundStats) *float64 { return &r.Gap }),
	intColumn("nodes", func(r *sim.RoundStats) *int { return &r.Nodes }),
}

func floatColumn(name string, v func(*sim.RoundStats) *float64) roundColumn {
	return roundColumn{name,
		func(r *sim.RoundStats) string { return strconv.FormatFloat(*v(r), 'g', 6, 64) },
		func(r *sim.RoundStats, s string) (err error) { *v(r), err = strconv.ParseFloat(s, 64); return err }}
}

func intColumn(name string, v func(*sim.RoundStats) *int) roundColumn {
	return roundColumn{name,
		func(r *sim.RoundStats) string { return strconv.Itoa(*v(r)) },
		func(r *sim.RoundStats, s string) error {
			// Written as an integer; read as a number, as older files may hold one.
			f, err := strconv.ParseFloat(s, 64)
			*v(r) = int(f)
			return err
		}}
}

func secondsColumn(name string, v func(*sim.RoundStats) *time.Duration) roundColumn {
	return roundColumn{name,
		func(r *sim.RoundStats) string { return strconv.FormatFloat(v(r).Seconds(), 'g', 6, 64) },
		func(r *sim.RoundStats, s string) error {
			f, err := strconv.ParseFloat(s, 64)
			*v(r) = time.Duration(f * float64(time.Second))
			return err
		}}
}

type jsonSummary struct {
	Rate float64 `json:"rate_jobs_per_hour,omitempty"`
	Seed uint64  `json:"seed"`
	// RestartSeconds is the run's -restart-seconds; nil in summaries
	// written before it was recorded.
	RestartSeconds *float64 `json:"restart_seconds,omitempty"`
	// GapTolerance is the run's -gap-tolerance; 0 (absent) proves every
	// round's optimum.
	GapTolerance float64 `json:"gap_tolerance,omitempty"`
	metrics.Summary
}

// writeSummaryJSON writes one run's summary. JSON has no NaN, so a value
// that does not exist (no finished job, no reference run) is written as -1.
func writeSummaryJSON(w io.Writer, rate float64, seed uint64, restartSeconds, gapTolerance float64, s metrics.Summary) error {
	b, err := json.MarshalIndent(jsonSummary{rate, seed, &restartSeconds, gapTolerance, cleanNaN(s)}, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func cleanNaN(s metrics.Summary) metrics.Summary {
	c := func(v *float64) {
		if math.IsNaN(*v) || math.IsInf(*v, 0) {
			*v = -1
		}
	}
	for _, st := range []*metrics.Stat{&s.JCT, &s.Starvation, &s.Solve, &s.Active} {
		c(&st.Mean)
		c(&st.P50)
		c(&st.P99)
		c(&st.Max)
	}
	if s.FTFGavel != nil {
		g := *s.FTFGavel
		s.FTFGavel = &g
	}
	for _, f := range []*metrics.FairnessStat{&s.FTF, &s.FTFArrival, s.FTFGavel} {
		if f != nil {
			c(&f.Mean)
			c(&f.Max)
			c(&f.Unfair)
		}
	}
	c(&s.Makespan)
	c(&s.Utilisation)
	return s
}

// tableRow is one line of a table: a policy at one rate, averaged over
// the seeds of its runs.
type tableRow struct {
	Policy string
	Rate   float64
	Runs   []metrics.Summary
	Seeds  []uint64
}

// mean of f over the row's runs, ignoring NaN.
func (r *tableRow) mean(f func(*metrics.Summary) float64) float64 {
	sum, n := 0.0, 0
	for k := range r.Runs {
		if v := f(&r.Runs[k]); !math.IsNaN(v) {
			sum += v
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}

// hours of a metric in seconds.
func (r *tableRow) hours(f func(*metrics.Summary) float64) string { return num(r.mean(f) / 3600) }

// ratio of a metric to the same metric of first.
func (r *tableRow) ratio(first *tableRow, f func(*metrics.Summary) float64) string {
	return num(r.mean(f) / first.mean(f))
}

// perJob divides a count by the finished jobs of each run.
func perJob(count func(*metrics.Summary) int) func(*metrics.Summary) float64 {
	return func(s *metrics.Summary) float64 {
		if s.Finished == 0 {
			return math.NaN()
		}
		return float64(count(s)) / float64(s.Finished)
	}
}

// Metrics of a summary, by the names the tables use.
var (
	jctMean     = func(s *metrics.Summary) float64 { return s.JCT.Mean }
	jctP50      = func(s *metrics.Summary) float64 { return s.JCT.P50 }
	jctP99      = func(s *metrics.Summary) float64 { return s.JCT.P99 }
	ftfMean     = func(s *metrics.Summary) float64 { return s.FTF.Mean }
	ftfMax      = func(s *metrics.Summary) float64 { return s.FTF.Max }
	ftfUnfair   = func(s *metrics.Summary) float64 { return s.FTF.Unfair }
	starveMean  = func(s *metrics.Summary) float64 { return s.Starvation.Mean }
	preemptions = func(s *metrics.Summary) int { return s.Preemptions }
	switches    = func(s *metrics.Summary) int { return s.Switches }
)

// rateBlocks splits rows into runs of the same rate, in order.
func rateBlocks(rows []tableRow) [][]tableRow {
	var out [][]tableRow
	for k := 0; k < len(rows); {
		e := k + 1
		for e < len(rows) && rows[e].Rate == rows[k].Rate {
			e++
		}
		out = append(out, rows[k:e])
		k = e
	}
	return out
}

// writeTable prints the main metrics, one block per rate, in at most 100
// columns for policy names of up to 16 characters; each block's first
// policy is the ratio columns' denominator. Policies with unfinished or
// rejected jobs get a note, as the table leaves those columns out.
func writeTable(w io.Writer, rows []tableRow) {
	for b, block := range rateBlocks(rows) {
		if b > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, blockTitle(block))
		// Names left-aligned, numbers right-aligned: tabwriter aligns every
		// column alike, so the names are padded here, and the two spaces
		// between columns are in the cells (its padding would indent the
		// names too).
		width := len("policy")
		for k := range block {
			width = max(width, len(block[k].Policy))
		}
		tw := tabwriter.NewWriter(w, 0, 0, 0, ' ', tabwriter.AlignRight)
		line := func(cells ...string) {
			fmt.Fprintf(tw, "%-*s\t  %s\t\n", width, cells[0], strings.Join(cells[1:], "\t  "))
		}
		line("policy", "JCT h", "p99 h", "FTF", "FTF max", "unfair", "starve h", "preempt", "switch", "JCT/1st", "FTF/1st")
		first := &block[0]
		for k := range block {
			r := &block[k]
			line(r.Policy, r.hours(jctMean), r.hours(jctP99), num(r.mean(ftfMean)), num(r.mean(ftfMax)), num(r.mean(ftfUnfair)),
				r.hours(starveMean), num(r.mean(perJob(preemptions))), num(r.mean(perJob(switches))),
				r.ratio(first, jctMean), r.ratio(first, ftfMean))
		}
		tw.Flush()
		for k := range block {
			if n := incomplete(&block[k]); n != "" {
				fmt.Fprintf(w, "note: %s: %s\n", block[k].Policy, n)
			}
		}
	}
	fmt.Fprintln(w, "\nJCT h, p99 h: mean and 99th percentile job completion time in hours; FTF: mean")
	fmt.Fprintln(w, "finish-time fairness rho, unfair: share of jobs with rho > 1; starve h: mean wait to")
	fmt.Fprintln(w, "first run; preempt, switch: per finished job; /1st: ratio to the first row. -wide")
	fmt.Fprintln(w, "prints every metric.")
}

// blockTitle names a block's rate (or the trace) and seeds.
func blockTitle(block []tableRow) string {
	seeds := make([]string, len(block[0].Seeds))
	for k, s := range block[0].Seeds {
		seeds[k] = strconv.FormatUint(s, 10)
	}
	what := "Trace"
	if block[0].Rate > 0 {
		what = fmt.Sprintf("Rate %g jobs/hour", block[0].Rate)
	}
	return fmt.Sprintf("%s, seeds %s:", what, strings.Join(seeds, ","))
}

// incomplete says how many measured jobs a row's runs did not finish or
// rejected, "" if none.
func incomplete(r *tableRow) string {
	unfinished := r.mean(func(s *metrics.Summary) float64 { return float64(s.Unfinished) })
	rejected := r.mean(func(s *metrics.Summary) float64 { return float64(s.Rejected) })
	if unfinished == 0 && rejected == 0 {
		return ""
	}
	return fmt.Sprintf("%s measured jobs unfinished, %s rejected (mean per run)", num(unfinished), num(rejected))
}

// writeWideTable prints every metric side by side; each rate's first row
// is the denominator of the ratio columns (this row's value / first's).
func writeWideTable(w io.Writer, rows []tableRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\trate/h\tseeds\tJCT h\tp50 h\tp99 h\tmakespan h\tFTF mean\tFTF max\tunfair\tFTF@arr\tFTF gavel\tstarve h\tutil\tswitch\tpreempt\tsolve p50 ms\tp99 ms\tmax ms\tunfin\trej\tmoves\tsplit\tidle-placeable GPU-h\tJCT/first\tFTF/first\tFTFmax/first\t")
	first := map[float64]*tableRow{}
	for k := range rows {
		r := &rows[k]
		if first[r.Rate] == nil {
			first[r.Rate] = r
		}
		f0 := first[r.Rate]
		gav := r.mean(func(s *metrics.Summary) float64 {
			if s.FTFGavel == nil {
				return math.NaN()
			}
			return s.FTFGavel.Mean
		})
		count := func(f func(*metrics.Summary) int) string {
			return num(r.mean(func(s *metrics.Summary) float64 { return float64(f(s)) }))
		}
		fmt.Fprintf(tw, "%s\t%g\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			r.Policy, r.Rate, len(r.Runs),
			r.hours(jctMean), r.hours(jctP50), r.hours(jctP99),
			r.hours(func(s *metrics.Summary) float64 { return s.Makespan }),
			num(r.mean(ftfMean)), num(r.mean(ftfMax)), num(r.mean(ftfUnfair)),
			num(r.mean(func(s *metrics.Summary) float64 { return s.FTFArrival.Mean })),
			num(gav),
			r.hours(starveMean),
			num(r.mean(func(s *metrics.Summary) float64 { return s.Utilisation })),
			count(switches), count(preemptions),
			num(r.mean(func(s *metrics.Summary) float64 { return s.Solve.P50 * 1000 })),
			num(r.mean(func(s *metrics.Summary) float64 { return s.Solve.P99 * 1000 })),
			num(r.mean(func(s *metrics.Summary) float64 { return s.Solve.Max * 1000 })),
			count(func(s *metrics.Summary) int { return s.Unfinished }),
			count(func(s *metrics.Summary) int { return s.Rejected }),
			count(func(s *metrics.Summary) int { return s.Moves }), count(func(s *metrics.Summary) int { return s.SplitJobs }),
			num(r.mean(func(s *metrics.Summary) float64 { return s.IdlePlaceableGPUHours })),
			r.ratio(f0, jctMean), r.ratio(f0, ftfMean), r.ratio(f0, ftfMax),
		)
	}
	tw.Flush()
}

// num prints a table value with three decimals below 10, one below 1000
// and none above; "-" for a value that does not exist.
func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case math.Abs(v) >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}
