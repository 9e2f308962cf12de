package workload

import (
	"math"
	"strings"
	"testing"
)

func TestSyntheticRate(t *testing.T) {
	// A typical type (V100 > P100 > K80), Recommendation's inverted
	// affinity (P100 > V100) and ResNet-50's no-fit on K80.
	typical := map[string]float64{"k80": 1, "p100": 4, "v100": 16}
	inverted := map[string]float64{"k80": 2, "p100": 8, "v100": 4}
	noK80 := map[string]float64{"p100": 4, "v100": 16}
	noP100 := map[string]float64{"k80": 1, "v100": 16}
	for _, c := range []struct {
		name string
		r    map[string]float64
		x    float64
		want float64
	}{
		{"k80 measured", typical, 0, 1},
		{"p100 measured", typical, 1, 4},
		{"v100 measured", typical, 2, 16},
		{"geometric midpoint k80-p100", typical, 0.5, 2},
		{"geometric midpoint p100-v100", typical, 1.5, 8},
		{"a third of p100-v100", typical, 1 + 1.0/3, 4 * math.Pow(4, 1.0/3)},
		{"half a damped step", typical, 2.5, 16 * math.Pow(4, 0.25)},
		{"a damped step", typical, 3, 32},
		{"inverted midpoint", inverted, 1.5, math.Sqrt(32)},
		{"inverted extrapolation falls", inverted, 3, 4 / math.Sqrt2},
		{"no fit on k80: none below p100", noK80, 0.5, 0},
		{"no fit on k80: p100-v100 fine", noK80, 1.5, 8},
		{"no fit on k80: k80 itself", noK80, 0, 0},
		{"no fit on p100: nothing next to it", noP100, 0.5, 0},
		{"no fit on p100: above it neither", noP100, 1.5, 0},
		{"no fit on p100: no slope to extrapolate", noP100, 3, 0},
		{"no fit on p100: v100 itself", noP100, 2, 16},
		{"beyond one step", typical, 3.5, 0},
		{"below k80", typical, -0.5, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := SyntheticRate(c.r, c.x)
			if math.Abs(got-c.want) > 1e-12*math.Max(1, c.want) {
				t.Errorf("SyntheticRate(%v, %v) = %v, want %v", c.r, c.x, got, c.want)
			}
		})
	}
}

func TestGavel8Throughputs(t *testing.T) {
	g, g8 := GavelThroughputs(), Gavel8Throughputs()
	if len(g8.Models) != 8 {
		t.Fatalf("models %v, want 8", g8.Models)
	}
	if strings.Join(g8.Types, ",") != strings.Join(g.Types, ",") {
		t.Fatalf("types changed")
	}
	rows := 0
	for key, r := range g.rates {
		rows++
		r8, ok := g8.Rates(key.typ, key.gpus)
		if !ok {
			t.Fatalf("%v: row missing", key)
		}
		// Gavel's measurements reproduced exactly.
		for _, m := range g.Models {
			if r8[m] != r[m] {
				t.Errorf("%v on %s: %v, want Gavel's %v", key, m, r8[m], r[m])
			}
		}
		// Between neighbours a synthetic rate lies between their rates;
		// a neighbour that does not fit leaves it unfit.
		for _, s := range SyntheticModels[:3] {
			lo, hi := measuredAxis[int(s.Position)], measuredAxis[int(s.Position)+1]
			v := r8[s.Name]
			if r[lo] == 0 || r[hi] == 0 {
				if v != 0 {
					t.Errorf("%v on %s: %v, want no fit (%s %v, %s %v)", key, s.Name, v, lo, r[lo], hi, r[hi])
				}
				continue
			}
			if v < math.Min(r[lo], r[hi])*(1-1e-12) || v > math.Max(r[lo], r[hi])*(1+1e-12) {
				t.Errorf("%v on %s: %v outside [%v, %v]", key, s.Name, v, r[lo], r[hi])
			}
		}
		// Beyond V100 the rate moves as P100 -> V100 did, damped: the
		// order v100 -> up-50 -> up-100 follows p100 -> v100.
		a, b, c := r["v100"], r8["syn-v100-up-50"], r8["syn-v100-up-100"]
		if r["p100"] > 0 && r["v100"] > 0 {
			up := r["v100"] >= r["p100"]
			if up != (b >= a) || up != (c >= b) {
				t.Errorf("%v: v100 %v, up-50 %v, up-100 %v against p100 %v: not monotone as p100->v100", key, a, b, c, r["p100"])
			}
			if ratio := c / a; math.Abs(ratio-math.Sqrt(a/r["p100"])) > 1e-9*ratio {
				t.Errorf("%v: up-100/v100 = %v, want sqrt(v100/p100)", key, ratio)
			}
		}
	}
	if rows != 83 {
		t.Errorf("%d rows, want Gavel's 83", rows)
	}
	// Only ResNet-50 at batch 128 with several GPUs misses a model.
	r, _ := g8.Rates("ResNet-50 (batch size 128)", 4)
	if _, ok := r["syn-k80-p100-50"]; ok {
		t.Errorf("ResNet-50 bs128 x4 fits syn-k80-p100-50, though not K80")
	}
	if _, ok := r["syn-p100-v100-33"]; !ok {
		t.Errorf("ResNet-50 bs128 x4 does not fit syn-p100-v100-33, though P100 and V100 fit")
	}
}

func TestThroughputTable(t *testing.T) {
	for _, c := range []struct {
		name   string
		models int
		err    string
	}{
		{"", 3, ""}, {"gavel", 3, ""}, {"gavel-8", 8, ""}, {"a100", 0, `unknown throughput table "a100": want gavel or gavel-8`},
	} {
		tab, err := ThroughputTable(c.name)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%q: error %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || len(tab.Models) != c.models {
			t.Errorf("%q: %v, %v; want %d models", c.name, tab, err, c.models)
		}
		for _, m := range tab.Models {
			if !tab.HasModel(m) {
				t.Errorf("%q: HasModel(%q) false", c.name, m)
			}
		}
		if tab.HasModel("a100") {
			t.Errorf("%q has a100", c.name)
		}
	}
}

func TestGeneratorBurst(t *testing.T) {
	for _, stream := range []Stream{StreamOurs, StreamGavel} {
		g := NewGenerator(GenConfig{Rate: 10, Seed: 3, MultiGPU: true, Jobs: 120, Burst: 100, Stream: stream, Table: Gavel8Throughputs()})
		var last float64
		for k := 0; k < 120; k++ {
			j, err := g.Next()
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case k < 100 && j.Arrival != 0:
				t.Fatalf("%s: burst job %d arrives at %v, want 0", stream, k, j.Arrival)
			case k >= 100 && j.Arrival <= last:
				t.Fatalf("%s: stream job %d arrives at %v, not after %v", stream, k, j.Arrival, last)
			}
			last = j.Arrival
			if _, ok := j.Rate["syn-p100-v100-67"]; !ok {
				t.Fatalf("%s: job %d (%s x%d) has no rate on a synthetic model: %v", stream, k, j.Type, j.GPUs, j.Rate)
			}
		}
	}
}
