package policy

import (
	"errors"
	"math"
)

// Tolerances of the dense tableau simplex below. Coefficients are
// normalised throughputs (order 1 to 10) and GPU counts (up to thousands).
const (
	// pivotTol: a reduced cost or pivot entry smaller than this is zero.
	pivotTol = 1e-9
	// blandAfter: after this many pivots switch from Dantzig's rule to
	// Bland's, which cannot cycle on degenerate vertices.
	blandAfter = 5000
	// maxPivots: give up (and let the caller fall back) after this many.
	maxPivots = 50000
)

var (
	errUnbounded  = errors.New("policy: lp is unbounded")
	errNoConverge = errors.New("policy: lp did not converge")
)

// tableauMaxDual solves  maximise obj.x  s.t.  G x <= h,  x >= 0,  h >= 0, with
// a dense tableau and the slack basis as the start (feasible since h >= 0).
// It solves the small master programs of shareLP (M+1 rows); Gavel's
// whole programs, 2N+M rows, are far too large for a dense tableau at a
// few thousand jobs (shareLP solves them by column generation). gonum's
// lp.Simplex stays the tests' independent answer.
// It also returns the optimal dual prices y >= 0 of the rows (the reduced
// costs of their slacks).
func tableauMaxDual(obj []float64, g [][]float64, h []float64) ([]float64, []float64, error) {
	n, m := len(obj), len(g)
	w := n + m + 1 // columns: x, slacks, rhs
	t := make([]float64, (m+1)*w)
	row := func(r int) []float64 { return t[r*w : (r+1)*w] }
	basis := make([]int, m)
	for r := 0; r < m; r++ {
		tr := row(r)
		copy(tr, g[r])
		tr[n+r] = 1
		tr[w-1] = h[r]
		basis[r] = n + r
	}
	// Objective row holds reduced costs of the minimisation of -obj.
	z := row(m)
	for c := 0; c < n; c++ {
		z[c] = -obj[c]
	}
	for it := 0; ; it++ {
		if it > maxPivots {
			return nil, nil, errNoConverge
		}
		bland := it > blandAfter
		enter := -1
		best := -pivotTol
		for c := 0; c < n+m; c++ {
			if z[c] < best {
				enter, best = c, z[c]
				if bland {
					break
				}
			}
		}
		if enter < 0 {
			break
		}
		leave := -1
		ratio := math.Inf(1)
		for r := 0; r < m; r++ {
			a := t[r*w+enter]
			if a <= pivotTol {
				continue
			}
			q := t[r*w+w-1] / a
			if q < ratio-1e-12 || (q <= ratio+1e-12 && leave >= 0 && basis[r] < basis[leave]) {
				ratio, leave = q, r
			}
		}
		if leave < 0 {
			return nil, nil, errUnbounded
		}
		pr := row(leave)
		inv := 1 / pr[enter]
		for c := range pr {
			pr[c] *= inv
		}
		pr[enter] = 1
		for r := 0; r <= m; r++ {
			if r == leave {
				continue
			}
			tr := row(r)
			f := tr[enter]
			if f == 0 {
				continue
			}
			for c, v := range pr {
				if v != 0 {
					tr[c] -= f * v
				}
			}
			tr[enter] = 0
		}
		basis[leave] = enter
	}
	x := make([]float64, n)
	for r, b := range basis {
		if b < n {
			x[b] = math.Max(0, t[r*w+w-1])
		}
	}
	y := make([]float64, m)
	for r := range y {
		y[r] = math.Max(0, z[n+r])
	}
	return x, y, nil
}
