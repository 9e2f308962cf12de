package metrics

import (
	"math"
	"sort"

	"github.com/nomad-fft/nomad-fft/allocator/sim"
)

// AdversaryRow compares one kind of liar's jobs in a run with liars with the
// same jobs in the same workload's honest run (issue 20). A split job is
// compared whole: its JCT is its last part's finish, its GPU time the
// parts' sum.
type AdversaryRow struct {
	Kind sim.AdversaryKind `json:"kind"`
	// Liars counts the lying jobs compared (finished in both runs).
	Liars int `json:"liars"`
	// JCTRatio is the mean over liars of JCT lying / JCT honest, and
	// GPURatio of GPU time lying / GPU time honest (restarts included);
	// Gained the fraction of liars whose JCT fell by more than 2%.
	JCTRatio float64 `json:"jct_ratio"`
	GPURatio float64 `json:"gpu_ratio"`
	Gained   float64 `json:"gained"`
}

// AdversaryReport is the comparison of a run with liars against the honest
// run of the same workload.
type AdversaryReport struct {
	Rows []AdversaryRow `json:"rows"`
	// HonestJobs counts the jobs that told no lie, finished in both runs;
	// HonestJCTRatio is their mean JCT with liars over their mean JCT
	// without.
	HonestJobs     int     `json:"honest_jobs"`
	HonestJCTRatio float64 `json:"honest_jct_ratio"`
}

type served struct {
	arrival, finish, gpuS float64
	finished              bool
}

// serviceOf is each job's arrival, finish and GPU time held, by ID.
func serviceOf(lg *sim.Log) map[string]*served {
	out := make(map[string]*served, len(lg.Jobs))
	start := make(map[int32]float64, len(lg.Jobs))
	for k := range lg.Jobs {
		out[lg.Jobs[k].ID] = &served{arrival: lg.Jobs[k].Arrival}
	}
	stop := func(e sim.Event) {
		if s, ok := start[e.Job]; ok {
			out[lg.Jobs[e.Job].ID].gpuS += (e.Time - s) * float64(lg.Jobs[e.Job].GPUs)
			delete(start, e.Job)
		}
	}
	for _, e := range lg.Events {
		switch e.Kind {
		case sim.EvRun:
			start[e.Job] = e.Time
		case sim.EvMigrate:
			stop(e)
			start[e.Job] = e.Time
		case sim.EvPreempt:
			stop(e)
		case sim.EvFinish:
			stop(e)
			s := out[lg.Jobs[e.Job].ID]
			s.finish, s.finished = e.Time, true
		}
	}
	return out
}

// Adversarial compares lying, a run with Config.Adversaries, with honest,
// the same workload's run without.
func Adversarial(honest, lying *sim.Log) AdversaryReport {
	h, l := serviceOf(honest), serviceOf(lying)
	// A split job, whole: its parts folded into its original ID.
	whole := map[string]*served{}
	kind := map[string]sim.AdversaryKind{}
	for id, s := range l {
		orig := id
		if p, ok := lying.Parent[id]; ok {
			orig = p
		}
		if k, ok := lying.Liars[id]; ok {
			kind[orig] = k
		}
		w := whole[orig]
		if w == nil {
			w = &served{arrival: s.arrival, finished: true}
			whole[orig] = w
		}
		w.gpuS += s.gpuS
		w.finish = math.Max(w.finish, s.finish)
		w.finished = w.finished && s.finished
	}
	type acc struct {
		n             int
		jct, gpu, won float64
	}
	byKind := map[sim.AdversaryKind]*acc{}
	var hn int
	var hSum, lSum float64
	for id, w := range whole {
		ref := h[id]
		if ref == nil || !ref.finished || !w.finished {
			continue
		}
		jr, jl := ref.finish-ref.arrival, w.finish-w.arrival
		k, lies := kind[id]
		if !lies {
			hn++
			hSum += jr
			lSum += jl
			continue
		}
		a := byKind[k]
		if a == nil {
			a = &acc{}
			byKind[k] = a
		}
		a.n++
		if jr > 0 {
			a.jct += jl / jr
			if jl < 0.98*jr {
				a.won++
			}
		}
		if ref.gpuS > 0 {
			a.gpu += w.gpuS / ref.gpuS
		}
	}
	rep := AdversaryReport{HonestJobs: hn, HonestJCTRatio: math.NaN()}
	if hSum > 0 {
		rep.HonestJCTRatio = lSum / hSum
	}
	for k, a := range byKind {
		rep.Rows = append(rep.Rows, AdversaryRow{Kind: k, Liars: a.n, JCTRatio: a.jct / float64(a.n), GPURatio: a.gpu / float64(a.n), Gained: a.won / float64(a.n)})
	}
	sort.Slice(rep.Rows, func(a, b int) bool { return rep.Rows[a].Kind < rep.Rows[b].Kind })
	return rep
}
