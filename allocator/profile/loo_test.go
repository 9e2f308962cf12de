package profile

import (
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// cell is one held-out value: row r of a table, model m. When keep is
// set, the row keeps only its value on keep (the online case: a job
// measured on one model); otherwise it keeps all its other values.
type cell struct {
	r    int
	m    string
	keep string
}

// predictor predicts rows[c.r].rates[c.m] from every other value of rows.
type predictor func(rows []tableRow, c cell) float64

// without returns rows with one value removed (rates maps are copied).
func without(rows []tableRow, c cell) []tableRow {
	out := make([]tableRow, len(rows))
	copy(out, rows)
	rates := map[string]float64{}
	for m, v := range rows[c.r].rates {
		if m != c.m && (c.keep == "" || m == c.keep) {
			rates[m] = v
		}
	}
	out[c.r].rates = rates
	return out
}

// ratioBaseline predicts from the job's own values on the other models
// times the geometric-mean ratio between the two models over the other
// rows that have both (restricted to the same family and gang size when
// sameFamily and such rows exist), averaging the predictions from each
// other model geometrically.
func ratioBaseline(sameFamily bool) predictor {
	return func(rows []tableRow, c cell) float64 {
		train := without(rows, c)
		held := train[c.r]
		ratio := func(from string, peers func(tableRow) bool) (float64, int) {
			sum, n := 0.0, 0
			for k, r := range train {
				a, b := r.rates[c.m], r.rates[from]
				if k == c.r || a == 0 || b == 0 || !peers(r) {
					continue
				}
				sum += math.Log(a / b)
				n++
			}
			return sum, n
		}
		logSum, n := 0.0, 0
		for from, v := range held.rates {
			sum, k := 0.0, 0
			if sameFamily {
				sum, k = ratio(from, func(r tableRow) bool { return r.family == held.family && r.gpus == held.gpus })
			}
			if k == 0 {
				sum, k = ratio(from, func(r tableRow) bool { return r.gpus == held.gpus })
			}
			if k == 0 {
				continue
			}
			logSum += math.Log(v) + sum/float64(k)
			n++
		}
		if n == 0 {
			return math.NaN()
		}
		return math.Exp(logSum / float64(n))
	}
}

// estimatorPredictor fits an Estimator without priors (the priors are
// derived from the table under test) to every other value and predicts the
// held-out one; it also records the predicted log sd.
func estimatorPredictor(t testing.TB, sds map[cell]float64, opts ...Option) predictor {
	return func(rows []tableRow, c cell) float64 {
		e, err := New(nil, opts...)
		if err != nil {
			t.Fatal(err)
		}
		train := without(rows, c)
		for _, r := range rows {
			if err := e.AddModels(sortedKeys(r.rates)...); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range train {
			id := JobID(fmt.Sprintf("%s/%d", r.jobType, r.gpus))
			if err := e.AddJob(Job{ID: id, Family: r.family, GPUs: r.gpus}); err != nil {
				t.Fatal(err)
			}
			for _, m := range sortedKeys(r.rates) {
				if err := e.Measure(id, m, r.rates[m]); err != nil {
					t.Fatal(err)
				}
			}
		}
		id := JobID(fmt.Sprintf("%s/%d", rows[c.r].jobType, rows[c.r].gpus))
		got := e.Throughput(id, c.m)
		if got.Source != SourceEstimated {
			t.Fatalf("held-out %s on %s: source %v, want estimated", id, c.m, got.Source)
		}
		sds[c] = got.LogSD
		return got.UnitsPerRound
	}
}

// oneSourceCells are, for every value of every row, the predictions of it
// from each one other value of the row alone.
func oneSourceCells(rows []tableRow, only string) []cell {
	var out []cell
	for _, c := range looCells(rows, only) {
		for _, keep := range sortedKeys(rows[c.r].rates) {
			if keep != c.m {
				out = append(out, cell{c.r, c.m, keep})
			}
		}
	}
	return out
}

// looCells are the held-out values: every value of a row that has at least
// one other value (else nothing in the row says its scale). only limits the
// models held out ("" for all).
func looCells(rows []tableRow, only string) []cell {
	var out []cell
	for i, r := range rows {
		if len(r.rates) < 2 {
			continue
		}
		for _, m := range sortedKeys(r.rates) {
			if only == "" || m == only {
				out = append(out, cell{r: i, m: m})
			}
		}
	}
	return out
}

type errStats struct {
	n              int
	median, p90    float64
	within1SD      float64 // fraction of |log error| <= predicted sd
	hasCalibration bool
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	// linear interpolation between order statistics (numpy's default)
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	return sorted[lo] + (pos-float64(lo))*(sorted[hi]-sorted[lo])
}

func evaluate(rows []tableRow, cells []cell, p predictor) (errStats, map[cell]float64) {
	errs := make([]float64, 0, len(cells))
	preds := map[cell]float64{}
	for _, c := range cells {
		pred := p(rows, c)
		preds[c] = pred
		errs = append(errs, RelativeError(pred, rows[c.r].rates[c.m]))
	}
	sort.Float64s(errs)
	return errStats{n: len(errs), median: quantile(errs, 0.5), p90: quantile(errs, 0.9)}, preds
}

func calibration(rows []tableRow, preds, sds map[cell]float64) float64 {
	in := 0
	for c, pred := range preds {
		if math.Abs(math.Log(pred/rows[c.r].rates[c.m])) <= sds[c] {
			in++
		}
	}
	return float64(in) / float64(len(preds))
}

// looCase is one evaluation: a table, the values held out, and whether the
// estimator must be no worse than the single-ratio baseline.
type looCase struct {
	name   string
	rows   []tableRow
	cells  []cell
	assert bool
}

// TestLeaveOneOut holds out each value of each table in turn, predicts it
// from all the others, and prints the median and p90 relative error of the
// estimator beside the two ratio baselines (README.md holds the table).
// On Gavel's and Shockwave's tables it fails if the estimator is worse than
// one global ratio per model pair at the median or at p90.
func TestLeaveOneOut(t *testing.T) {
	gavel := loadTable(t, "testdata/gavel_isolated_throughputs.csv")
	shock := loadTable(t, "testdata/shockwave_isolated_throughputs.csv")
	pollux := withPolluxT4(t, singleGPU(gavel), "testdata/pollux_t4_throughputs.csv")
	cases := []looCase{
		{"gavel 1-GPU, one other value kept (as in driver.md)", singleGPU(gavel), oneSourceCells(singleGPU(gavel), ""), true},
		{"gavel 1-GPU (26 types x V100/P100/K80)", singleGPU(gavel), looCells(singleGPU(gavel), ""), true},
		{"gavel all gang sizes (1/2/4/8 GPUs)", gavel, looCells(gavel, ""), true},
		{"shockwave 1-GPU (re-measured V100)", singleGPU(shock), looCells(singleGPU(shock), ""), true},
		{"shockwave all gang sizes", shock, looCells(shock, ""), true},
		{"pollux T4 held out (gavel 1-GPU + pollux T4)", pollux, looCells(pollux, "t4"), false},
		{"pollux T4 held out, one other value kept", pollux, oneSourceCells(pollux, "t4"), false},
	}
	var out strings.Builder
	fmt.Fprintf(&out, "\n| data | n | global ratio median / p90 | family ratio median / p90 | estimator median / p90 | estimator within 1 sd |\n|---|---|---|---|---|---|\n")
	for _, tc := range cases {
		global, _ := evaluate(tc.rows, tc.cells, ratioBaseline(false))
		family, _ := evaluate(tc.rows, tc.cells, ratioBaseline(true))
		sds := map[cell]float64{}
		est, preds := evaluate(tc.rows, tc.cells, estimatorPredictor(t, sds))
		fmt.Fprintf(&out, "| %s | %d | %.0f%% / %.0f%% | %.0f%% / %.0f%% | %.0f%% / %.0f%% | %.0f%% |\n", tc.name, est.n,
			100*global.median, 100*global.p90, 100*family.median, 100*family.p90, 100*est.median, 100*est.p90,
			100*calibration(tc.rows, preds, sds))
		if tc.assert && (est.median > global.median || est.p90 > global.p90) {
			t.Errorf("%s: estimator median/p90 %.3f/%.3f is worse than the single global ratio's %.3f/%.3f",
				tc.name, est.median, est.p90, global.median, global.p90)
		}
	}
	t.Log(out.String())
}

// withPolluxT4 adds Pollux's T4 rate (steps/s) to the rows of rows whose job
// type Pollux also measured; the other rows keep their three models.
func withPolluxT4(t testing.TB, rows []tableRow, path string) []tableRow {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("opening %s: %v", path, err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	t4 := map[string]float64{}
	for _, rec := range recs[1:] {
		v, err := strconv.ParseFloat(rec[3], 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", path, rec[3], err)
		}
		t4[rec[0]] = v
	}
	out := make([]tableRow, len(rows))
	matched := 0
	for i, r := range rows {
		out[i] = r
		if v, ok := t4[r.jobType]; ok {
			rates := map[string]float64{"t4": v}
			for m, x := range r.rates {
				rates[m] = x
			}
			out[i].rates = rates
			matched++
		}
	}
	if matched != len(t4) {
		t.Fatalf("%s: %d of %d T4 rows match a Gavel job type", path, matched, len(t4))
	}
	return out
}
