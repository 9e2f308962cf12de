package profile

import (
	"fmt"
	"math"
)

// DefaultRefitLogTolerance is how far (in log) a measured pair's EMA may
// move from the value the last fit used before the fit is redone: 0.02 is
// about 2%, a fifth of one measurement's noise (DefaultMeasurementLogSD).
// The pair's own value is always current; only the estimates of other
// pairs lag by less than this. It keeps a round loop that measures every
// running job every round from refitting every round.
const DefaultRefitLogTolerance = 0.02

// WithRefitLogTolerance sets DefaultRefitLogTolerance (>= 0; 0 refits
// after every measurement).
func WithRefitLogTolerance(tol float64) Option { return func(o *options) { o.refitLogTol = tol } }

// Measurement is the state of one pair's measurements, what a caller
// persists to rebuild an estimator (Restore) after a restart.
type Measurement struct {
	// UnitsPerRound is the EMA, exp of the EMA of the log rates.
	UnitsPerRound float64 `json:"units_per_round"`
	// Count is the number of measurements in the EMA.
	Count int `json:"count"`
	// VarFactor is Var(EMA)/Var(one measurement).
	VarFactor float64 `json:"var_factor"`
}

// Measured returns the measurement state of job id on model (false when
// the pair has none).
func (e *Estimator) Measured(id JobID, model string) (Measurement, bool) {
	j, ok := e.jobs[id]
	if !ok {
		return Measurement{}, false
	}
	p := j.pairs[model]
	if p == nil || p.n == 0 {
		return Measurement{}, false
	}
	return Measurement{UnitsPerRound: math.Exp(p.logEMA), Count: p.n, VarFactor: p.varFactor}, true
}

// Restore sets the measurement state of job id on model, as Measured
// returned it: the pair then holds exactly those measurements.
func (e *Estimator) Restore(id JobID, model string, m Measurement) error {
	if m.Count < 1 || !(m.VarFactor > 0 && m.VarFactor <= 1) {
		return fmt.Errorf("restoring the throughput of job %q on %q: count %d, var factor %g: want count >= 1 and var factor in (0, 1]", id, model, m.Count, m.VarFactor)
	}
	_, p, err := e.pairOf(id, model, m.UnitsPerRound, "restoring the throughput")
	if err != nil {
		return err
	}
	p.logEMA, p.n, p.varFactor = math.Log(m.UnitsPerRound), m.Count, m.VarFactor
	e.checkMismatch(id, model, p)
	return nil
}

// Fitted reports whether the estimates are current, that is whether the
// next estimate needs no refit (for tests and benchmarks of callers).
func (e *Estimator) Fitted() bool { return e.fit != nil }
