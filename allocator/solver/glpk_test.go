package solver_test

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator/instancegen"
	"github.com/nomad-fft/nomad-fft/allocator/solver"
)

// writeLP writes p in CPLEX LP format, the same program the solver solves:
// binaries x_j_i for admissible pairs, (1a) per item, (1b) per model and
// (7) with p.MinUsage.
func writeLP(path string, p *solver.Problem) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	m, n := p.M(), p.N()
	name := func(j, i int) string { return fmt.Sprintf("x_%d_%d", j, i) }
	fmt.Fprintln(w, "Minimize\n obj:")
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			if p.Allowed(j, i) && p.Size[j] <= p.Capacity[i] {
				fmt.Fprintf(w, " %+.17g %s\n", p.Cost[j*m+i], name(j, i))
			}
		}
	}
	fmt.Fprintln(w, "Subject To")
	for j := 0; j < n; j++ {
		fmt.Fprintf(w, " one_%d: 0 x_%d_none", j, j)
		for i := 0; i < m; i++ {
			if p.Allowed(j, i) && p.Size[j] <= p.Capacity[i] {
				fmt.Fprintf(w, " + %s", name(j, i))
			}
		}
		fmt.Fprintln(w, " <= 1")
	}
	for i := 0; i < m; i++ {
		fmt.Fprintf(w, " cap_%d: 0 x_none_%d", i, i)
		for j := 0; j < n; j++ {
			if p.Allowed(j, i) && p.Size[j] <= p.Capacity[i] {
				fmt.Fprintf(w, " + %d %s", p.Size[j], name(j, i))
			}
		}
		fmt.Fprintf(w, " <= %d\n", p.Capacity[i])
	}
	fmt.Fprint(w, " use: 0 x_none_none")
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			if p.Allowed(j, i) && p.Size[j] <= p.Capacity[i] {
				fmt.Fprintf(w, " + %d %s", p.Size[j], name(j, i))
			}
		}
	}
	fmt.Fprintf(w, " >= %d\nBinary\n", p.MinUsage)
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			if p.Allowed(j, i) && p.Size[j] <= p.Capacity[i] {
				fmt.Fprintf(w, " %s\n", name(j, i))
			}
		}
	}
	fmt.Fprintln(w, "End")
	return w.Flush()
}

// glpsolObjective runs GLPK on the LP file and reads the objective from
// its plain-text solution file (full precision).
func glpsolObjective(t *testing.T, lp string) float64 {
	t.Helper()
	sol := lp + ".sol"
	out, err := exec.Command("glpsol", "--lp", lp, "--mipgap", "0", "--tmlim", "300", "-w", sol).CombinedOutput()
	if err != nil {
		t.Fatalf("glpsol: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "INTEGER OPTIMAL SOLUTION FOUND") {
		t.Fatalf("glpsol did not prove optimality:\n%s", out)
	}
	data, err := os.ReadFile(sol)
	if err != nil {
		t.Fatal(err)
	}
	// The "s mip ROWS COLS STATUS OBJ" line of GLPK's solution format.
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 6 && f[0] == "s" && f[1] == "mip" {
			v, err := strconv.ParseFloat(f[5], 64)
			if err != nil {
				t.Fatalf("parsing %q: %v", line, err)
			}
			return v
		}
	}
	t.Fatalf("no objective line in %s:\n%s", sol, data)
	return 0
}

// TestAgainstGLPK checks medium rounds against an independent MILP solver.
// glpsol comes from Debian's glpk-utils; .ci/run installs it, and
// FFT_REQUIRE_GLPSOL=1 (set there) turns its absence into a failure.
func TestAgainstGLPK(t *testing.T) {
	if _, err := exec.LookPath("glpsol"); err != nil {
		if os.Getenv("FFT_REQUIRE_GLPSOL") != "" {
			t.Fatal("glpsol not on PATH; install Debian's glpk-utils")
		}
		t.Skip("glpsol not on PATH (apt-get install glpk-utils)")
	}
	for _, tc := range []struct {
		spec instancegen.Spec
		seed uint64
	}{
		{instancegen.Spec{Jobs: 200, Models: 6, GPUs: 60}, 1},
		{instancegen.Spec{Jobs: 200, Models: 6, GPUs: 120}, 2},
		{instancegen.Spec{Jobs: 300, Models: 8, GPUs: 100}, 3},
		{instancegen.Spec{Jobs: 400, Models: 6, GPUs: 200}, 4},
		{instancegen.Spec{Jobs: 1000, Models: 8, GPUs: 400}, 5},
		// Many jobs per GPU: the root LP is solved on priced items.
		{instancegen.Spec{Jobs: 800, Models: 6, GPUs: 100}, 6},
		{instancegen.Spec{Jobs: 1200, Models: 4, GPUs: 120}, 7},
	} {
		t.Run(fmt.Sprintf("%dx%d/%dgpus/seed%d", tc.spec.Jobs, tc.spec.Models, tc.spec.GPUs, tc.seed), func(t *testing.T) {
			in := instancegen.Generate(rand.New(rand.NewPCG(tc.seed, 7)), tc.spec)
			p, err := in.Problem()
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			pack, err := solver.MaxUsage(ctx, p, solver.Options{})
			if err != nil {
				t.Fatal(err)
			}
			p.MinUsage = pack.Usage
			res, err := solver.Solve(ctx, p, solver.Options{Start: pack.Choice})
			if err != nil {
				t.Fatal(err)
			}
			if !p.Feasible(res.Choice) {
				t.Fatal("solver answer is infeasible")
			}
			lp := filepath.Join(t.TempDir(), "round.lp")
			if err := writeLP(lp, p); err != nil {
				t.Fatal(err)
			}
			want := glpsolObjective(t, lp)
			if rel := math.Abs(res.Objective-want) / math.Max(1, math.Abs(want)); rel > 1e-6 {
				t.Fatalf("objective %.10g, glpsol %.10g (relative difference %.3g)", res.Objective, want, rel)
			}
			t.Logf("objective %.10g, glpsol %.10g, K=%d, nodes %d", res.Objective, want, pack.Usage, res.Stats.Nodes)
		})
	}
}
