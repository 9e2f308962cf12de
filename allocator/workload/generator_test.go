package workload

import (
	"math"
	"testing"
)

func TestGenerator(t *testing.T) {
	for _, stream := range []Stream{StreamOurs, StreamGavel} {
		t.Run(string(stream), func(t *testing.T) {
			g := NewGenerator(GenConfig{Rate: 2, Seed: 11, MultiGPU: true, Jobs: 20000, Stream: stream})
			count := map[int]int{}
			var last float64
			var n int
			long := 0
			tab := GavelThroughputs()
			for {
				j, err := g.Next()
				if err != nil {
					break
				}
				n++
				count[j.GPUs]++
				if j.GPUs > 1 && !tab.Distributed[j.Type] {
					t.Fatalf("job %s: %d GPUs for non-distributed type %q", j.ID, j.GPUs, j.Type)
				}
				if j.Arrival < last {
					t.Fatalf("arrivals not sorted at %s", j.ID)
				}
				last = j.Arrival
				if j.Work/j.Rate["v100"] > 60*1000*1.0001 {
					long++
				}
			}
			if n != 20000 {
				t.Fatalf("generated %d jobs, want 20000", n)
			}
			// Mean inter-arrival 1800 s at 2 jobs/hour.
			if mean := last / float64(n-1); math.Abs(mean-1800)/1800 > 0.05 {
				t.Errorf("mean inter-arrival %v s, want about 1800", mean)
			}
			// Gavel draws the scale factor first for every job: 30% multi-GPU.
			multi := float64(n-count[1]) / float64(n)
			if want := 0.3; math.Abs(multi-want) > 0.02 {
				t.Errorf("multi-GPU fraction %v, want about %v", multi, want)
			}
			if frac := float64(long) / float64(n); math.Abs(frac-0.2) > 0.02 {
				t.Errorf("long-job fraction %v, want about 0.2", frac)
			}
		})
	}
}

// TestSpreadRates: Gavel's unconsolidated rates, by job type and GPUs, for
// multi-GPU rows only; a model Gavel's table lacks an entry for has none.
func TestSpreadRates(t *testing.T) {
	tb := GavelThroughputs()
	cases := []struct {
		typ   string
		gpus  int
		model string
		want  float64
	}{
		{"LM (batch size 5)", 2, "v100", 40.35214697555348},
		{"LM (batch size 5)", 8, "k80", 63.18665300336181},
		{"ResNet-50 (batch size 64)", 2, "k80", 0},
		{"LM (batch size 5)", 1, "v100", 0},
		{"A3C", 2, "v100", 0},
	}
	for _, tc := range cases {
		if got := tb.SpreadRates(tc.typ, tc.gpus)[tc.model]; got != tc.want {
			t.Errorf("SpreadRates(%q, %d)[%s] = %v, want %v", tc.typ, tc.gpus, tc.model, got, tc.want)
		}
	}
	if got := Gavel8Throughputs().SpreadRates("LM (batch size 5)", 2)["v100"]; got != 40.35214697555348 {
		t.Errorf("gavel-8 table: spread v100 = %v, want Gavel's", got)
	}
}
