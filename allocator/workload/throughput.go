package workload

import (
	"bytes"
	_ "embed"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
)

// gavelCSV is Gavel's isolated throughput table (see data/SOURCE.md).
//
//go:embed data/gavel_isolated_throughputs.csv
var gavelCSV []byte

// gavelSpreadCSV is Gavel's table of the same multi-GPU jobs spread over
// servers (its "*_unconsolidated" entries, see data/SOURCE.md).
//
//go:embed data/gavel_unconsolidated_throughputs.csv
var gavelSpreadCSV []byte

// Throughputs is a table of steps per second by job type, GPU count and
// GPU model. A 0 (or absent) rate means the job does not fit the model.
type Throughputs struct {
	// Models are the table's GPU models, in column order.
	Models []string
	// Types are the job types with a 1-GPU row, in file order.
	Types []string
	// Distributed marks the types that may use more than one GPU.
	Distributed map[string]bool
	rates       map[tputKey]map[string]float64
	// Spread are the rates of multi-GPU jobs whose GPUs lie on several
	// servers (Gavel's unconsolidated throughputs); nil when unknown.
	Spread *Throughputs
}

type tputKey struct {
	typ  string
	gpus int
}

// Rates returns the per-model steps/s of jobType with gpus GPUs. The map is
// shared; do not modify it.
func (t *Throughputs) Rates(jobType string, gpus int) (map[string]float64, bool) {
	r, ok := t.rates[tputKey{jobType, gpus}]
	return r, ok
}

// SpreadRates returns the per-model steps/s of jobType with gpus GPUs
// spread over several servers, for the models the table knows (absent: the
// job runs at its Rates there). The map is shared; do not modify it.
func (t *Throughputs) SpreadRates(jobType string, gpus int) map[string]float64 {
	if t.Spread == nil || gpus < 2 {
		return nil
	}
	r, _ := t.Spread.Rates(jobType, gpus)
	return r
}

// MaxGPUs is the largest GPU count the table has for jobType (0: unknown).
func (t *Throughputs) MaxGPUs(jobType string) int {
	best := 0
	for k := range t.rates {
		if k.typ == jobType && k.gpus > best {
			best = k.gpus
		}
	}
	return best
}

var (
	gavelOnce  sync.Once
	gavelTable *Throughputs
)

// GavelThroughputs is the embedded Gavel table (V100, P100, K80).
func GavelThroughputs() *Throughputs {
	gavelOnce.Do(func() {
		t, err := ParseThroughputs(bytes.NewReader(gavelCSV))
		if err != nil {
			panic("workload: embedded throughput table: " + err.Error())
		}
		if t.Spread, err = ParseThroughputs(bytes.NewReader(gavelSpreadCSV)); err != nil {
			panic("workload: embedded spread throughput table: " + err.Error())
		}
		gavelTable = t
	})
	return gavelTable
}

// ParseThroughputs reads the isolated_throughputs.csv format: columns
// job_type, scale_factor, distributed, and <model>_steps_per_s per model.
func ParseThroughputs(r io.Reader) (*Throughputs, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("reading throughput table: %w", err)
	}
	if len(rows) < 2 {
		return nil, fmt.Errorf("throughput table: no rows")
	}
	col := map[string]int{}
	t := &Throughputs{Distributed: map[string]bool{}, rates: map[tputKey]map[string]float64{}}
	var modelCols []int
	for k, h := range rows[0] {
		col[h] = k
		if m, ok := strings.CutSuffix(h, "_steps_per_s"); ok {
			t.Models = append(t.Models, m)
			modelCols = append(modelCols, k)
		}
	}
	for _, need := range []string{"job_type", "scale_factor", "distributed"} {
		if _, ok := col[need]; !ok {
			return nil, fmt.Errorf("throughput table: missing column %q", need)
		}
	}
	for n, row := range rows[1:] {
		line := n + 2
		sf, err := strconv.Atoi(row[col["scale_factor"]])
		if err != nil || sf < 1 {
			return nil, fmt.Errorf("throughput table line %d: field \"scale_factor\" = %q: want an integer >= 1", line, row[col["scale_factor"]])
		}
		typ := row[col["job_type"]]
		rates := make(map[string]float64, len(t.Models))
		for k, c := range modelCols {
			v, err := strconv.ParseFloat(row[c], 64)
			if err != nil || v < 0 {
				return nil, fmt.Errorf("throughput table line %d: field %q = %q: want a number >= 0", line, rows[0][c], row[c])
			}
			if v > 0 {
				rates[t.Models[k]] = v
			}
		}
		t.rates[tputKey{typ, sf}] = rates
		if sf == 1 {
			t.Types = append(t.Types, typ)
		}
		if strings.EqualFold(row[col["distributed"]], "true") {
			t.Distributed[typ] = true
		}
	}
	return t, nil
}

// largestBelow is the largest GPU count <= gpus with a row for jobType
// (1 if none).
func (t *Throughputs) largestBelow(jobType string, gpus int) int {
	best := 1
	for k := range t.rates {
		if k.typ == jobType && k.gpus <= gpus && k.gpus > best {
			best = k.gpus
		}
	}
	return best
}
