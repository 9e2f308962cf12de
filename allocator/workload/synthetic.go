package workload

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
)

// Throughput table names, as `fftctl simulate -throughputs` takes them.
const (
	// TableGavel is Gavel's measured table: V100, P100, K80.
	TableGavel = "gavel"
	// TableGavel8 is Gavel's table plus the five synthetic models of
	// SyntheticModels: the FFT paper's 8-type large cluster.
	TableGavel8 = "gavel-8"
)

// TableNames lists the throughput tables ThroughputTable knows.
func TableNames() []string { return []string{TableGavel, TableGavel8} }

// ThroughputTable returns a named throughput table (TableNames).
func ThroughputTable(name string) (*Throughputs, error) {
	switch name {
	case TableGavel, "":
		return GavelThroughputs(), nil
	case TableGavel8:
		return Gavel8Throughputs(), nil
	}
	return nil, fmt.Errorf("unknown throughput table %q: want %s", name, strings.Join(TableNames(), " or "))
}

// SyntheticModel is a GPU model that was never measured: its throughputs
// are derived from Gavel's by SyntheticRate at Position on the
// K80 (0) -> P100 (1) -> V100 (2) axis.
type SyntheticModel struct {
	Name     string
	Position float64
}

// measuredAxis is where Gavel's models sit on the axis, slowest first for
// most job types (each type keeps its own order: Recommendation runs
// faster on P100 than on V100).
var measuredAxis = []string{"k80", "p100", "v100"}

// extrapolationDamping scales the P100 -> V100 log-slope beyond V100.
const extrapolationDamping = 0.5

// SyntheticModels are the five models TableGavel8 adds. The names say what
// they are: "syn-A-B-p" is p% of the way from A to B in log-throughput,
// "syn-v100-up-p" p% of one damped step beyond V100. None is a product.
var SyntheticModels = []SyntheticModel{
	{"syn-k80-p100-50", 0.5},
	{"syn-p100-v100-33", 1 + 1.0/3},
	{"syn-p100-v100-67", 1 + 2.0/3},
	{"syn-v100-up-50", 2.5},
	{"syn-v100-up-100", 3},
}

// SyntheticRate is the throughput of a job type (with its GPU count) at
// position x of the K80 (0) -> P100 (1) -> V100 (2) axis, from its
// measured rates r (by model name; a missing or 0 rate: does not fit).
// With L_i = ln r_i at the measured positions i = 0, 1, 2:
//
//	0 <= x <= 2:  ln r(x) = (1-f) L_i + f L_{i+1},  i = floor(x), f = x - i
//	              (linear in log-throughput between the two neighbours)
//	2 <  x <= 3:  ln r(x) = L_2 + d (x-2) (L_2 - L_1),  d = 1/2
//	              (one step beyond V100 at half the P100 -> V100 log-slope)
//
// so each job type keeps its own affinity: between neighbours r(x) is
// monotone, from one measured rate to the other, and beyond V100 it moves
// the way P100 -> V100 moved, damped. A job that does not fit a neighbour
// used in the formula (both for extrapolation) does not fit: r(x) = 0.
// At x = 0, 1, 2 it is the measured rate. x outside [0, 3] is 0.
func SyntheticRate(r map[string]float64, x float64) float64 {
	if x < 0 || x > 3 {
		return 0
	}
	L := make([]float64, len(measuredAxis))
	for k, m := range measuredAxis {
		L[k] = math.Log(r[m]) // -Inf for a missing or 0 rate
	}
	i := int(math.Floor(x))
	f := x - float64(i)
	switch {
	case x > 2:
		if math.IsInf(L[1], -1) || math.IsInf(L[2], -1) {
			return 0
		}
		return math.Exp(L[2] + extrapolationDamping*(x-2)*(L[2]-L[1]))
	case f == 0:
		return r[measuredAxis[i]]
	}
	if math.IsInf(L[i], -1) || math.IsInf(L[i+1], -1) {
		return 0
	}
	return math.Exp((1-f)*L[i] + f*L[i+1])
}

var (
	gavel8Once  sync.Once
	gavel8Table *Throughputs
)

// Gavel8Throughputs is TableGavel8: Gavel's table with every row extended
// by SyntheticRate to the SyntheticModels. Gavel's three columns are
// unchanged.
func Gavel8Throughputs() *Throughputs {
	gavel8Once.Do(func() { gavel8Table = withSynthetic(GavelThroughputs(), SyntheticModels) })
	return gavel8Table
}

// withSynthetic copies t with models added by SyntheticRate.
func withSynthetic(t *Throughputs, models []SyntheticModel) *Throughputs {
	out := &Throughputs{
		Models:      append([]string(nil), t.Models...),
		Types:       append([]string(nil), t.Types...),
		Distributed: make(map[string]bool, len(t.Distributed)),
		rates:       make(map[tputKey]map[string]float64, len(t.rates)),
		// Spread rates are Gavel's measurements: the synthetic models
		// have none, and their jobs run at one rate however placed.
		Spread: t.Spread,
	}
	for k, v := range t.Distributed {
		out.Distributed[k] = v
	}
	for _, m := range models {
		out.Models = append(out.Models, m.Name)
	}
	for key, r := range t.rates {
		nr := make(map[string]float64, len(r)+len(models))
		for m, v := range r {
			nr[m] = v
		}
		for _, m := range models {
			if v := SyntheticRate(r, m.Position); v > 0 {
				nr[m.Name] = v
			}
		}
		out.rates[key] = nr
	}
	return out
}

// HasModel reports whether the table has a column for model.
func (t *Throughputs) HasModel(model string) bool { return slices.Contains(t.Models, model) }
