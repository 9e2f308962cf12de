package sim

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/jobmeta"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/placement"
	"github.com/nomad-fft/nomad-fft/allocator/workload"
)

// Namespace is the Nomad namespace the simulated jobs live in. A job's
// loop ID is its workload ID as it is, so policies, traces and the log
// name jobs alike.
const Namespace = "sim"

// Epoch is the wall time the virtual clock starts at (the loop records
// times; any fixed instant keeps runs deterministic).
var Epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Cluster is the simulated cluster the round loop observes and applies
// plans to, in place of Nomad: jobs of a workload on GPU models, a virtual
// clock, true progress (reported to the loop as a training task reports
// it) and restarts charged. Its state machine is Nomad's as the loop sees
// it: a held job has no allocation; a start or migration places one on the
// chosen model at once; a park stops it; a job whose work is done finishes.
type Cluster struct {
	models []allocator.Model
	// hosts are the models' hosts (placement stage input); piece is the
	// largest allocation a job may have, the smallest host.
	hosts []placement.Host
	piece int
	// style is the policy's placement (policy.PlacementOf), which the
	// loop runs; it decides how jobs are cut into pieces.
	style   placement.Style
	roundS  float64
	restart float64
	// learn hides the rates from the loop (Config.Learn, learn.go).
	learn bool
	// now is the clock in seconds. With early rounds (exact) the clock is
	// clock, in whole nanoseconds, and now reads it (early.go).
	now    float64
	exact  bool
	clock  time.Duration
	lg     *Log
	active []*simJob
	byID   map[string]*simJob
	// modelIdx is each model's index in lg.Cluster (Event.Model).
	modelIdx map[string]int16
	// finished are jobs that completed in the last round: observed once as
	// finished, then gone, as Nomad's garbage collection would.
	finished []*simJob
	tenantOf func(workload.JobSpec) string
}

// simJob is one job in the cluster.
type simJob struct {
	idx  int
	spec *workload.JobSpec
	job  loop.Job
	done float64
	// running is the model the job holds GPUs on now ("" if none), last
	// the model it last ran on; penalty is the restart to charge when the
	// next round runs it.
	running, last string
	penalty       float64
}

var (
	_ loop.Observer = (*Cluster)(nil)
	_ loop.Applier  = (*Cluster)(nil)
)

func newCluster(cfg Config, roundSeconds float64, lg *Log) *Cluster {
	c := &Cluster{roundS: roundSeconds, restart: cfg.RestartSeconds, learn: cfg.Learn, lg: lg, byID: map[string]*simJob{}, tenantOf: cfg.TenantOf,
		exact: cfg.MinRoundGapSeconds > 0}
	c.models = append(c.models, cfg.Cluster...)
	c.modelIdx = make(map[string]int16, len(lg.Cluster))
	for k, m := range lg.Cluster {
		c.modelIdx[m.Name] = int16(k)
	}
	sort.Slice(c.models, func(a, b int) bool { return c.models[a].Name < c.models[b].Name })
	c.hosts = Hosts(c.models, cfg.HostGPUs)
	for _, h := range c.hosts {
		if c.piece == 0 || h.GPUs < c.piece {
			c.piece = h.GPUs
		}
	}
	return c
}

// Hosts lays each model's GPUs out in hosts of perHost[model] GPUs (one
// host of all of them when absent), named model-hN: the simulated cluster's
// nodes.
func Hosts(models []allocator.Model, perHost map[string]int) []placement.Host {
	var out []placement.Host
	for _, m := range models {
		size := perHost[m.Name]
		if size <= 0 || size > m.GPUs {
			size = m.GPUs
		}
		for k := 0; k*size < m.GPUs; k++ {
			out = append(out, placement.Host{ID: fmt.Sprintf("%s-h%d", m.Name, k), Model: m.Name, GPUs: min(size, m.GPUs-k*size)})
		}
	}
	return out
}

// checkHosts rejects host sizes that do not divide their model's GPUs or
// name no model of the cluster.
func checkHosts(cfg Config) error {
	gpus := map[string]int{}
	for _, m := range cfg.Cluster {
		gpus[m.Name] = m.GPUs
	}
	for name, size := range cfg.HostGPUs {
		n, ok := gpus[name]
		switch {
		case !ok:
			return fmt.Errorf("sim: hosts given for model %q, which the cluster does not have", name)
		case size < 0 || (size > 0 && n%size != 0):
			return fmt.Errorf("sim: model %q has %d GPUs, not a whole number of hosts of %d", name, n, size)
		}
	}
	return nil
}

// pieces splits a job of gpus GPUs into allocations no larger than the
// smallest host: as a user splits a job larger than a host into a task
// group with count > 1. Under Gavel's placement each GPU is a piece: Gavel
// assigns a job's workers (one GPU each) one by one.
func (c *Cluster) pieces(gpus int) []int {
	if c.style == placement.StyleGavel {
		return piecesOf(gpus, 1)
	}
	return piecesOf(gpus, c.piece)
}

// PiecesFor is Pieces under a placement style: 1-GPU pieces for Gavel's.
func PiecesFor(st placement.Style, hosts []placement.Host, gpus int) []int {
	if st == placement.StyleGavel {
		return piecesOf(gpus, 1)
	}
	return Pieces(hosts, gpus)
}

// Pieces is how the simulated cluster splits a job of gpus GPUs on these
// hosts: into allocations no larger than the smallest host.
func Pieces(hosts []placement.Host, gpus int) []int {
	piece := 0
	for _, h := range hosts {
		if piece == 0 || h.GPUs < piece {
			piece = h.GPUs
		}
	}
	return piecesOf(gpus, piece)
}

func piecesOf(gpus, piece int) []int {
	if piece <= 0 || gpus <= piece {
		return []int{gpus}
	}
	var out []int
	for left := gpus; left > 0; left -= piece {
		out = append(out, min(piece, left))
	}
	return out
}

// admit adds a job of the workload, held, as a submitted job waits for a
// round to select it. Its throughputs are per round of the loop's length.
func (c *Cluster) admit(idx int, spec *workload.JobSpec) {
	tp := make(map[string]float64, len(spec.Rate))
	for m, r := range spec.Rate {
		if r > 0 {
			tp[m] = r * c.roundS
		}
	}
	lie := c.lg.Liars[spec.ID]
	if lie == AdvInflate {
		for m := range tp {
			tp[m] *= InflateFactor
		}
	}
	js := &jobmeta.Spec{Work: spec.Work, WorkUnit: "steps", Throughput: tp, Weight: 1, GPUs: spec.GPUs}
	js.SpreadThroughput = SpreadThroughput(spec, tp)
	if c.learn {
		js.Throughput, js.SpreadThroughput, js.LearnThroughput, js.Family = nil, nil, true, Family(spec.Type)
	}
	ns := Namespace
	if lie != "" {
		ns = AdversaryNamespace
	}
	if c.tenantOf != nil {
		// A tenant submits into its own namespace, the identity a job
		// cannot choose; fft.user is the same name, as a label.
		js.User = c.tenantOf(*spec)
		ns = js.User
	}
	j := &simJob{idx: idx, spec: spec, job: loop.Job{ID: spec.ID, Namespace: ns, Name: spec.ID, Gated: true, Spec: js, Pieces: c.pieces(spec.GPUs)}}
	c.active = append(c.active, j)
	c.byID[j.job.ID] = j
}

// SpreadThroughput is the job's fft.throughput_spread for its declared
// throughputs tp (per round): each spread rate in the same ratio to tp as
// Gavel's unconsolidated rate to its consolidated one.
func SpreadThroughput(spec *workload.JobSpec, tp map[string]float64) map[string]float64 {
	var out map[string]float64
	for m, r := range spec.SpreadRate {
		if r > 0 && tp[m] > 0 && spec.Rate[m] > 0 {
			if out == nil {
				out = map[string]float64{}
			}
			out[m] = tp[m] * r / spec.Rate[m]
		}
	}
	return out
}

// fits reports whether any model of the cluster can run the job.
func (c *Cluster) fits(spec *workload.JobSpec) bool {
	if c.learn && !c.runsEverywhere(spec) {
		return false
	}
	for i := range c.models {
		if allocator.Fits(&c.models[i], spec.GPUs, 0, spec.Rate[c.models[i].Name]) {
			return true
		}
	}
	return false
}

// Observe returns the models and the jobs, the ones that finished in the
// last round included (once).
func (c *Cluster) Observe(context.Context) (*loop.Snapshot, error) {
	s := &loop.Snapshot{Models: c.models, Jobs: make([]loop.Job, 0, len(c.active)+len(c.finished))}
	for _, j := range c.finished {
		f := j.job
		f.Finished, f.Allocs, f.RunningModel, f.Slots = true, nil, "", nil
		s.Jobs = append(s.Jobs, f)
	}
	c.finished = c.finished[:0]
	held := make(map[string][]placement.Slot, len(c.active))
	for _, j := range c.active {
		s.Jobs = append(s.Jobs, j.job)
		if j.running != "" {
			held[j.job.ID] = j.job.Slots
		}
	}
	s.Hosts = placement.WithJobs(c.hosts, held)
	sort.Slice(s.Jobs, func(a, b int) bool { return s.Jobs[a].ID < s.Jobs[b].ID })
	return s, nil
}

// Progress is the true work done of every job in the cluster: what a
// training task that reports after every step would say (a liar says what
// its lie says, adversary.go).
func (c *Cluster) Progress(context.Context) (map[string]float64, error) {
	out := make(map[string]float64, len(c.active))
	for _, j := range c.active {
		if v, ok := c.lg.Liars[j.job.ID].report(j.done, j.spec.Work, c.learn); ok {
			out[j.job.ID] = v
		}
	}
	return out, nil
}

// Apply carries a plan out at once and logs each change as an event. A
// job that resumes after a park, or moves to another model, will pay the
// restart time in the round it runs.
func (c *Cluster) Apply(_ context.Context, p *loop.Plan) loop.ApplyResult {
	res := loop.ApplyResult{Applied: map[loop.Action]int{}}
	round := len(c.lg.Rounds)
	for _, ch := range p.Changes() {
		j := c.byID[ch.Job.ID]
		if j == nil {
			continue
		}
		res.Calls++
		res.Applied[ch.Action]++
		switch ch.Action {
		case loop.ActionPark:
			if j.running != "" {
				c.event(c.now, round, EvPreempt, j, j.running, 0)
			}
			j.running = ""
			j.job.Gated, j.job.Allocs, j.job.RunningModel, j.job.Slots = true, nil, "", nil
		case loop.ActionStart, loop.ActionMigrate:
			kind := EvRun
			switch {
			case j.running == ch.Model:
				kind = EvMove
			case j.running != "":
				kind = EvMigrate
			}
			if j.last != "" {
				// A resume after a park, or a move: the job restarts.
				j.penalty = c.restart
			}
			c.event(c.now, round, kind, j, ch.Model, placement.Hosts(ch.Slots))
			j.running, j.last = ch.Model, ch.Model
			j.job.Gated, j.job.OffPool, j.job.Model, j.job.RunningModel = false, false, ch.Model, ch.Model
			j.job.Allocs = []string{j.spec.ID}
			j.job.Slots, j.job.Pinned = ch.Slots, ch.Hosts()
		}
	}
	return res
}

// event logs what happened to j at t, on model (Run bounds the rounds and
// models to the event's fields; a job on more hosts than 16 bits count is
// logged at the most they do, still split).
func (c *Cluster) event(t float64, round int, kind EventKind, j *simJob, model string, hosts int) {
	c.lg.Events = append(c.lg.Events, Event{Time: t, Round: int32(round), Job: int32(j.idx), Model: c.modelIdx[model],
		Hosts: uint16(min(hosts, math.MaxUint16)), Kind: kind})
}

// run advances the clock by one round of the given length: every job
// holding GPUs progresses at its rate after any restart it pays (a restart
// longer than the round goes on into the next), and a job whose work is
// done finishes within the round. It returns the GPU-seconds used.
func (c *Cluster) run(length roundLength) (busy float64) {
	R := length.seconds
	round := len(c.lg.Rounds)
	kept := c.active[:0]
	for _, j := range c.active {
		if j.running == "" {
			kept = append(kept, j)
			continue
		}
		// With early rounds the finish test is the one its trigger was
		// timed by (early.go), so the job has finished by that round.
		finishes := c.exact && ceilNs(j.finishIn()) <= length.exact
		penalty := math.Min(j.penalty, R)
		j.penalty -= penalty
		rate := j.rate()
		used, work := R, rate*(R-penalty)
		if left := j.spec.Work - j.done; work >= left || finishes {
			work, used = left, penalty+left/rate
		}
		j.done += work
		busy += float64(j.spec.GPUs) * used
		if j.done >= j.spec.Work {
			c.event(c.now+used, round, EvFinish, j, j.running, 0)
			delete(c.byID, j.job.ID)
			c.finished = append(c.finished, j)
			continue
		}
		kept = append(kept, j)
	}
	clear(c.active[len(kept):])
	c.active = kept
	if c.exact {
		c.clock += length.exact
		c.now = c.clock.Seconds()
	} else {
		c.now += R
	}
	return busy
}

// rate is the job's true steps/s where it runs now: its spread rate when
// its allocations lie on several hosts (Gavel's unconsolidated rates).
func (j *simJob) rate() float64 {
	if r := j.spec.SpreadRate[j.running]; r > 0 && placement.Hosts(j.job.Slots) > 1 {
		return r
	}
	return j.spec.Rate[j.running]
}

// placeableIdle is how many GPUs sit idle this round on hosts where a
// waiting job's largest allocation would fit (a job waiting beside GPUs it
// could have used): per model, the free GPUs of each host at least as free
// as the smallest such allocation of a job that may run on the model.
func (c *Cluster) placeableIdle() int {
	free := make(map[string]int, len(c.hosts))
	for _, h := range c.hosts {
		free[h.ID] = h.GPUs
	}
	for _, j := range c.active {
		if j.running != "" {
			for _, s := range j.job.Slots {
				free[s.Host] -= s.GPUs
			}
		}
	}
	smallest := map[string]int{}
	for _, j := range c.active {
		if j.running != "" {
			continue
		}
		p := slices.Max(j.job.Pieces)
		for m, r := range j.spec.Rate {
			if r > 0 && (smallest[m] == 0 || p < smallest[m]) {
				smallest[m] = p
			}
		}
	}
	idle := 0
	for _, h := range c.hosts {
		if p := smallest[h.Model]; p > 0 && free[h.ID] >= p {
			idle += free[h.ID]
		}
	}
	return idle
}

// capacity is the cluster's GPUs.
func (c *Cluster) capacity() int {
	n := 0
	for _, m := range c.models {
		n += m.GPUs
	}
	return n
}
