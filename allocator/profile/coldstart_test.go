package profile

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
)

// coldStartErrors predicts, in the online case (the held-out row keeps one
// value), each value of rows when only k other job types have been
// measured (a seeded random choice), with or without a prior table derived
// from prior's rows minus the held-out job type. It returns the median and
// p90 relative error.
func coldStartErrors(t *testing.T, rows, prior []tableRow, k int, withPrior bool) (median, p90 float64) {
	perm := rand.New(rand.NewPCG(1, 2)).Perm(len(rows))
	var errs []float64
	for _, c := range oneSourceCells(rows, "") {
		held := rows[c.r]
		var p *Priors
		if withPrior {
			var others []tableRow
			for _, r := range prior {
				if r.jobType != held.jobType {
					others = append(others, r)
				}
			}
			p = renamed(derivePriors(others))
		}
		e := newEst(t, p)
		must(t, e.AddModels(sortedKeys(held.rates)...))
		n := 0
		for _, i := range perm {
			if n == k {
				break
			}
			if i == c.r {
				continue
			}
			n++
			id := JobID(fmt.Sprint(i))
			must(t, e.AddJob(Job{ID: id, Family: rows[i].family, GPUs: 1}))
			for m, v := range rows[i].rates {
				must(t, e.Measure(id, m, v))
			}
		}
		must(t, e.AddJob(Job{ID: "held", Family: held.family, GPUs: 1}))
		must(t, e.Measure("held", c.keep, held.rates[c.keep]))
		got := e.Throughput("held", c.m)
		if got.Source != SourceEstimated && got.Source != SourcePrior {
			t.Fatalf("held-out %s on %s: source %v", held.jobType, c.m, got.Source)
		}
		errs = append(errs, RelativeError(got.UnitsPerRound, held.rates[c.m]))
	}
	sort.Float64s(errs)
	return quantile(errs, 0.5), quantile(errs, 0.9)
}

// TestColdStart: how much the Gavel-derived prior helps a new cluster
// before many jobs have been measured there, on Gavel's own table and on
// Shockwave's re-measured one (the prior never contains the held-out job
// type). With no other job measured, the prior must beat no prior.
func TestColdStart(t *testing.T) {
	gavel := singleGPU(loadTable(t, "testdata/gavel_isolated_throughputs.csv"))
	shock := singleGPU(loadTable(t, "testdata/shockwave_isolated_throughputs.csv"))
	var out strings.Builder
	out.WriteString("\n| cluster table | other job types measured | no prior: median / p90 | Gavel prior: median / p90 |\n|---|---|---|---|\n")
	for _, tbl := range []struct {
		name string
		rows []tableRow
	}{{"gavel", gavel}, {"shockwave", shock}} {
		for _, k := range []int{0, 1, 3, 10, len(tbl.rows) - 1} {
			m0, p0 := coldStartErrors(t, tbl.rows, gavel, k, false)
			m1, p1 := coldStartErrors(t, tbl.rows, gavel, k, true)
			fmt.Fprintf(&out, "| %s | %d | %.0f%% / %.0f%% | %.0f%% / %.0f%% |\n", tbl.name, k, 100*m0, 100*p0, 100*m1, 100*p1)
			if k == 0 && (m1 >= m0 || p1 >= p0) {
				t.Errorf("%s, no job measured: prior %.3f/%.3f not better than none %.3f/%.3f", tbl.name, m1, p1, m0, p0)
			}
		}
	}
	t.Log(out.String())
}
