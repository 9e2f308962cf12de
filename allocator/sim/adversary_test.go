package sim

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/policy"
	"github.com/nomad-fft/nomad-fft/allocator/workload"
)

func TestParseAdversaries(t *testing.T) {
	for _, tc := range []struct {
		in, err string
		n       int
	}{
		{"over-report:0.1,inflate:0.1,poison:0.1,split:0.1", "", 4},
		{" split:1 ", "", 1},
		{"lie:0.1", `unknown kind "lie"`, 0},
		{"split", "expected KIND:FRACTION", 0},
		{"split:0", "expected KIND:FRACTION", 0},
		{"split:x", "expected KIND:FRACTION", 0},
		{"split:0.6,inflate:0.6", "sum to 1.2", 0},
		{"split:0.1,split:0.2", "given twice", 0},
	} {
		got, err := ParseAdversaries(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || len(got) != tc.n {
			t.Errorf("%q: %v, %v; want %d adversaries", tc.in, got, err, tc.n)
		}
	}
}

// Each kind's fraction of the jobs lies, within sampling error, and a job's lie depends on
// its index alone.
func TestLiarOfFractions(t *testing.T) {
	advs, err := ParseAdversaries("over-report:0.1,inflate:0.2,poison:0.05,split:0.1")
	if err != nil {
		t.Fatal(err)
	}
	const n = 20000
	count := map[AdversaryKind]int{}
	for i := 0; i < n; i++ {
		k := liarOf(advs, i)
		if k != liarOf(advs, i) {
			t.Fatalf("job %d lies differently on a second look", i)
		}
		count[k]++
	}
	for _, a := range advs {
		got := float64(count[a.Kind]) / n
		if sd := math.Sqrt(a.Fraction * (1 - a.Fraction) / n); math.Abs(got-a.Fraction) > 4*sd {
			t.Errorf("%s: %.4f of the jobs lie, want %.2f", a.Kind, got, a.Fraction)
		}
	}
}

// Honest jobs (true reports; true declared rates, or rates learned online) are never
// distrusted by the overrun rule (allocator/loop/claims.go), restarts charged.
func TestHonestJobsAreNeverDistrusted(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 2 simulations")
	}
	for _, learn := range []bool{false, true} {
		p, err := policy.New(policy.DefaultName, policy.Options{RestartSeconds: 30})
		if err != nil {
			t.Fatal(err)
		}
		lg, err := Run(context.Background(), p, workload.NewGenerator(workload.GenConfig{Rate: 1, Seed: 7, MultiGPU: true, Jobs: 60}),
			Config{Cluster: []allocator.Model{{Name: "v100", GPUs: 4}, {Name: "p100", GPUs: 4}, {Name: "k80", GPUs: 4}}, RestartSeconds: 30,
				KeepRecords: true, Learn: learn})
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range lg.Records {
			for _, l := range rec.Jobs {
				if l.Distrusted != "" {
					t.Fatalf("learn %v: round %d distrusts honest job %s: %s", learn, rec.Round, l.ID, l.Distrusted)
				}
			}
		}
	}
}
