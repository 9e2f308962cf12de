package solver_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator/solver"
)

// lateRounds are rounds of HEADLINE.md's large setting in hosts of 8
// (fft-rate-w0.25, restarts at 60 s, seed 0, unless said), written out by the simulator
// late in the run, when 400-790 jobs, mostly 4- and 8-GPU gangs, must fill
// every one of its 1,000 GPUs (MinUsage = K(t) = 1,000): the rounds that
// made a full run slow down as jobs left (issue 21). Costs are JSON with
// null for +Inf. Every one is proven within the default limits since the
// class search (classes.go); before it, the search on items stopped at
// its work limit on r02690 (the repair found its optimum, but the bound
// stayed about 2e-4 below) and needed 10-22M units of work on most others.
var lateRounds = []string{
	"large-late-r01979.json.gz",
	"large-late-r02760.json.gz",
	"large-late-r02690.json.gz",
	// The paper's fft (the same setting and seed, rounds 2,563 and 2,607
	// of its run, 784 and 755 jobs): its late rounds were the slowest of
	// a full run (issue 21).
	"large-late-fft-r02563.json.gz",
	"large-late-fft-r02607.json.gz",
	// The default at 0 s restarts (rounds 1,050 and 1,200, 789 and 712
	// jobs, written out from a run of the large setting in session 9),
	// whose late rounds are the hardest.
	"large-late-0s-r01050.json.gz",
	"large-late-0s-r01200.json.gz",
}

func readLateRound(tb testing.TB, file string) *solver.Problem {
	tb.Helper()
	f, err := os.Open(filepath.Join("testdata", file))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	var raw struct {
		Capacity []int      `json:"capacity"`
		Size     []int      `json:"size"`
		MinUsage int        `json:"min_usage"`
		Cost     []*float64 `json:"cost"`
	}
	if err := json.NewDecoder(zr).Decode(&raw); err != nil {
		tb.Fatalf("decoding %s: %v", file, err)
	}
	p := &solver.Problem{Capacity: raw.Capacity, Size: raw.Size, MinUsage: raw.MinUsage, Cost: make([]float64, len(raw.Cost))}
	for k, c := range raw.Cost {
		p.Cost[k] = math.Inf(1)
		if c != nil {
			p.Cost[k] = *c
		}
	}
	return p
}

// hardRounds are later rounds of the same setting under the default at
// 0 s restarts (seed 0), 761-849 jobs, that the first version of the class
// search (session 14) left unproven at the work limit, written out by an
// uncommitted hook in the simulator: on them hundreds of count vectors
// have LP bounds within about 1e-5 of the optimum. Branching by
// pseudo-costs (classes.go) proves 10 of these 14; strong branching at
// every node (session 14's last build) proved 1, and needed 6.4 million
// nodes and 4 minutes without a limit on u003.
var hardRounds = []string{
	"large-hard-0s-u003-n849.json.gz",
	"large-hard-0s-u019-n788.json.gz",
	"large-hard-0s-u021-n797.json.gz",
	"large-hard-0s-u022-n797.json.gz",
	"large-hard-0s-u023-n796.json.gz",
	"large-hard-0s-u024-n795.json.gz",
	"large-hard-0s-u029-n798.json.gz",
	"large-hard-0s-u031-n785.json.gz",
	"large-hard-0s-u032-n789.json.gz",
	"large-hard-0s-u035-n776.json.gz",
	"large-hard-0s-u037-n762.json.gz",
	"large-hard-0s-u038-n761.json.gz",
	"large-hard-0s-u039-n763.json.gz",
	"large-hard-0s-u040-n765.json.gz",
}

// hardProven is how many of hardRounds the default limits prove.
const hardProven = 10

// solveLate solves a late round as allocator.Decide does: K(t)'s packing
// is the first incumbent.
func solveLate(tb testing.TB, p *solver.Problem) solver.Result {
	tb.Helper()
	ctx := context.Background()
	pack, err := solver.MaxUsage(ctx, p, solver.Options{}) // ignores MinUsage
	if err != nil {
		tb.Fatal(err)
	}
	if pack.Usage != p.MinUsage {
		tb.Fatalf("K(t) = %d, the round had %d", pack.Usage, p.MinUsage)
	}
	res, err := solver.Solve(ctx, p, solver.Options{Start: pack.Choice})
	if err != nil {
		tb.Fatal(err)
	}
	checkAnswer(tb, p, res)
	return res
}

// checkAnswer fails unless res is feasible, its objective is its choice's
// and its bound is below it.
func checkAnswer(tb testing.TB, p *solver.Problem, res solver.Result) {
	tb.Helper()
	if !p.Feasible(res.Choice) || res.Objective != p.Objective(res.Choice) || res.Bound > res.Objective {
		tb.Fatalf("answer: feasible %v, objective %v (recomputed %v), bound %v", p.Feasible(res.Choice), res.Objective, p.Objective(res.Choice), res.Bound)
	}
}

// TestLateRounds checks that every late round is proven within the
// default limits (counted in work, not time, so this does not depend on
// the machine) with a feasible answer and a valid bound. Exactness itself
// is checked against brute force and the DP (solver_test.go), where the
// same searches run from the root.
func TestLateRounds(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of search")
	}
	for _, file := range lateRounds {
		t.Run(strings.TrimSuffix(file, ".json.gz"), func(t *testing.T) {
			p := readLateRound(t, file)
			res := solveLate(t, p)
			t.Logf("%d jobs: %v, gap %.3g, %d nodes, work %d", p.N(), res.Status, res.Gap, res.Stats.Nodes, res.Stats.Work)
			if res.Status != solver.Optimal {
				t.Errorf("status %v (gap %.3g after %d nodes), want optimal", res.Status, res.Gap, res.Stats.Nodes)
			}
		})
	}
}

// TestHardRounds checks that the answers on the hard rounds are feasible
// with valid bounds, and that the default limits prove at least
// hardProven of them (counted in work, so the same on every machine).
func TestHardRounds(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of search")
	}
	proven := 0
	for _, file := range hardRounds {
		p := readLateRound(t, file)
		res := solveLate(t, p)
		t.Logf("%s, %d jobs: %v, gap %.3g, %d nodes, work %d", file, p.N(), res.Status, res.Gap, res.Stats.Nodes, res.Stats.Work)
		if res.Status == solver.Optimal {
			proven++
		}
	}
	if proven < hardProven {
		t.Errorf("%d of %d hard rounds proven, want at least %d", proven, len(hardRounds), hardProven)
	}
}

// poorRounds are rounds of the same setting on which the item search's
// eighth of the work limit ends far from the LP bound, so the class search
// must find the good assignments itself; each was written out by an
// uncommitted hook.
var poorRounds = []string{
	// Round 2,599 of the default at 0 s restarts, seed 2 (489 jobs, 245
	// of them 1-GPU): incumbent -2.22, bound -15.92. A first version of
	// the pseudo-costs dived to the child of least guessed bound and found
	// no whole node in 1,516; it reported a gap of 6.16.
	"large-poor-0s-s2-r2599-n489.json.gz",
	// Round 2,477 of the default at 60 s restarts, seed 0 (472 jobs, 239
	// of them 1-GPU): incumbent -5.27, bound -22.92. Before the class
	// search's dive from its root (classes.go), it reached no whole node
	// within the default limits and reported a gap of 3.35; the dive
	// finds -22.915 in 1.4M units of work.
	"large-poor-60s-s0-r2477-n472.json.gz",
}

// TestPoorIncumbentRounds checks that the class search finds an
// assignment within 1e-4 of its bound on each of poorRounds, within the
// default limits.
func TestPoorIncumbentRounds(t *testing.T) {
	if testing.Short() {
		t.Skip("half a second of search per round")
	}
	for _, file := range poorRounds {
		t.Run(strings.TrimSuffix(file, ".json.gz"), func(t *testing.T) {
			p := readLateRound(t, file)
			res := solveLate(t, p)
			t.Logf("%v, objective %.9g, bound %.9g, gap %.3g, %d nodes", res.Status, res.Objective, res.Bound, res.Gap, res.Stats.Nodes)
			if res.Gap > 1e-4 {
				t.Errorf("gap %.3g (objective %.9g, bound %.9g), want at most 1e-4", res.Gap, res.Objective, res.Bound)
			}
		})
	}
}

// BenchmarkLateRounds times the solver on the late rounds of the large
// setting (lateRounds), reporting the nodes, the work and the gap each
// search ends with:
//
//	go test -run '^$' -bench LateRounds -count 3 ./allocator/solver/
func BenchmarkLateRounds(b *testing.B) {
	for _, file := range slices.Concat(lateRounds, hardRounds, poorRounds) {
		b.Run(strings.TrimSuffix(file, ".json.gz"), func(b *testing.B) {
			p := readLateRound(b, file)
			var res solver.Result
			for b.Loop() {
				res = solveLate(b, p)
			}
			reportSearch(b, res)
		})
	}
}

// reportSearch reports where a search ended: its nodes, work, gap and
// whether it proved its round (none of which depends on the machine).
func reportSearch(b *testing.B, res solver.Result) {
	proven := 0.0
	if res.Status == solver.Optimal {
		proven = 1
	}
	b.ReportMetric(float64(res.Stats.Nodes), "nodes")
	b.ReportMetric(float64(res.Stats.Work), "work")
	b.ReportMetric(res.Gap, "gap")
	b.ReportMetric(proven, "proven")
}
