package profile

import (
	"math"
	"math/bits"
	"sort"

	"gonum.org/v1/gonum/mat"
)

// The model, in log space, for job j (family f, gang class s) on model m:
//
//	log theta_jm = a_j + b_m + c_fm + g_sm + h_fsm + e_jm,  e_jm ~ N(0, interaction²)
//
// a_j is flat; b_m ~ N(log prior speed, prior sd²) or N(0, unknown-model
// sd²); c_fm ~ N(family prior offset, family sd²), absent for f = "";
// g_sm ~ N(0, gang sd²) with s = floor(log2 gpus), absent for one GPU;
// h_fsm ~ N(0, gang sd²), the family's own scaling, absent when either is. Each
// observation (a measured EMA, or a declared rate) weighs 1/(interaction² +
// its own noise²). The fit is the posterior mode (ridge least squares);
// the job factors are eliminated first (Schur complement), so the dense
// system is only as large as the model-side factors.

type famModel struct{ family, model string }
type gangModel struct {
	class int
	model string
}

type famGangModel struct {
	family string
	class  int
	model  string
}

type paramIndex struct {
	model map[string]int
	// prior marks the models with a row in the prior table.
	prior   map[string]bool
	family  map[famModel]int
	gang    map[gangModel]int
	famGang map[famGangModel]int
	n       int
}

// gangClass is floor(log2 gpus): 1 GPU is class 0 (no gang factor).
func gangClass(gpus int) int { return bits.Len(uint(gpus)) - 1 }

// design returns the model-side parameters a (job, model) pair loads on.
func (ix *paramIndex) design(j Job, model string) ([]int, bool) {
	b, ok := ix.model[model]
	if !ok {
		return nil, false
	}
	x := []int{b}
	if j.Family != "" {
		if k, ok := ix.family[famModel{j.Family, model}]; ok {
			x = append(x, k)
		}
	}
	if s := gangClass(j.GPUs); s > 0 {
		if k, ok := ix.gang[gangModel{s, model}]; ok {
			x = append(x, k)
		}
		if k, ok := ix.famGang[famGangModel{j.Family, s, model}]; ok && j.Family != "" {
			x = append(x, k)
		}
	}
	return x, true
}

// covers reports whether the index has every model-side factor a job of
// j's family and gang size would load on.
func (ix *paramIndex) covers(j Job) bool {
	s := gangClass(j.GPUs)
	for m := range ix.model {
		if _, ok := ix.family[famModel{j.Family, m}]; j.Family != "" && !ok {
			return false
		}
		if _, ok := ix.gang[gangModel{s, m}]; s > 0 && !ok {
			return false
		}
		if _, ok := ix.famGang[famGangModel{j.Family, s, m}]; s > 0 && j.Family != "" && !ok {
			return false
		}
	}
	return true
}

// jobFit is a job's eliminated block: D = its precision, B its coupling to
// the model-side parameters (sparse), a its factor.
type jobFit struct {
	d, a float64
	bIdx []int
	bVal []float64
}

type fitResult struct {
	ix   paramIndex
	beta []float64
	// sinv is S⁻¹, the posterior covariance of the model-side factors,
	// row-major n x n; queries read only the entries they need.
	sinv         []float64
	jobs         map[JobID]*jobFit
	modelObs     map[string]int
	measurements int
	interVar     float64
	familyVar    float64
	gangVar      float64
}

type observation struct {
	model string
	y, w  float64
}

func (e *Estimator) observations(j *jobState) []observation {
	o := e.opts
	var obs []observation
	models := make([]string, 0, len(j.pairs))
	for m := range j.pairs {
		models = append(models, m)
	}
	sort.Strings(models)
	for _, m := range models {
		p := j.pairs[m]
		switch {
		case p.n > 0:
			if !e.solvingOwn {
				p.fitLog, p.fitted = p.logEMA, true
			}
			v := o.interactionLogSD*o.interactionLogSD + o.measurementLogSD*o.measurementLogSD*p.varFactor
			obs = append(obs, observation{m, p.logEMA, 1 / v})
		case p.declared > 0:
			v := o.interactionLogSD*o.interactionLogSD + o.declaredLogSD*o.declaredLogSD
			obs = append(obs, observation{m, math.Log(p.declared), 1 / v})
		}
	}
	return obs
}

func (e *Estimator) index() (ix paramIndex, mu, prec []float64) {
	models := sortedKeys(e.models)
	families, classes := map[string]bool{}, map[int]bool{}
	type famGang struct {
		family string
		class  int
	}
	famGangs := map[famGang]bool{}
	for _, j := range e.jobs {
		if j.Family != "" {
			families[j.Family] = true
		}
		if s := gangClass(j.GPUs); s > 0 {
			classes[s] = true
			if j.Family != "" {
				famGangs[famGang{j.Family, s}] = true
			}
		}
	}
	fgs := make([]famGang, 0, len(famGangs))
	for fg := range famGangs {
		fgs = append(fgs, fg)
	}
	sort.Slice(fgs, func(a, b int) bool {
		if fgs[a].family != fgs[b].family {
			return fgs[a].family < fgs[b].family
		}
		return fgs[a].class < fgs[b].class
	})
	ix = paramIndex{model: map[string]int{}, prior: map[string]bool{}, family: map[famModel]int{}, gang: map[gangModel]int{}, famGang: map[famGangModel]int{}}
	add := func(m, p float64) int {
		mu, prec = append(mu, m), append(prec, p)
		ix.n++
		return ix.n - 1
	}
	o := e.opts
	for _, m := range models {
		base, hasBase := e.priors.Lookup(m, "")
		if hasBase {
			ix.prior[m] = true
			ix.model[m] = add(math.Log(base.Speed), 1/(base.LogSD*base.LogSD))
		} else {
			ix.model[m] = add(0, 1/(o.unknownModelLogSD*o.unknownModelLogSD))
		}
		for _, f := range sortedKeys(families) {
			mean, sd := 0.0, o.familyLogSD
			if fp, ok := e.priors.Lookup(m, f); ok {
				// The family row is a speed relative to a V100; the family
				// factor is its offset from the model's own factor.
				mean, sd = math.Log(fp.Speed), fp.LogSD
				if hasBase {
					mean -= math.Log(base.Speed)
				}
			}
			ix.family[famModel{f, m}] = add(mean, 1/(sd*sd))
		}
		for _, s := range sortedInts(classes) {
			ix.gang[gangModel{s, m}] = add(0, 1/(o.gangLogSD*o.gangLogSD))
		}
		for _, fg := range fgs {
			ix.famGang[famGangModel{fg.family, fg.class, m}] = add(0, 1/(o.gangLogSD*o.gangLogSD))
		}
	}
	return ix, mu, prec
}

// solve fits the model to every observation. It cannot fail: the priors
// make the system positive definite.
func (e *Estimator) solve() *fitResult {
	ix, mu, prec := e.index()
	n := ix.n
	f := &fitResult{ix: ix, jobs: map[JobID]*jobFit{}, modelObs: map[string]int{},
		interVar:  e.opts.interactionLogSD * e.opts.interactionLogSD,
		familyVar: e.opts.familyLogSD * e.opts.familyLogSD, gangVar: e.opts.gangLogSD * e.opts.gangLogSD}
	if n == 0 {
		return f
	}
	s := make([]float64, n*n) // S = C - sum_j B_j B_j^T / D_j, row-major
	t := make([]float64, n)   // t = r_beta - sum_j B_j r_aj / D_j
	for k := 0; k < n; k++ {
		s[k*n+k] = prec[k]
		t[k] = prec[k] * mu[k]
	}
	ids := make([]JobID, 0, len(e.jobs))
	for id := range e.jobs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	for _, id := range ids {
		j := e.jobs[id]
		obs := e.observations(j)
		if len(obs) == 0 {
			continue
		}
		jf := &jobFit{d: jobPriorPrecision}
		coupling := map[int]float64{}
		ra := 0.0
		for _, o := range obs {
			x, _ := ix.design(j.Job, o.model)
			jf.d += o.w
			ra += o.w * o.y
			for _, p := range x {
				coupling[p] += o.w
				t[p] += o.w * o.y
				for _, q := range x {
					s[p*n+q] += o.w
				}
			}
			f.modelObs[o.model]++
			f.measurements++
		}
		for _, p := range sortedInts(coupling) {
			jf.bIdx = append(jf.bIdx, p)
			jf.bVal = append(jf.bVal, coupling[p])
		}
		for a, p := range jf.bIdx {
			t[p] -= jf.bVal[a] * ra / jf.d
			for b, q := range jf.bIdx {
				s[p*n+q] -= jf.bVal[a] * jf.bVal[b] / jf.d
			}
		}
		jf.a = ra // finished below, once beta is known
		f.jobs[id] = jf
	}
	var chol mat.Cholesky
	if !chol.Factorize(mat.NewSymDense(n, s)) {
		// The priors bound S's eigenvalues below by the smallest prior
		// precision (> 0) and the inputs are bounded logs, so this is a bug.
		panic("profile: the normal equations are not positive definite")
	}
	var beta mat.VecDense
	if err := chol.SolveVecTo(&beta, mat.NewVecDense(n, t)); err != nil {
		panic("profile: solving the normal equations: " + err.Error())
	}
	var inv mat.SymDense
	if err := chol.InverseTo(&inv); err != nil {
		panic("profile: inverting the normal equations: " + err.Error())
	}
	f.sinv = make([]float64, n*n)
	for p := 0; p < n; p++ {
		for q := 0; q < n; q++ {
			f.sinv[p*n+q] = inv.At(p, q)
		}
	}
	f.beta = beta.RawVector().Data
	for _, jf := range f.jobs {
		ra := jf.a
		for a, p := range jf.bIdx {
			ra -= jf.bVal[a] * f.beta[p]
		}
		jf.a = ra / jf.d
	}
	return f
}

// predict is the posterior mean and sd of log theta for job j on model
// (false: the job has no data or the model is unknown). The variance is
// Var(a_j + x·beta) + interaction², with Var(a_j + x·beta) = 1/D + uᵀS⁻¹u,
// u = x - B_j/D.
func (f *fitResult) predict(j *jobState, model string) (mean, sd float64, ok bool) {
	jf := f.jobs[j.ID]
	x, known := f.ix.design(j.Job, model)
	if jf == nil || !known {
		return 0, 0, false
	}
	u := sparse{}
	mean = jf.a
	for _, p := range x {
		u.add(p, 1)
		mean += f.beta[p]
	}
	for a, p := range jf.bIdx {
		u.add(p, -jf.bVal[a]/jf.d)
	}
	return mean, math.Sqrt(1/jf.d + f.quad(u) + f.interVar + f.unmodelled(j.Job)), true
}

// unmodelled is the variance of the factors a job cannot have: without a
// family, its family-by-model (and family-by-gang) deviation is a draw
// from their priors rather than zero.
func (f *fitResult) unmodelled(j Job) float64 {
	if j.Family != "" {
		return 0
	}
	v := f.familyVar
	if gangClass(j.GPUs) > 0 {
		v += f.gangVar
	}
	return v
}

// relative is the posterior mean and sd of x·beta, the job's log speed on
// model apart from its own factor: what ranks models for a job without
// data. It is false for a model with neither a prior row nor data.
func (f *fitResult) relative(j Job, model string) (mean, sd float64, ok bool) {
	x, known := f.ix.design(j, model)
	if !known || !f.ix.prior[model] && f.modelObs[model] == 0 {
		return 0, 0, false
	}
	u := sparse{}
	for _, p := range x {
		u.add(p, 1)
		mean += f.beta[p]
	}
	return mean, math.Sqrt(f.quad(u) + f.unmodelled(j)), true
}

// sparse is a vector over the model-side factors with few nonzeros.
type sparse struct {
	idx []int
	val []float64
}

func (s *sparse) add(i int, v float64) {
	for k, j := range s.idx {
		if j == i {
			s.val[k] += v
			return
		}
	}
	s.idx, s.val = append(s.idx, i), append(s.val, v)
}

// quad is uᵀS⁻¹u.
func (f *fitResult) quad(u sparse) float64 {
	n := f.ix.n
	q := 0.0
	for a, p := range u.idx {
		for b, r := range u.idx {
			q += u.val[a] * u.val[b] * f.sinv[p*n+r]
		}
	}
	return math.Max(0, q)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedInts[V any](m map[int]V) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}
