package solver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator/solver"
)

// siaRounds are rounds of the sia baseline in HEADLINE.md's large setting
// (1,000 GPUs in hosts of 8, 4,000 jobs x 8 models, restarts at 60 s, seed
// 0), written out by the simulator at about round 210, when 2,190 jobs
// wait and sia's program (no usage bound, an LP gap of about 1e-4) leaves
// about a thousand of them free at each of thousands of nodes that dive
// hundreds of levels deep (issue 21): the rounds that made sia's runs
// slow. Costs are JSON with null for +Inf, as lateRounds. The search on
// items proved sia-002 in about 1,000 nodes and stopped at the work limit
// on sia-003; since the class search (classes.go) both are proven in a
// few hundred.
var siaRounds = []string{
	"large-sia-002-n2194.json.gz",
	"large-sia-003-n2190.json.gz",
}

// solveSia solves a sia round as policy.Sia does (no start, default
// limits) and checks the answer.
func solveSia(tb testing.TB, p *solver.Problem) solver.Result {
	tb.Helper()
	res, err := solver.Solve(context.Background(), p, solver.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	checkAnswer(tb, p, res)
	return res
}

// TestSiaRounds checks that sia's large rounds are proven within the
// default limits, with feasible answers and valid bounds.
func TestSiaRounds(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of search")
	}
	for _, file := range siaRounds {
		t.Run(strings.TrimSuffix(file, ".json.gz"), func(t *testing.T) {
			p := readLateRound(t, file)
			res := solveSia(t, p)
			t.Logf("%d jobs: %v, gap %.3g, %d nodes, work %d", p.N(), res.Status, res.Gap, res.Stats.Nodes, res.Stats.Work)
			if res.Status != solver.Optimal {
				t.Errorf("status %v (gap %.3g after %d nodes and %d work), want optimal", res.Status, res.Gap, res.Stats.Nodes, res.Stats.Work)
			}
		})
	}
}

// BenchmarkSiaRounds times the solver on sia's large rounds (siaRounds),
// reporting the nodes, the work and the gap each search ends with (they do
// not depend on the machine):
//
//	go test -run '^$' -bench SiaRounds -benchtime 3x -count 3 ./allocator/solver/
func BenchmarkSiaRounds(b *testing.B) {
	for _, file := range siaRounds {
		b.Run(strings.TrimSuffix(file, ".json.gz"), func(b *testing.B) {
			p := readLateRound(b, file)
			var res solver.Result
			b.ReportAllocs()
			for b.Loop() {
				res = solveSia(b, p)
			}
			reportSearch(b, res)
		})
	}
}
