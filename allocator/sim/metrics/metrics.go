package metrics

import (
	"math"
	"sort"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/sim"
	"github.com/nomad-fft/nomad-fft/allocator/workload"
	"github.com/nomad-fft/nomad-fft/fairness"
)

// UnfairThreshold is the finish-time-fairness ratio above which a job
// counts as unfairly treated (fft.md: rho > 1). Shockwave uses 1.05.
const UnfairThreshold = 1.0

// JobResult is one job's outcome, computed from the log.
type JobResult struct {
	Index    int     `json:"index"`
	ID       string  `json:"id"`
	Type     string  `json:"type"`
	GPUs     int     `json:"gpus"`
	Arrival  float64 `json:"arrival_s"`
	Finish   float64 `json:"finish_s"` // NaN when unfinished
	JCT      float64 `json:"jct_s"`
	FirstRun float64 `json:"first_run_s"`
	// Starvation is arrival to first run (seconds).
	Starvation  float64 `json:"starvation_s"`
	Switches    int     `json:"switches"`
	Preemptions int     `json:"preemptions"`
	// Moves counts the times the placement stage put the job on other
	// hosts of its model; Split is true once it ran across several hosts.
	Moves    int  `json:"moves,omitempty"`
	Split    bool `json:"split,omitempty"`
	Rejected bool `json:"rejected"`
	Finished bool `json:"finished"`
	Measured bool `json:"measured"`
	// NAvg is the time-average number of jobs present during the job's
	// lifetime, NArrival the number present when it arrived (itself
	// included).
	NAvg     float64 `json:"n_avg"`
	NArrival int     `json:"n_arrival"`
	// FTF is Themis's rho = JCT / T_isolated with a 1/NAvg share of every
	// model; FTFArrival uses NArrival; FTFGavel divides by the job's JCT in
	// a reference run (Gavel's isolated policy), NaN without one.
	FTF        float64 `json:"ftf"`
	FTFArrival float64 `json:"ftf_arrival"`
	FTFGavel   float64 `json:"ftf_gavel"`
}

// Stat summarises a distribution.
type Stat struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// FairnessStat summarises finish-time-fairness ratios.
type FairnessStat struct {
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
	// Unfair is the fraction of jobs with rho above the threshold.
	Unfair float64 `json:"unfair"`
}

// Summary is one run's metrics over its measured jobs.
type Summary struct {
	Policy     string `json:"policy"`
	Measured   int    `json:"measured"`
	Finished   int    `json:"finished"`
	Unfinished int    `json:"unfinished"`
	Rejected   int    `json:"rejected"`
	// JCT and Starvation are in seconds.
	JCT        Stat         `json:"jct_s"`
	Starvation Stat         `json:"starvation_s"`
	Makespan   float64      `json:"makespan_s"`
	FTF        FairnessStat `json:"ftf"`
	FTFArrival FairnessStat `json:"ftf_arrival"`
	// FTFGavel is NaN-free only with a reference run.
	FTFGavel    *FairnessStat `json:"ftf_gavel,omitempty"`
	Utilisation float64       `json:"utilisation"`
	Switches    int           `json:"switches"`
	Preemptions int           `json:"preemptions"`
	// Moves are the placement stage's consolidation moves, SplitJobs the
	// jobs that ran across several hosts, IdlePlaceableGPUHours the GPU
	// time left idle on hosts where a waiting job would have fit.
	Moves                 int     `json:"moves"`
	SplitJobs             int     `json:"split_jobs"`
	IdlePlaceableGPUHours float64 `json:"idle_placeable_gpu_h"`
	// Solve is the policy's time per round, in seconds.
	Solve Stat `json:"solve_s"`
	// Active is the number of jobs in the cluster per round (the solver's
	// problem size).
	Active Stat `json:"active"`
	Rounds int  `json:"rounds"`
	// EarlyRounds are the rounds a trigger brought forward, with the
	// live schedule's MinRoundGapSeconds (0: fixed rounds, none).
	EarlyRounds        int           `json:"early_rounds"`
	MinRoundGapSeconds float64       `json:"min_round_gap_s"`
	Wall               time.Duration `json:"wall_ns"`
	Stopped            string        `json:"stopped,omitempty"`
	// PolicyStats are the policy's own counters, copied from the log.
	PolicyStats map[string]float64 `json:"policy_stats,omitempty"`
}

// Analyse computes per-job results and the summary from a log. ref, if not
// nil, is a run of the same workload under Gavel's isolated policy, for
// FTFGavel.
func Analyse(lg *sim.Log, ref *sim.Log) ([]JobResult, Summary) {
	n := len(lg.Jobs)
	res := make([]JobResult, n)
	windowed := lg.Window.Hi > lg.Window.Lo
	for k := range lg.Jobs {
		j := &lg.Jobs[k]
		res[k] = JobResult{Index: k, ID: j.ID, Type: j.Type, GPUs: j.GPUs, Arrival: j.Arrival,
			Finish: math.NaN(), JCT: math.NaN(), FirstRun: math.NaN(), Starvation: math.NaN(),
			FTF: math.NaN(), FTFArrival: math.NaN(), FTFGavel: math.NaN(),
			Measured: !windowed || (k >= lg.Window.Lo && k < lg.Window.Hi)}
	}
	last := make([]int16, n) // each job's model in its last run
	for k := range last {
		last[k] = sim.NoModel
	}
	type change struct {
		t float64
		d int
	}
	changes := make([]change, 0, 2*n)
	for _, e := range lg.Events {
		r := &res[e.Job]
		switch e.Kind {
		case sim.EvArrive:
			changes = append(changes, change{e.Time, +1})
		case sim.EvReject:
			r.Rejected = true
			changes = append(changes, change{e.Time, -1})
		case sim.EvRun, sim.EvMigrate, sim.EvMove:
			if e.Kind == sim.EvMove {
				r.Moves++
			}
			r.Split = r.Split || e.Hosts > 1
			if math.IsNaN(r.FirstRun) {
				r.FirstRun = e.Time
				r.Starvation = e.Time - r.Arrival
			}
			if last[e.Job] != sim.NoModel && last[e.Job] != e.Model {
				r.Switches++
			}
			last[e.Job] = e.Model
		case sim.EvPreempt:
			r.Preemptions++
		case sim.EvFinish:
			r.Finished, r.Finish = true, e.Time
			r.JCT = e.Time - r.Arrival
			changes = append(changes, change{e.Time, -1})
		}
	}
	sort.SliceStable(changes, func(a, b int) bool { return changes[a].t < changes[b].t })
	// integral(t) of the number of jobs present, piecewise constant.
	times := make([]float64, len(changes))
	cum := make([]float64, len(changes))
	count := make([]int, len(changes))
	c, acc := 0, 0.0
	for k, ch := range changes {
		if k > 0 {
			acc += float64(c) * (ch.t - times[k-1])
		}
		c += ch.d
		times[k], cum[k], count[k] = ch.t, acc, c
	}
	integral := func(t float64) float64 {
		k := sort.Search(len(times), func(i int) bool { return times[i] > t }) - 1
		if k < 0 {
			return 0
		}
		return cum[k] + float64(count[k])*(t-times[k])
	}
	countAt := func(t float64) int {
		k := sort.Search(len(times), func(i int) bool { return times[i] > t }) - 1
		if k < 0 {
			return 0
		}
		return count[k]
	}
	var refJCT []float64
	if ref != nil {
		rr, _ := analyseJCT(ref)
		refJCT = rr
	}
	var s Summary
	s.Policy, s.Rounds, s.Wall, s.Stopped = lg.Policy, len(lg.Rounds), lg.Wall, lg.Stopped
	s.MinRoundGapSeconds = lg.MinRoundGapSeconds
	s.PolicyStats = lg.PolicyStats
	var jct, starve, ftf, ftfArr, ftfGav []float64
	first, lastFinish := math.Inf(1), 0.0
	for k := range res {
		r := &res[k]
		if r.Finished {
			lastFinish = math.Max(lastFinish, r.Finish)
			j := &lg.Jobs[k]
			r.NArrival = countAt(r.Arrival)
			r.NAvg = float64(r.NArrival)
			if r.JCT > 0 {
				r.NAvg = (integral(r.Finish) - integral(r.Arrival)) / r.JCT
			}
			r.FTF = r.JCT / IsolatedTime(j, lg.Cluster, r.NAvg)
			r.FTFArrival = r.JCT / IsolatedTime(j, lg.Cluster, float64(r.NArrival))
			if k < len(refJCT) && refJCT[k] > 0 {
				r.FTFGavel = r.JCT / refJCT[k]
			}
		}
		if !r.Measured {
			continue
		}
		s.Measured++
		first = math.Min(first, r.Arrival)
		switch {
		case r.Rejected:
			s.Rejected++
			continue
		case !r.Finished:
			s.Unfinished++
			continue
		}
		s.Finished++
		s.Switches += r.Switches
		s.Preemptions += r.Preemptions
		s.Moves += r.Moves
		if r.Split {
			s.SplitJobs++
		}
		if !math.IsNaN(r.FTFGavel) {
			ftfGav = append(ftfGav, r.FTFGavel)
		}
		jct = append(jct, r.JCT)
		starve = append(starve, r.Starvation)
		ftf = append(ftf, r.FTF)
		ftfArr = append(ftfArr, r.FTFArrival)
	}
	s.JCT, s.Starvation = Stats(jct), Stats(starve)
	s.FTF, s.FTFArrival = Fairness(ftf, UnfairThreshold), Fairness(ftfArr, UnfairThreshold)
	if ref != nil {
		f := Fairness(ftfGav, UnfairThreshold)
		s.FTFGavel = &f
	}
	s.Makespan = lastFinish
	var busy, capa float64
	var solve, active []float64
	for _, rd := range lg.Rounds {
		s.IdlePlaceableGPUHours += rd.IdlePlaceableGPUSeconds / 3600
		solve = append(solve, rd.Solve.Seconds())
		active = append(active, float64(rd.Active))
		if rd.Trigger != "" && rd.Trigger.Early() {
			s.EarlyRounds++
		}
		length := rd.Seconds
		if length == 0 {
			length = lg.RoundSeconds // a log from before rounds had their length
		}
		if rd.Start+length > first && rd.Start < lastFinish {
			busy += rd.BusyGPUSeconds
			capa += rd.CapacityGPUSeconds
		}
	}
	if capa > 0 {
		s.Utilisation = busy / capa
	}
	s.Solve, s.Active = Stats(solve), Stats(active)
	return res, s
}

// analyseJCT returns each job's JCT (NaN when unfinished) by index.
func analyseJCT(lg *sim.Log) ([]float64, int) {
	out := make([]float64, len(lg.Jobs))
	for k := range out {
		out[k] = math.NaN()
	}
	done := 0
	for _, e := range lg.Events {
		if e.Kind == sim.EvFinish {
			out[e.Job] = e.Time - lg.Jobs[e.Job].Arrival
			done++
		}
	}
	return out, done
}

// IsolatedTime is the job's run time alone with a 1/n share of every
// model (fft.md's rule, fractional n allowed), in seconds; +Inf if it fits
// nothing. It is fairness.IsolatedRounds with per-second rates, so the
// simulator and the live service share one definition.
func IsolatedTime(j *workload.JobSpec, cluster []allocator.Model, n float64) float64 {
	capacity := make(map[string]int, len(cluster))
	for _, m := range cluster {
		capacity[m.Name] = m.GPUs
	}
	return fairness.IsolatedRounds(fairness.Job{ID: j.ID, Work: j.Work, GPUs: j.GPUs, Throughput: j.Rate}, capacity, n)
}

// Stats returns mean, p50, p99 and max (linear interpolation between
// order statistics); all NaN for no values.
func Stats(v []float64) Stat {
	if len(v) == 0 {
		return Stat{math.NaN(), math.NaN(), math.NaN(), math.NaN()}
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return Stat{Mean: sum / float64(len(s)), P50: Quantile(s, 0.5), P99: Quantile(s, 0.99), Max: s[len(s)-1]}
}

// Quantile of sorted values, interpolating linearly.
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	return sorted[lo] + (pos-float64(lo))*(sorted[hi]-sorted[lo])
}

// Fairness summarises ratios: mean, max and the fraction above threshold.
func Fairness(rho []float64, threshold float64) FairnessStat {
	if len(rho) == 0 {
		return FairnessStat{math.NaN(), math.NaN(), math.NaN()}
	}
	f := FairnessStat{Max: math.Inf(-1)}
	unfair := 0
	for _, r := range rho {
		f.Mean += r
		f.Max = math.Max(f.Max, r)
		if r > threshold {
			unfair++
		}
	}
	f.Mean /= float64(len(rho))
	f.Unfair = float64(unfair) / float64(len(rho))
	return f
}

// Ratios divides shared by isolated element-wise (rho = T_shared /
// T_isolated).
func Ratios(shared, isolated []float64) []float64 {
	out := make([]float64, len(shared))
	for k := range shared {
		out[k] = shared[k] / isolated[k]
	}
	return out
}
