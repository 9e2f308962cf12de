package solver

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Problem is one round's integer program in solver form:
//
//	minimise   sum_j sum_i Cost[j*M+i] * x_ji
//	subject to sum_i x_ji <= 1                    for every item j   (1a)
//	           sum_j Size[j] * x_ji <= Capacity[i] for every model i  (1b)
//	           sum_j sum_i Size[j] * x_ji >= MinUsage                (7)
//	           x_ji in {0, 1}, and x_ji = 0 where Cost[j*M+i] = +Inf.
//
// M = len(Capacity), N = len(Size). Leaving an item out costs 0.
type Problem struct {
	Capacity []int
	Size     []int
	Cost     []float64
	MinUsage int
}

// M is the number of models, N the number of items.
func (p *Problem) M() int { return len(p.Capacity) }
func (p *Problem) N() int { return len(p.Size) }

// Allowed reports whether item j may use model i.
func (p *Problem) Allowed(j, i int) bool { return !math.IsInf(p.Cost[j*len(p.Capacity)+i], 1) }

// Errors returned by the solver. Shape mismatches are programming errors
// and panic instead.
var (
	ErrInfeasible = errors.New("solver: no assignment reaches the minimum usage")
	ErrBadCost    = errors.New("solver: cost is NaN or -Inf")
	ErrBadSize    = errors.New("solver: size or capacity is negative or zero")
)

func (p *Problem) check() error {
	m, n := p.M(), p.N()
	if len(p.Cost) != n*m {
		panic(fmt.Sprintf("solver: len(Cost) = %d, want N*M = %d", len(p.Cost), n*m))
	}
	for i, y := range p.Capacity {
		if y < 0 {
			return fmt.Errorf("%w: capacity[%d] = %d", ErrBadSize, i, y)
		}
	}
	for j, d := range p.Size {
		if d <= 0 {
			return fmt.Errorf("%w: size[%d] = %d", ErrBadSize, j, d)
		}
	}
	for k, c := range p.Cost {
		if math.IsNaN(c) || math.IsInf(c, -1) {
			return fmt.Errorf("%w: item %d model %d", ErrBadCost, k/m, k%m)
		}
	}
	return nil
}

// Status says how far the solver got.
type Status int

const (
	// Optimal: the search finished; Gap is within tolerance of 0.
	Optimal Status = iota + 1
	// Feasible: a limit stopped the search; Gap bounds the distance to
	// the optimum.
	Feasible
)

func (s Status) String() string {
	switch s {
	case Optimal:
		return "optimal"
	case Feasible:
		return "feasible"
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// MarshalText makes Status readable in JSON.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads what MarshalText wrote.
func (s *Status) UnmarshalText(b []byte) error {
	for _, v := range []Status{Optimal, Feasible} {
		if v.String() == string(b) {
			*s = v
			return nil
		}
	}
	return fmt.Errorf("solver: unknown status %q", b)
}

// Stats describe the work one solve did.
type Stats struct {
	Runtime time.Duration `json:"runtime_ns"`
	// Augmentations counts shortest-path augmentations over all LPs.
	Augmentations int `json:"augmentations"`
	// Nodes counts branch-and-bound nodes, the root included.
	Nodes int `json:"nodes"`
	// Work is the search's work in Options.WorkLimit's units.
	Work int `json:"work,omitempty"`
	// Core is the number of items left free after reduced-cost fixing at
	// the first node that branched (0 when the root LP was integral).
	Core int `json:"core"`
	// ColdStarts counts child LPs whose warm start was not optimal and
	// were solved again from scratch.
	ColdStarts int `json:"cold_starts"`
}

// Result is the solver's answer.
type Result struct {
	// Choice[j] is the model of item j, or -1 when it is left out.
	Choice    []int
	Objective float64
	// Bound is a proven lower bound on the optimum.
	Bound float64
	// Gap is (Objective - Bound) / max(1, |Objective|), never negative.
	Gap    float64
	Usage  int
	Status Status
	Stats  Stats
}
