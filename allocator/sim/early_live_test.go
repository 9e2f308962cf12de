package sim_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/jobmeta"
	"github.com/nomad-fft/nomad-fft/allocator/live"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/placement"
	"github.com/nomad-fft/nomad-fft/allocator/policy"
	"github.com/nomad-fft/nomad-fft/allocator/sim"
	"github.com/nomad-fft/nomad-fft/allocator/workload"
)

// The seam of the one schedule: both run loop.Schedule, so what matters is what each feeds
// it. The live service's Run (its timer on a test clock, its watcher fed by this test, which
// plays Nomad and the training tasks: arrivals when they come, a finish trigger when a task
// completes) and the simulator with the same gap start the same rounds at the same times for
// the same triggers, and decide alike.
func TestEarlyRoundsAreTheServicesSchedule(t *testing.T) {
	names := []string{policy.DefaultName, policy.FFTName, policy.GavelFTFName, policy.SiaName}
	rng := rand.New(rand.NewPCG(11, 5))
	early := map[loop.TriggerKind]int{}
	rounds := 0
	for i := 0; i < 32; i++ {
		name := names[i%len(names)]
		w := randomWorkload(rng)
		// Jobs submitted at the same instant reach the live service one by one, and a round
		// due at once may start between them; the simulator offers them together. Distinct
		// arrivals keep the comparison exact.
		for k := range w.jobs {
			w.jobs[k].Arrival += float64(k) / 1000
		}
		gap := []float64{1, 5, 30}[rng.IntN(3)]
		t.Run(fmt.Sprintf("%s/%d", name, i), func(t *testing.T) {
			simPol, _ := policy.New(name, policy.Options{Seed: 1})
			lg, err := sim.Run(context.Background(), simPol, &workload.SliceSource{Jobs: w.jobs}, sim.Config{Cluster: w.cluster, HostGPUs: w.hostGPUs, RoundSeconds: w.roundS,
				RestartSeconds: w.restart, MinRoundGapSeconds: gap, KeepRecords: true, MaxRounds: 300})
			if err != nil {
				t.Fatal(err)
			}
			livePol, _ := policy.New(name, policy.Options{Seed: 1})
			got := runService(t, livePol, w, gap, len(lg.Records))
			for r, want := range lg.Records {
				if d := cmp.Diff(scheduleView(want), scheduleView(got[r])); d != "" {
					t.Fatalf("round %d differs (-simulator,+service):\n%s", r, d)
				}
				rounds++
				early[want.Trigger]++
			}
		})
	}
	if early[loop.TriggerArrival] == 0 || early[loop.TriggerFinish] == 0 {
		t.Errorf("rounds by trigger %v: the cases bring no round forward for an arrival or a finish", early)
	}
	t.Logf("%d rounds compared, by trigger %v", rounds, early)
}

// scheduleView is roundView with when the round ran and why.
func scheduleView(r *loop.RoundRecord) map[string]any {
	v := roundView(r)
	v["start"], v["trigger"], v["trigger_jobs"], v["credit_kept"] = r.Start, r.Trigger, r.TriggerJobs, r.CreditKept
	return v
}

// runService runs the live service's Run over loop.Harness for the given number of rounds, the
// test being the cluster: it moves the clock from event to event, adds jobs as they arrive
// and reports each as a trigger, sends a finish trigger when a task completes, and fires
// the service's timer when it is due.
func runService(t *testing.T, pol policy.Policy, w simCase, gap float64, rounds int) []*loop.RoundRecord {
	t.Helper()
	wd := newWorld(w)
	wd.style = policy.PlacementOf(pol.Name())
	clk := &virtualClock{now: sim.Epoch, regs: make(chan timerReg, 256)}
	wd.now = clk.Now
	cfg := allocator.DefaultConfig()
	cfg.RoundSeconds, cfg.RestartSeconds = w.roundS, w.restart
	done := make(chan *loop.RoundRecord, 256)
	svc := live.New(loop.New(wd, wd.h, wd.store, loop.WithPolicy(pol), loop.WithConfig(cfg), loop.WithClock(clk.Now)),
		live.WithClock(clk.Now), live.WithTimer(clk.After), live.WithEarlyRounds(secondsOf(gap)),
		live.WithRoundHook(func(r *loop.RoundRecord, err error) {
			if err != nil {
				t.Errorf("service round: %v", err)
			}
			wd.ran()
			done <- r
		}))
	wd.admit(sim.Epoch) // the jobs there at the start, before the first round
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- svc.Run(ctx, secondsOf(w.roundS)) }()
	defer func() {
		cancel()
		<-stopped
	}()
	var recs []*loop.RoundRecord
	wait := func() *loop.RoundRecord {
		select {
		case r := <-done:
			return r
		case <-time.After(10 * time.Second):
			t.Fatal("no round")
			return nil
		}
	}
	// settle waits until Run waits for a timer in the future, taking the rounds it runs
	// meanwhile, and returns that timer.
	settle := func() timerReg {
		for {
			var reg timerReg
			select {
			case reg = <-clk.regs:
			case <-time.After(10 * time.Second):
				t.Fatal("Run set no timer")
			}
			if reg.at.After(clk.Now()) {
				return reg
			}
			recs = append(recs, wait()) // due at once: the round runs
		}
	}
	recs = append(recs, wait())
	reg := settle()
	for len(recs) < rounds && !t.Failed() {
		at, tr, ok := wd.nextEvent()
		if !ok || at.After(reg.at) {
			clk.set(reg.at)
			reg.ch <- reg.at
			recs = append(recs, wait())
			reg = settle()
			continue
		}
		clk.set(at)
		if tr.Kind == loop.TriggerArrival {
			wd.admit(at)
		}
		wd.triggers <- tr
		reg = settle()
	}
	return recs[:rounds]
}

func secondsOf(s float64) time.Duration { return time.Duration(math.Ceil(s * float64(time.Second))) }

// timerReg is a timer Run set: its deadline and channel.
type timerReg struct {
	at time.Time
	ch chan time.Time
}

// virtualClock is a clock the test sets; each timer Run sets is reported on regs, and fires
// when the test sends on it (or at once when already due).
type virtualClock struct {
	mu   sync.Mutex
	now  time.Time
	regs chan timerReg
}

func (c *virtualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *virtualClock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

func (c *virtualClock) After(d time.Duration) <-chan time.Time {
	now := c.Now()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- now
	}
	c.regs <- timerReg{at: now.Add(d), ch: ch}
	return ch
}

// world is Nomad and the training tasks for the service: loop.Harness, with the tasks' true
// progress, restarts and completions advanced as the simulator's cluster advances them, from
// one round's start to the next.
type world struct {
	w        simCase
	h        *loop.Harness
	store    *progressStore
	triggers chan loop.Trigger
	now      func() time.Time
	next     int // the next job of w.jobs to arrive
	// style is the policy's placement, which cuts jobs into pieces.
	style placement.Style

	// tasks by job ID; start is the last round's start, running what it
	// left running, as observed at its start.
	tasks   map[string]*task
	start   time.Time
	before  map[string]string
	arrived map[string]bool
}

type task struct {
	spec          workload.JobSpec
	done, penalty float64
	last          string
	finished      bool
}

func newWorld(w simCase) *world {
	models := append([]allocator.Model(nil), w.cluster...)
	wd := &world{w: w, h: &loop.Harness{Models: models, Jobs: map[string]*loop.Job{}, Hosts: sim.Hosts(w.cluster, w.hostGPUs)}, triggers: make(chan loop.Trigger),
		tasks: map[string]*task{}, arrived: map[string]bool{}}
	wd.store = &progressStore{MemStore: loop.NewMemStore(true), w: wd}
	return wd
}

// Watch passes on the triggers the test sends.
func (wd *world) Watch(ctx context.Context, out chan<- loop.Trigger) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case tr := <-wd.triggers:
			out <- tr
		}
	}
}

// Observe advances the tasks to the round's start, then observes the harness.
func (wd *world) Observe(ctx context.Context) (*loop.Snapshot, error) {
	wd.advance(wd.now())
	wd.before = map[string]string{}
	for id, j := range wd.h.Jobs {
		wd.before[id] = fmt.Sprint(j.RunningModel, j.Slots)
	}
	return wd.h.Observe(ctx)
}

// ran takes a round's changes: a job that resumed or moved pays its restart; allocations
// seen complete are gone.
func (wd *world) ran() {
	wd.start = wd.now()
	for id, j := range wd.h.Jobs {
		if j.Finished {
			delete(wd.h.Jobs, id)
			continue
		}
		tk := wd.tasks[id]
		if m := j.RunningModel; m != "" && wd.before[id] != fmt.Sprint(m, j.Slots) {
			if tk.last != "" {
				tk.penalty = wd.w.restart
			}
			tk.last = m
		}
	}
}

// advance runs the tasks from the last round's start to now, as one round of that length.
func (wd *world) advance(now time.Time) {
	if wd.start.IsZero() {
		return
	}
	exact := now.Sub(wd.start)
	d := exact.Seconds()
	for id, j := range wd.h.Jobs {
		tk := wd.tasks[id]
		if j.RunningModel == "" || tk.finished {
			continue
		}
		rate := trueRate(tk.spec, j.RunningModel, j.Slots)
		finishes := secondsOf(tk.penalty+(tk.spec.Work-tk.done)/rate) <= exact
		penalty := math.Min(tk.penalty, d)
		tk.penalty -= penalty
		work := rate * (d - penalty)
		if left := tk.spec.Work - tk.done; work >= left || finishes {
			work = left
		}
		tk.done += work
		if tk.done >= tk.spec.Work {
			tk.finished = true
			j.Finished, j.Allocs, j.RunningModel = true, nil, ""
		}
	}
	wd.start = now
}

// admit adds the jobs that arrived by at, held, as Nomad holds a submitted job; one that
// fits no model is left out, as the simulator rejects it.
func (wd *world) admit(at time.Time) {
	for ; wd.next < len(wd.w.jobs) && !sim.Epoch.Add(secondsOf(wd.w.jobs[wd.next].Arrival)).After(at); wd.next++ {
		spec := wd.w.jobs[wd.next]
		wd.arrived[spec.ID] = true
		tp := map[string]float64{}
		fits := false
		for m, rate := range spec.Rate {
			tp[m] = rate * wd.w.roundS
			for _, cm := range wd.w.cluster {
				fits = fits || (cm.Name == m && cm.GPUs >= spec.GPUs)
			}
		}
		if !fits {
			continue
		}
		js := &jobmeta.Spec{Work: spec.Work, WorkUnit: "steps", Throughput: tp, SpreadThroughput: sim.SpreadThroughput(&spec, tp), Weight: 1, GPUs: spec.GPUs}
		wd.h.Set(loop.Job{ID: spec.ID, Namespace: sim.Namespace, Name: spec.ID, Gated: true, Spec: js, Pieces: sim.PiecesFor(wd.style, wd.h.Hosts, spec.GPUs)})
		wd.tasks[spec.ID] = &task{spec: spec}
	}
}

// nextEvent is the next change the watcher reports: the next arrival or the first finish
// of a task running since the last round (an arrival first at the same instant).
func (wd *world) nextEvent() (time.Time, loop.Trigger, bool) {
	type ev struct {
		at time.Time
		tr loop.Trigger
	}
	var evs []ev
	if wd.next < len(wd.w.jobs) {
		j := wd.w.jobs[wd.next]
		evs = append(evs, ev{sim.Epoch.Add(secondsOf(j.Arrival)), loop.Trigger{Kind: loop.TriggerArrival, Job: j.ID}})
	}
	now := wd.now()
	for id, j := range wd.h.Jobs {
		tk := wd.tasks[id]
		if j.RunningModel == "" || tk.finished {
			continue
		}
		at := wd.start.Add(secondsOf(tk.penalty + (tk.spec.Work-tk.done)/trueRate(tk.spec, j.RunningModel, j.Slots)))
		if at.After(now) {
			evs = append(evs, ev{at, loop.Trigger{Kind: loop.TriggerFinish, Job: id}})
		}
	}
	if len(evs) == 0 {
		return time.Time{}, loop.Trigger{}, false
	}
	sort.SliceStable(evs, func(a, b int) bool {
		if !evs[a].at.Equal(evs[b].at) {
			return evs[a].at.Before(evs[b].at)
		}
		if evs[a].tr.Kind != evs[b].tr.Kind {
			return evs[a].tr.Kind == loop.TriggerArrival
		}
		return evs[a].tr.Job < evs[b].tr.Job
	})
	return evs[0].at, evs[0].tr, true
}

// progressStore reports the tasks' true progress, as the training tasks would.
type progressStore struct {
	*loop.MemStore
	w *world
}

func (s *progressStore) Progress(context.Context) (map[string]float64, error) {
	out := map[string]float64{}
	for id, tk := range s.w.tasks {
		if _, ok := s.w.h.Jobs[id]; ok {
			out[id] = tk.done
		}
	}
	return out, nil
}
