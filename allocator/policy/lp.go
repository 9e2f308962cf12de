package policy

import (
	"errors"
	"fmt"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
)

// lpTol is the tolerance handed to gonum's simplex; coefficients here are
// normalised throughputs of order 1, so 1e-10 is far below any decision.
const lpTol = 1e-10

// errLP wraps every failure of the LP helper; callers fall back to a
// closed-form allocation and count the fallback.
var errLP = errors.New("policy: lp failed")

// lpMax solves  maximise obj.x  subject to  G x <= h,  x >= 0,  with h >= 0
// (so the slack basis is feasible and no phase 1 is needed). G is row-major
// with len(obj) columns.
func lpMax(obj []float64, g [][]float64, h []float64) ([]float64, error) {
	n, m := len(obj), len(g)
	cols := n + m
	a := mat.NewDense(m, cols, nil)
	for r, row := range g {
		for c, v := range row {
			if v != 0 {
				a.Set(r, c, v)
			}
		}
		a.Set(r, n+r, 1)
	}
	c := make([]float64, cols)
	for k, v := range obj {
		c[k] = -v
	}
	basis := make([]int, m)
	for r := range basis {
		basis[r] = n + r
	}
	b := make([]float64, m)
	copy(b, h)
	_, x, err := simplex(c, a, b, basis)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errLP, err)
	}
	return x[:n], nil
}

// simplex calls gonum and turns a panic on a degenerate shape into an error.
func simplex(c []float64, a *mat.Dense, b []float64, basis []int) (f float64, x []float64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("simplex panicked: %v", r)
		}
	}()
	return lp.Simplex(c, a, b, lpTol, basis)
}
