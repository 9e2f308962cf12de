package profile

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// JobID names a job to the estimator (the Nomad job ID in the live service).
type JobID string

// Job is what the estimator needs to know about a job besides its data.
type Job struct {
	ID JobID
	// Family groups jobs that scale alike across GPU models ("ResNet-50");
	// "" means none. Jobs of one family share a family-by-model factor.
	Family string
	// GPUs is the gang size d_j; every rate is for all of them.
	GPUs int
	// Tenant is who answers for the job's data (its Nomad namespace, or
	// the operator's tenant; "" none). Another tenant's data may raise
	// the job's estimates, never lower them below what its own tenant's
	// data and the priors say (Throughput).
	Tenant string
}

// The defaults, chosen before the leave-one-out evaluation and not tuned on
// it (README.md says what they do to its numbers).
const (
	// DefaultInteractionLogSD is how far one job's log rate on one model may
	// sit from what the factors predict (the job-by-model residual).
	DefaultInteractionLogSD = 0.3
	// DefaultFamilyLogSD is the prior spread of a family-by-model factor.
	DefaultFamilyLogSD = 0.5
	// DefaultGangLogSD is the prior spread of a gang-size-by-model factor.
	DefaultGangLogSD = 0.5
	// DefaultUnknownModelLogSD is the (weak) prior spread of the factor of
	// a model the prior table does not list.
	DefaultUnknownModelLogSD = 3
	// DefaultMeasurementLogSD is the noise of one measurement of a rate.
	DefaultMeasurementLogSD = 0.1
	// DefaultDeclaredLogSD is how much a declared rate is trusted when it
	// teaches the model (it is still returned as exact for its own pair).
	DefaultDeclaredLogSD = 0.5
	// DefaultEMAAlpha weighs a new measurement against the running value;
	// 0.5 is Gavel's choice.
	DefaultEMAAlpha = 0.5
	// DefaultMismatchRatio flags a declared rate more than this factor away
	// from the measured one, in either direction.
	DefaultMismatchRatio = 1.5
)

// MaxUnitsPerRound bounds a rate, as jobmeta.MaxThroughput does.
const MaxUnitsPerRound = 1e12

// jobPriorPrecision keeps a job factor's normal equations non-singular; it
// is a prior of sd ~1000 in log space, that is no information.
const jobPriorPrecision = 1e-6

type options struct {
	interactionLogSD, familyLogSD, gangLogSD, unknownModelLogSD float64
	measurementLogSD, declaredLogSD, emaAlpha, mismatchRatio    float64
	refitLogTol                                                 float64
}

func defaultOptions() options {
	return options{
		interactionLogSD: DefaultInteractionLogSD, familyLogSD: DefaultFamilyLogSD,
		gangLogSD: DefaultGangLogSD, unknownModelLogSD: DefaultUnknownModelLogSD,
		measurementLogSD: DefaultMeasurementLogSD, declaredLogSD: DefaultDeclaredLogSD,
		emaAlpha: DefaultEMAAlpha, mismatchRatio: DefaultMismatchRatio, refitLogTol: DefaultRefitLogTolerance,
	}
}

// Option changes one of the estimator's defaults.
type Option func(*options)

// WithInteractionLogSD sets the job-by-model residual spread (> 0).
func WithInteractionLogSD(sd float64) Option { return func(o *options) { o.interactionLogSD = sd } }

// WithFamilyLogSD sets the prior spread of family-by-model factors (> 0).
func WithFamilyLogSD(sd float64) Option { return func(o *options) { o.familyLogSD = sd } }

// WithGangLogSD sets the prior spread of gang-size-by-model factors (> 0).
func WithGangLogSD(sd float64) Option { return func(o *options) { o.gangLogSD = sd } }

// WithMeasurementLogSD sets the noise of one measurement (> 0).
func WithMeasurementLogSD(sd float64) Option { return func(o *options) { o.measurementLogSD = sd } }

// WithEMAAlpha sets the weight of a new measurement, in (0, 1].
func WithEMAAlpha(alpha float64) Option { return func(o *options) { o.emaAlpha = alpha } }

// WithMismatchRatio sets the factor (> 1) beyond which a declared rate is
// flagged against the measured one.
func WithMismatchRatio(r float64) Option { return func(o *options) { o.mismatchRatio = r } }

func (o options) validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"interaction log sd", o.interactionLogSD}, {"family log sd", o.familyLogSD},
		{"gang log sd", o.gangLogSD}, {"unknown model log sd", o.unknownModelLogSD},
		{"measurement log sd", o.measurementLogSD}, {"declared log sd", o.declaredLogSD},
	} {
		if !(f.v > 0 && f.v <= MaxLogSD) {
			return fmt.Errorf("profile: %s = %g: want a number in (0, %g]", f.name, f.v, float64(MaxLogSD))
		}
	}
	if !(o.emaAlpha > 0 && o.emaAlpha <= 1) {
		return fmt.Errorf("profile: EMA alpha = %g: want a number in (0, 1]", o.emaAlpha)
	}
	if !(o.mismatchRatio > 1 && !math.IsInf(o.mismatchRatio, 0)) {
		return fmt.Errorf("profile: mismatch ratio = %g: want a finite number > 1", o.mismatchRatio)
	}
	if !(o.refitLogTol >= 0 && o.refitLogTol <= MaxLogSD) {
		return fmt.Errorf("profile: refit log tolerance = %g: want a number in [0, %g]", o.refitLogTol, float64(MaxLogSD))
	}
	return nil
}

// pair is what one job has on one model.
type pair struct {
	declared float64 // 0: none
	logEMA   float64 // EMA of log(measured rate), valid when n > 0
	n        int
	// varFactor is Var(EMA)/Var(one measurement): 1 after one, then
	// (1-a)²v + a², which tends to a/(2-a).
	varFactor float64
	// fitLog is the logEMA the last fit used (fitted: it used one).
	fitLog float64
	fitted bool
}

type jobState struct {
	Job
	pairs map[string]*pair
}

// Estimator learns throughputs across jobs. It is not safe for concurrent
// use: the round loop owns it.
type Estimator struct {
	opts       options
	priors     *Priors
	models     map[string]bool
	jobs       map[JobID]*jobState
	mismatches map[mismatchKey]Mismatch
	fit        *fitResult // nil when data changed since the last fit
	// own are the fits to one tenant's data alone, for fit (ownOf).
	own   map[string]*fitResult
	ownOf *fitResult
	// solvingOwn keeps an own fit from marking the pairs it used.
	solvingOwn bool
}

type mismatchKey struct {
	job   JobID
	model string
}

// New returns an estimator with the given prior table (nil: none; use
// GavelPriors().With(operatorTable) for both).
func New(priors *Priors, opts ...Option) (*Estimator, error) {
	o := defaultOptions()
	for _, f := range opts {
		f(&o)
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	return &Estimator{opts: o, priors: priors, models: map[string]bool{},
		jobs: map[JobID]*jobState{}, mismatches: map[mismatchKey]Mismatch{}}, nil
}

// ErrUnknownJob means a job was used before AddJob.
var ErrUnknownJob = errors.New("profile: unknown job")

// AddModels makes GPU models known, so jobs get estimates on them before
// anyone has run there (the live service adds the cluster's models).
func (e *Estimator) AddModels(models ...string) error {
	for _, m := range models {
		if err := checkModel(m); err != nil {
			return err
		}
	}
	for _, m := range models {
		if !e.models[m] {
			e.models[m] = true
			e.fit = nil
		}
	}
	return nil
}

func checkModel(m string) error {
	if m == "" || len(m) > maxName || !printable(m) {
		return fmt.Errorf("profile: GPU model %q: want 1 to %d printable characters (the Nomad device name)", m, maxName)
	}
	return nil
}

// AddJob registers a job. Adding it again with the same gang size may
// change its family; a different gang size is an error, since every rate
// the estimator holds is for the old gang.
func (e *Estimator) AddJob(j Job) error {
	if j.ID == "" {
		return fmt.Errorf("profile: job ID is empty: give the Nomad job ID")
	}
	if j.GPUs < 1 {
		return fmt.Errorf("profile: job %q: GPUs = %d: want the gang size, >= 1", j.ID, j.GPUs)
	}
	if len(j.Family) > maxName || !printable(j.Family) {
		return fmt.Errorf("profile: job %q: family %q: want at most %d printable characters", j.ID, j.Family, maxName)
	}
	if old, ok := e.jobs[j.ID]; ok {
		if old.GPUs != j.GPUs {
			return fmt.Errorf("profile: job %q: GPUs = %d, but it was added with %d: forget the job first", j.ID, j.GPUs, old.GPUs)
		}
		old.Family, old.Tenant = j.Family, j.Tenant
	} else {
		e.jobs[j.ID] = &jobState{Job: j, pairs: map[string]*pair{}}
		if e.fit != nil && e.fit.ix.covers(j) {
			// A job without data whose factors the fit already has
			// changes no estimate: keep the fit (arrivals are frequent).
			return nil
		}
	}
	e.fit = nil
	return nil
}

// Forget drops a job and everything learned from it.
func (e *Estimator) Forget(id JobID) {
	j, ok := e.jobs[id]
	if !ok {
		return
	}
	if len(j.pairs) == 0 {
		// It taught the fit nothing; its factors, if only it had them,
		// are left with their priors, which changes no other estimate.
		delete(e.jobs, id)
		return
	}
	delete(e.jobs, id)
	for k := range e.mismatches {
		if k.job == id {
			delete(e.mismatches, k)
		}
	}
	e.fit = nil
}

func (e *Estimator) pairOf(id JobID, model string, unitsPerRound float64, what string) (*jobState, *pair, error) {
	j, ok := e.jobs[id]
	if !ok {
		return nil, nil, fmt.Errorf("%s of job %q: %w: add it first", what, id, ErrUnknownJob)
	}
	if err := checkModel(model); err != nil {
		return nil, nil, fmt.Errorf("%s of job %q: %w", what, id, err)
	}
	if !(unitsPerRound > 0) || unitsPerRound > MaxUnitsPerRound {
		return nil, nil, fmt.Errorf("%s of job %q on %q: units per round = %g: want a finite number > 0 and at most %g", what, id, model, unitsPerRound, float64(MaxUnitsPerRound))
	}
	p := j.pairs[model]
	if p == nil {
		p = &pair{}
		j.pairs[model] = p
	}
	e.models[model] = true
	e.fit = nil
	return j, p, nil
}

// Declare records a job's declared rate on a model (fft.throughput). It
// overrides measurements for that pair and teaches the model, with less
// weight than a measurement, until the pair is measured.
func (e *Estimator) Declare(id JobID, model string, unitsPerRound float64) error {
	_, p, err := e.pairOf(id, model, unitsPerRound, "declaring the throughput")
	if err != nil {
		return err
	}
	p.declared = unitsPerRound
	e.checkMismatch(id, model, p)
	return nil
}

// Measure records one measured rate of a job on a model: the first
// replaces any estimate, later ones enter an EMA in log space.
func (e *Estimator) Measure(id JobID, model string, unitsPerRound float64) error {
	kept := e.fit
	_, p, err := e.pairOf(id, model, unitsPerRound, "measuring the throughput")
	if err != nil {
		return err
	}
	defer func() {
		// A measured pair's own value is always current; the fit of the
		// others is kept while this pair moves less than the tolerance.
		if kept != nil && p.fitted && math.Abs(p.logEMA-p.fitLog) <= e.opts.refitLogTol {
			e.fit = kept
		}
	}()
	a := e.opts.emaAlpha
	if p.n == 0 {
		p.logEMA, p.varFactor = math.Log(unitsPerRound), 1
	} else {
		p.logEMA = (1-a)*p.logEMA + a*math.Log(unitsPerRound)
		p.varFactor = (1-a)*(1-a)*p.varFactor + a*a
	}
	p.n++
	e.checkMismatch(id, model, p)
	return nil
}

func (e *Estimator) checkMismatch(id JobID, model string, p *pair) {
	k := mismatchKey{id, model}
	delete(e.mismatches, k)
	if p.declared == 0 || p.n == 0 {
		return
	}
	if math.Abs(math.Log(p.declared)-p.logEMA) > math.Log(e.opts.mismatchRatio) {
		e.mismatches[k] = Mismatch{Job: id, Model: model, DeclaredUnitsPerRound: p.declared,
			MeasuredUnitsPerRound: math.Exp(p.logEMA), Measurements: p.n}
	}
}

// Mismatch is the warning that a job's declared rate on a model is far from
// what was measured there.
type Mismatch struct {
	Job                   JobID   `json:"job"`
	Model                 string  `json:"model"`
	DeclaredUnitsPerRound float64 `json:"declared_units_per_round"`
	MeasuredUnitsPerRound float64 `json:"measured_units_per_round"`
	Measurements          int     `json:"measurements"`
}

// Ratio is declared/measured.
func (m Mismatch) Ratio() float64 { return m.DeclaredUnitsPerRound / m.MeasuredUnitsPerRound }

func (m Mismatch) String() string {
	return fmt.Sprintf("job %q on %q: declared fft.throughput %g units/round is %.2fx the measured %.4g (%d measurements); correct the declaration or remove it to use the measurement",
		m.Job, m.Model, m.DeclaredUnitsPerRound, m.Ratio(), m.MeasuredUnitsPerRound, m.Measurements)
}

// Mismatches returns the current warnings, sorted by job and model. A
// warning disappears when the measurements come back within the ratio.
func (e *Estimator) Mismatches() []Mismatch {
	out := make([]Mismatch, 0, len(e.mismatches))
	for _, m := range e.mismatches {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Job != out[j].Job {
			return out[i].Job < out[j].Job
		}
		return out[i].Model < out[j].Model
	})
	return out
}

// Throughput is job id's rate on model: declared if declared, else
// measured if measured, else estimated from the fit. Source is
// SourceUnknown when there is none: the job has no data at all (see
// LearnModel) or the model is not known.
func (e *Estimator) Throughput(id JobID, model string) Throughput {
	j, ok := e.jobs[id]
	if !ok {
		return Throughput{}
	}
	if p := j.pairs[model]; p != nil {
		switch {
		case p.declared > 0:
			return Throughput{UnitsPerRound: p.declared, Source: SourceDeclared, Measurements: p.n}
		case p.n > 0:
			return Throughput{UnitsPerRound: math.Exp(p.logEMA), LogSD: e.opts.measurementLogSD * math.Sqrt(p.varFactor),
				Source: SourceMeasured, Measurements: p.n}
		}
	}
	f := e.fitted()
	mean, sd, ok := f.predict(j, model)
	if !ok {
		return Throughput{}
	}
	if own := e.ownFit(j.Tenant); own != nil {
		// Robust to one tenant's jobs (issue 20): a tenant whose jobs
		// report near-zero progress on a model would otherwise pull every
		// other tenant's estimate there down, and a job estimated slow on
		// a model is never run there to be measured, so the lie lasts. An
		// estimate pulled up is measured, and corrected, the first round
		// the job runs there.
		if m, s, ok := own.predict(j, model); ok && m > mean {
			f, mean, sd = own, m, s
		}
	}
	src := SourceEstimated
	if f.modelObs[model] == 0 {
		src = SourcePrior
	}
	return Throughput{UnitsPerRound: math.Exp(mean), LogSD: sd, Source: src, Measurements: f.measurements}
}

// ownFit is the fit to tenant's data alone, nil when no other tenant has
// data (the full fit is then the same).
func (e *Estimator) ownFit(tenant string) *fitResult {
	if tenant == "" {
		return nil
	}
	full := e.fitted()
	if e.ownOf != full {
		e.own, e.ownOf = map[string]*fitResult{}, full
	}
	if f, ok := e.own[tenant]; ok {
		return f
	}
	mine := make(map[JobID]*jobState, len(e.jobs))
	others := false
	for id, j := range e.jobs {
		switch {
		case j.Tenant == tenant:
			mine[id] = j
		case len(j.pairs) > 0:
			others = true
		}
	}
	var f *fitResult
	if others {
		all := e.jobs
		e.jobs, e.solvingOwn = mine, true
		f = e.solve()
		e.jobs, e.solvingOwn = all, false
	}
	e.own[tenant] = f
	return f
}

// Throughputs is Throughput on each of models, keyed by model; models
// without a value are left out.
func (e *Estimator) Throughputs(id JobID, models []string) map[string]Throughput {
	out := make(map[string]Throughput, len(models))
	for _, m := range models {
		if t := e.Throughput(id, m); t.Source != SourceUnknown {
			out[m] = t
		}
	}
	return out
}

func (e *Estimator) fitted() *fitResult {
	if e.fit == nil {
		e.fit = e.solve()
	}
	return e.fit
}
