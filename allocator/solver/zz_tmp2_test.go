package solver_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator/solver"
)

func TestAllTmp(t *testing.T) {
	files, _ := filepath.Glob("testdata/large-hard-*.json.gz")
	l, _ := filepath.Glob("testdata/large-[ls]*.json.gz")
	files = append(l, files...)
	proven, work, nodes := 0, 0, 0
	var total, worst time.Duration
	maxGap := 0.0
	for _, f := range files {
		p := readLateRound(t, filepath.Base(f))
		ctx := context.Background()
		pack, _ := solver.MaxUsage(ctx, p, solver.Options{})
		t0 := time.Now()
		res, _ := solver.Solve(ctx, p, solver.Options{Start: pack.Choice})
		d := time.Since(t0)
		checkAnswer(t, p, res)
		total += d
		worst = max(worst, d)
		if res.Status == solver.Optimal {
			proven++
		}
		maxGap = max(maxGap, res.Gap)
		work += res.Stats.Work
		nodes += res.Stats.Nodes
		if os.Getenv("V") != "" {
			t.Logf("%s %v gap %.3g nodes %d work %d %v", filepath.Base(f), res.Status, res.Gap, res.Stats.Nodes, res.Stats.Work, d.Round(time.Millisecond))
		}
	}
	t.Logf("REL=%s proven %d/%d maxgap %.3g nodes %d work %d time %v worst %v", os.Getenv("FFT_REL"), proven, len(files), maxGap, nodes, work, total.Round(time.Millisecond), worst.Round(time.Millisecond))
}
