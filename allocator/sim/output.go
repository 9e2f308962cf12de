package sim

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"
)

// WriteJobsCSV writes one row per job of a run.
func WriteJobsCSV(w io.Writer, res []JobResult) error {
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

type jsonSummary struct {
	Rate float64 `json:"rate_jobs_per_hour,omitempty"`
	Seed uint64  `json:"seed"`
	Summary
}

// WriteSummaryJSON writes one run's summary. JSON has no NaN, so a value
// that does not exist (no finished job, no reference run) is written as -1.
func WriteSummaryJSON(w io.Writer, rate float64, seed uint64, s Summary) error {
	b, err := json.MarshalIndent(jsonSummary{rate, seed, cleanNaN(s)}, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func cleanNaN(s Summary) Summary {
	c := func(v *float64) {
		if math.IsNaN(*v) || math.IsInf(*v, 0) {
			*v = -1
		}
	}
	for _, st := range []*Stat{&s.JCT, &s.Starvation, &s.Solve} {
		c(&st.Mean)
		c(&st.P50)
		c(&st.P99)
		c(&st.Max)
	}
	if s.FTFGavel != nil {
		g := *s.FTFGavel
		s.FTFGavel = &g
	}
	for _, f := range []*FairnessStat{&s.FTF, &s.FTFArrival, s.FTFGavel} {
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

// Row is one line of the side-by-side table: a policy at one rate,
// averaged over seeds.
type Row struct {
	Policy string
	Rate   float64
	Runs   []Summary
}

// mean of f over the row's runs, ignoring NaN.
func (r *Row) mean(f func(*Summary) float64) float64 {
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

// WriteTable prints rows side by side; each rate's first row is the
// reference for the ratio columns (its value over this row's... shown as
// this/first).
func WriteTable(w io.Writer, rows []Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\trate/h\tseeds\tJCT h\tp50 h\tp99 h\tmakespan h\tFTF mean\tFTF max\tunfair\tFTF@arr\tFTF gavel\tstarve h\tutil\tswitch\tpreempt\tsolve p50 ms\tp99 ms\tmax ms\tunfin\trej\tJCT/first\tFTF/first\tFTFmax/first\t")
	first := map[float64]*Row{}
	for k := range rows {
		r := &rows[k]
		if first[r.Rate] == nil {
			first[r.Rate] = r
		}
		f0 := first[r.Rate]
		h := func(f func(*Summary) float64) string { return num(r.mean(f) / 3600) }
		gav := r.mean(func(s *Summary) float64 {
			if s.FTFGavel == nil {
				return math.NaN()
			}
			return s.FTFGavel.Mean
		})
		ratio := func(f func(*Summary) float64) string { return num(r.mean(f) / f0.mean(f)) }
		fmt.Fprintf(tw, "%s\t%g\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			r.Policy, r.Rate, len(r.Runs),
			h(func(s *Summary) float64 { return s.JCT.Mean }),
			h(func(s *Summary) float64 { return s.JCT.P50 }),
			h(func(s *Summary) float64 { return s.JCT.P99 }),
			h(func(s *Summary) float64 { return s.Makespan }),
			num(r.mean(func(s *Summary) float64 { return s.FTF.Mean })),
			num(r.mean(func(s *Summary) float64 { return s.FTF.Max })),
			num(r.mean(func(s *Summary) float64 { return s.FTF.Unfair })),
			num(r.mean(func(s *Summary) float64 { return s.FTFArrival.Mean })),
			num(gav),
			h(func(s *Summary) float64 { return s.Starvation.Mean }),
			num(r.mean(func(s *Summary) float64 { return s.Utilisation })),
			num(r.mean(func(s *Summary) float64 { return float64(s.Switches) })),
			num(r.mean(func(s *Summary) float64 { return float64(s.Preemptions) })),
			num(r.mean(func(s *Summary) float64 { return s.Solve.P50 * 1000 })),
			num(r.mean(func(s *Summary) float64 { return s.Solve.P99 * 1000 })),
			num(r.mean(func(s *Summary) float64 { return s.Solve.Max * 1000 })),
			num(r.mean(func(s *Summary) float64 { return float64(s.Unfinished) })),
			num(r.mean(func(s *Summary) float64 { return float64(s.Rejected) })),
			ratio(func(s *Summary) float64 { return s.JCT.Mean }),
			ratio(func(s *Summary) float64 { return s.FTF.Mean }),
			ratio(func(s *Summary) float64 { return s.FTF.Max }),
		)
	}
	tw.Flush()
}

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
