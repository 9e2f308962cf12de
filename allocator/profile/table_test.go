package profile

import (
	"encoding/csv"
	"os"
	"strconv"
	"strings"
	"testing"
)

// tableRow is one (job type, scale factor) row of an isolated throughput
// table in testdata: steps/s by model, zeros (does not fit) left out.
type tableRow struct {
	jobType, family string
	gpus            int
	rates           map[string]float64
}

// loadTable reads testdata's isolated_throughputs.csv format (columns
// job_type, model, scale_factor and <model>_steps_per_s).
func loadTable(t testing.TB, path string) []tableRow {
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
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	var out []tableRow
	for _, rec := range recs[1:] {
		sf, err := strconv.Atoi(rec[col["scale_factor"]])
		if err != nil {
			t.Fatalf("%s: scale_factor %q: %v", path, rec[col["scale_factor"]], err)
		}
		r := tableRow{jobType: rec[col["job_type"]], family: rec[col["model"]], gpus: sf, rates: map[string]float64{}}
		for h, i := range col {
			m, ok := strings.CutSuffix(h, "_steps_per_s")
			if !ok {
				continue
			}
			v, err := strconv.ParseFloat(rec[i], 64)
			if err != nil {
				t.Fatalf("%s: %s %q: %v", path, h, rec[i], err)
			}
			if v > 0 {
				r.rates[m] = v
			}
		}
		out = append(out, r)
	}
	return out
}

func singleGPU(rows []tableRow) []tableRow {
	var out []tableRow
	for _, r := range rows {
		if r.gpus == 1 {
			out = append(out, r)
		}
	}
	return out
}
