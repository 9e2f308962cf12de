package chaos

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/e2e/agentrun"
	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// Environment variables of the suite.
const (
	// EnvLong set to 1 runs the long version (`make chaos`): 20 allocator kills.
	EnvLong = "FFT_CHAOS_LONG"
	// EnvSeed replays a run: the seed every fault's kind, target and moment come from.
	EnvSeed = "FFT_CHAOS_SEED"
	// EnvKills sets how many times the active allocator is killed (default: the version's).
	EnvKills = "FFT_CHAOS_KILLS"
	// EnvFaults replaces the version's faults: "kind=count,...", for example
	// "crash-client=4,drain-node=1", to look at one kind of fault.
	EnvFaults = "FFT_CHAOS_FAULTS"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// version is how much chaos one run injects.
type version struct {
	name     string
	replicas int
	jobs     int
	// faults counts each kind.
	faults map[string]int
	// settle is how long the jobs get to finish after the last fault.
	settle time.Duration
	// reserve is how many jobs the faults' regular arrivals leave for apply-targeted faults
	// (two each), so that those come while jobs are left.
	reserve int
}

// The kinds of fault.
const (
	faultKillLeader    = "kill-leader"    // SIGKILL of the active allocator
	faultRestartConsul = "restart-consul" // the Consul server stopped for a while, then started
	faultRestartNomad  = "restart-nomad"  // the Nomad server restarted
	faultCrashClient   = "crash-client"   // a GPU client and its tasks killed, later back
	faultDrainNode     = "drain-node"     // a GPU node drained, later eligible again
)

var (
	// short is one fault of each kind: under 3 minutes on a loaded 2-core machine (a kill
	// costs about 25 s, the leader lock's TTL twice over, as Consul expires sessions).
	short = version{name: "short", replicas: 2, jobs: 8, settle: 120 * time.Second, faults: map[string]int{
		faultKillLeader: 1, faultRestartConsul: 1, faultRestartNomad: 1, faultCrashClient: 1, faultDrainNode: 1, faultGPUUnhealthy: 1, faultRevokeToken: 1,
	}}
	long = version{name: "long", replicas: 3, jobs: 32, reserve: 12, settle: 300 * time.Second, faults: map[string]int{
		faultKillLeader: 20, faultRestartConsul: 3, faultRestartNomad: 2, faultCrashClient: 2, faultDrainNode: 2, faultGPUUnhealthy: 3, faultRevokeToken: 3,
	}}
)

// TestChaos runs training jobs through fft-allocator replicas while faults hit the allocator,
// Consul, Nomad and the GPU clients at random points of the round, then checks the invariants
// (see evidence.check) from Nomad's allocations and the Consul audit log. The seed is logged;
// FFT_CHAOS_SEED=<seed> replays the same faults in the same order at the same points of the
// round.
//
//	cd e2e/agents/nomad && FFT_E2E=1 go test -v -run TestChaos ./chaos/                    # short
//	cd e2e/agents/nomad && FFT_E2E=1 FFT_CHAOS_LONG=1 go test -v -timeout 40m -run TestChaos ./chaos/
func TestChaos(t *testing.T) {
	v := short
	if os.Getenv(EnvLong) == "1" {
		v = long
	}
	seed := time.Now().UnixNano()
	if s := os.Getenv(EnvSeed); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: want an integer seed", EnvSeed, s)
		}
	}
	if s := os.Getenv(EnvKills); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			t.Fatalf("%s=%q: want a number of kills, 0 or more", EnvKills, s)
		}
		v.faults = maps.Clone(v.faults)
		v.faults[faultKillLeader] = n
	}
	if s := os.Getenv(EnvFaults); s != "" {
		v.faults = map[string]int{}
		for _, kv := range strings.Split(s, ",") {
			kind, count, _ := strings.Cut(strings.TrimSpace(kv), "=")
			n, err := strconv.Atoi(count)
			if _, known := short.faults[kind]; !known || err != nil || n < 0 {
				t.Fatalf("%s=%q: %q: want kind=count with a kind among %v", EnvFaults, s, kv, sortedKeys(short.faults))
			}
			v.faults[kind] = n
		}
	}
	t.Logf("chaos %s: seed %d (replay with %s=%d), faults %v", v.name, seed, EnvSeed, seed, v.faults)
	rng := rand.New(rand.NewSource(seed))
	began := time.Now()

	st := startStack(t, v.replicas)
	testenv.Eventually(t, 60*time.Second, 250*time.Millisecond, "a replica takes the lead", func() error {
		if st.leader() == "" {
			return fmt.Errorf("no leader")
		}
		return nil
	})
	t.Logf("timing: stack up and a leader in %s", time.Since(began).Round(100*time.Millisecond))
	pr := &progressPoller{st: st, samples: map[string][]sample{}, stop: make(chan struct{})}
	pr.wg.Add(1)
	go pr.run()

	jobspec := trainJobspec(t)
	work := map[string]float64{}
	submit := func(n int) (submitted int) {
		for ; n > 0 && len(work) < v.jobs; n, submitted = n-1, submitted+1 {
			id := fmt.Sprintf("chaos-%02d", len(work))
			seconds, gpus := 12+rng.Intn(13), 1+rng.Intn(2)
			job, err := parseJob(st.API, jobspec, id, st.jobVars(seconds, gpus))
			if err != nil {
				t.Fatal(err)
			}
			// fftctl report in the task writes its progress with the reporter token.
			if _, _, err := st.API.Jobs().Register(withEnv(job, "CONSUL_HTTP_TOKEN", st.reporter), nil); err != nil {
				t.Fatalf("registering %s: %v", id, err)
			}
			work["default/"+id] = float64(seconds)
			t.Logf("job %s: %d s of work on %d GPUs", id, seconds, gpus)
		}
		return submitted
	}
	submit(v.jobs / 2)

	var kinds []string
	for _, k := range sortedKeys(v.faults) {
		for i := 0; i < v.faults[k]; i++ {
			kinds = append(kinds, k)
		}
	}
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	perFault := (v.jobs - v.jobs/2 - v.reserve + len(kinds) - 1) / max(1, len(kinds))
	for i, kind := range kinds {
		f0 := time.Now()
		// Jobs submitted just before an apply-targeted fault give that round two starts.
		target := drawTarget(rng)
		if target == targetApply && len(work) >= v.jobs {
			// No job left to arrive: an apply may not come at all.
			target = targets[rng.Intn(len(targets)-1)+1]
			if target == targetApply {
				target = targetTiming
			}
		}
		var arrive func() int
		switch {
		case target == targetApply:
			arrive = func() int { return submit(2) }
		case kind == faultGPUUnhealthy:
			// A job to move off the GPU, when none runs.
			arrive = func() int { return submit(1) }
		}
		st.inject(t, rng, i, kind, target, arrive)
		t.Logf("timing: fault %d (%s) took %s, recovery included", i, kind, time.Since(f0).Round(100*time.Millisecond))
		if len(work)+perFault <= v.jobs-v.reserve {
			submit(perFault)
		}
	}
	submit(v.jobs)
	settling := time.Now()
	t.Logf("%d faults injected in %s", len(kinds), time.Since(began).Round(time.Second))
	t.Log(hitSummary(st.hits))

	// Let the jobs finish, then stop the allocators so that nothing changes while reading. A
	// job that does not finish is for the invariants to judge; its allocations are logged.
	var left []string
	for deadline := time.Now().Add(v.settle); ; time.Sleep(time.Second) {
		left = left[:0]
		for _, id := range sortedKeys(work) {
			if !st.finished(strings.TrimPrefix(id, "default/")) {
				left = append(left, id)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, id := range left {
		t.Logf("%s did not finish within %s after the last fault:\n%s", id, v.settle, st.describe(strings.TrimPrefix(id, "default/")))
	}
	t.Logf("timing: the jobs finished %s after the last fault", time.Since(settling).Round(100*time.Millisecond))
	st.waitHealthyAgain(t)
	// The round that sees the last finish records it.
	st.waitRounds(t, st.nextRound(), 2, 30*time.Second, "the rounds after the last finish")
	var stopping sync.WaitGroup
	for _, p := range st.replicas {
		stopping.Add(1)
		go func() { defer stopping.Done(); p.Stop() }()
	}
	stopping.Wait()
	close(pr.stop)
	pr.wg.Wait()

	t.Logf("timing: stopped %s after the last fault", time.Since(settling).Round(100*time.Millisecond))
	e := st.collect(t, work, pr)
	violations, checked := e.check()
	for _, c := range checked {
		t.Logf("invariant checked: %s", c)
	}
	t.Log(hitSummary(st.hits))
	t.Logf("chaos %s: seed %d, %d faults, %d jobs, %d rounds (%d left as intents), %d allocations, %d progress samples, %d violations, wall %s",
		v.name, seed, len(kinds), len(work), len(e.rounds), intents(e.rounds), len(e.allocs), pr.count(), len(violations),
		time.Since(began).Round(time.Second))
	for _, v := range violations {
		t.Errorf("violation: %s", v)
	}
}

func intents(rounds []*roundRec) int {
	n := 0
	for _, r := range rounds {
		if !r.recorded() {
			n++
		}
	}
	return n
}

// inject waits for the next round to start, then for a random part of the round, and injects
// one fault of kind; it returns once the allocator runs rounds again.
func (st *stack) inject(t *testing.T, rng *rand.Rand, i int, kind, target string, arrive func() int) {
	t.Helper()
	from := st.nextRound()
	if from < 0 {
		from = st.waitRounds(t, 0, 0, 60*time.Second, "the ledger is readable")
	}
	at := st.waitRounds(t, from, 1, 60*time.Second, "a round boundary before the fault")
	var when fmt.Stringer
	tailed := ""
	if target == targetTiming {
		m := st.faultTime(rng)
		time.Sleep(time.Until(m.at))
		when = m
	} else {
		var missed string
		tailed, missed = st.waitPhase(target, arrive)
		when = phaseMoment{target: target, missed: missed}
		if missed != "" {
			tailed = ""
		}
	}
	// The phase the leader is in as the fault begins; a killed leader's is read from its log
	// once dead.
	hit := ""
	if kind != faultKillLeader {
		hit = "leader: " + st.leaderPhase(st.leader())
	}
	what := ""
	switch kind {
	case faultKillLeader:
		id := tailed
		testenv.Eventually(t, 60*time.Second, 100*time.Millisecond, "a leader to kill", func() error {
			if id == "" {
				id = st.leader()
			}
			if id == "" {
				return fmt.Errorf("no leader")
			}
			return nil
		})
		st.replicas[id].Kill()
		hit = st.leaderPhase(id)
		if err := st.replicas[id].StartAgain(); err != nil {
			t.Fatal(err)
		}
		what = id
	case faultRestartConsul:
		down := time.Duration(2+rng.Intn(5)) * time.Second
		st.consul.Stop()
		time.Sleep(down)
		if err := st.consul.StartAgain(); err != nil {
			t.Fatal(err)
		}
		st.consul.WaitReady(t, 60*time.Second)
		what = fmt.Sprintf("down %s", down)
	case faultRestartNomad:
		if err := st.Server.Restart(); err != nil {
			t.Fatal(err)
		}
		st.waitNomad(t)
	case faultCrashClient:
		c := st.clients[rng.Intn(len(st.clients))]
		down := time.Duration(6+rng.Intn(6)) * time.Second
		agent := st.Clients[c.Name]
		agent.Kill()
		// A machine that dies takes its tasks with it: no checkpoint is written.
		agentrun.KillUnder(filepath.Join(st.root, "fft-e2e-"+c.Name))
		time.Sleep(down)
		if err := agent.StartAgain(); err != nil {
			t.Fatal(err)
		}
		st.waitNode(t, c.Name)
		what = fmt.Sprintf("%s down %s", c.Name, down)
	case faultRevokeToken:
		what = st.injectRevokeToken(t, rng)
	case faultGPUUnhealthy:
		what = st.injectGPUUnhealthy(t, rng, arrive)
	case faultDrainNode:
		c := st.clients[rng.Intn(len(st.clients))]
		id := st.NodeIDs[c.Name]
		if _, err := st.API.Nodes().UpdateDrain(id, &api.DrainSpec{Deadline: 10 * time.Second}, false, nil); err != nil {
			t.Fatalf("draining %s: %v", c.Name, err)
		}
		testenv.Eventually(t, 60*time.Second, 250*time.Millisecond, "the drain completes", func() error {
			n, _, err := st.API.Nodes().Info(id, nil)
			if err != nil {
				return err
			}
			if n.DrainStrategy != nil {
				return fmt.Errorf("still draining")
			}
			return nil
		})
		time.Sleep(time.Duration(2+rng.Intn(4)) * time.Second)
		if _, err := st.API.Nodes().UpdateDrain(id, nil, true, nil); err != nil {
			t.Fatalf("making %s eligible again: %v", c.Name, err)
		}
		what = c.Name
	default:
		t.Fatalf("unknown fault %q", kind)
	}
	t.Logf("fault %d: %s %s, %s (round %d); hit: %s", i, kind, what, when, at, hit)
	st.hits = append(st.hits, faultHit{kind: kind, target: target, hit: hit})
	// Recovered once two more rounds are recorded (a standby takes the lead within the TTL).
	st.waitRounds(t, st.nextRound(), 2, 90*time.Second, "rounds after "+kind)
}

// phaseMoment is a fault injected on a phase line of the leader's log.
type phaseMoment struct{ target, missed string }

func (m phaseMoment) String() string {
	if m.missed != "" {
		return fmt.Sprintf("aimed at %s but %s: injected then", m.target, m.missed)
	}
	return fmt.Sprintf("on the leader's %s line", m.target)
}

// faultHit is one injected fault: its kind, its target and the phase it hit.
type faultHit struct{ kind, target, hit string }

// hitSummary counts the faults by kind, by target and by phase hit, for the run's log.
func hitSummary(hits []faultHit) string {
	byKind, byTarget, byHit := map[string]int{}, map[string]int{}, map[string]int{}
	for _, h := range hits {
		byKind[h.kind]++
		byTarget[h.target]++
		byHit[h.hit]++
	}
	return fmt.Sprintf("faults by kind %v; by target %v; by phase hit %v", byKind, byTarget, byHit)
}

// faultMoment is when a fault hits, relative to the round.
type faultMoment struct {
	at time.Time
	// intoRound is the time from the round's due start; busy is how long the last round
	// took (its phases), zero when the moment was drawn from the whole round.
	intoRound, busy time.Duration
}

func (m faultMoment) String() string {
	if m.busy > 0 {
		return fmt.Sprintf("%.0fms after the round's due start (rounds take about %.0fms)", ms(m.intoRound), ms(m.busy))
	}
	return fmt.Sprintf("%.0fms into the round", ms(m.intoRound))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// faultTime draws when the next fault hits: half the time anywhere in the round, half the
// time while the next round works (observing, applying, recording: a round is busy for only a
// few tens of milliseconds of its R), from the last round's start and duration.
func (st *stack) faultTime(rng *rand.Rand) faultMoment {
	round := roundSeconds * time.Second
	start, busy, ok := st.lastRound()
	if coin := rng.Intn(2); coin == 0 || !ok {
		d := time.Duration(rng.Int63n(int64(round)))
		return faultMoment{at: time.Now().Add(d), intoRound: d}
	}
	d := time.Duration(rng.Int63n(int64(busy)*3/2 + 1))
	due := start.Add(round)
	for due.Before(time.Now()) {
		due = due.Add(round)
	}
	return faultMoment{at: due.Add(d), intoRound: d, busy: busy}
}

// lastRound returns the start of the last recorded round and how long its phases took.
func (st *stack) lastRound() (time.Time, time.Duration, bool) {
	kv, err := st.kvList(prefix + "/ledger")
	if err != nil || kv[""] == nil {
		return time.Time{}, 0, false
	}
	var l struct {
		Round int       `json:"round"`
		Start time.Time `json:"start"`
	}
	if json.Unmarshal(kv[""], &l) != nil || l.Round == 0 {
		return time.Time{}, 0, false
	}
	rec, err := st.kvList(fmt.Sprintf("%s/rounds/%012d", prefix, l.Round-1))
	if err != nil || rec[""] == nil {
		return time.Time{}, 0, false
	}
	var r struct {
		Phases map[string]float64 `json:"phases"`
	}
	if json.Unmarshal(rec[""], &r) != nil {
		return time.Time{}, 0, false
	}
	busy := 0.0
	for _, d := range r.Phases {
		busy += d
	}
	return l.Start, time.Duration(busy * float64(time.Second)), busy > 0
}

func (st *stack) waitNomad(t *testing.T) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, 250*time.Millisecond, "the Nomad server elects itself again", func() error {
		leader, err := st.API.Status().Leader()
		if err != nil || leader == "" {
			return fmt.Errorf("no leader yet (%v)", err)
		}
		return nil
	})
}

func (st *stack) waitNode(t *testing.T, name string) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, 250*time.Millisecond, "client "+name+" is ready again", func() error {
		n, _, err := st.API.Nodes().Info(st.NodeIDs[name], nil)
		if err != nil {
			return err
		}
		if n.Status != api.NodeStatusReady {
			return fmt.Errorf("node status %s", n.Status)
		}
		return nil
	})
}

// finished reports whether an allocation of the job that Nomad meant to run completed.
func (st *stack) finished(id string) bool {
	stubs, _, err := st.API.Jobs().Allocations(id, true, nil)
	if err != nil {
		return false
	}
	for _, a := range stubs {
		if a.DesiredStatus == "run" && a.ClientStatus == "complete" {
			return true
		}
	}
	return false
}

// describe lists a job's status and allocations with their last task events, for a log.
func (st *stack) describe(id string) string {
	var b strings.Builder
	if job, _, err := st.API.Jobs().Info(id, nil); err == nil {
		fmt.Fprintf(&b, "  job status %s, version %d, stop %v\n", *job.Status, *job.Version, *job.Stop)
	}
	stubs, _, err := st.API.Jobs().Allocations(id, true, nil)
	if err != nil {
		return err.Error()
	}
	for _, a := range stubs {
		fmt.Fprintf(&b, "  alloc %s node %s desired %s client %s (%s)", a.ID[:8], a.NodeName, a.DesiredStatus, a.ClientStatus, a.ClientDescription)
		if ts := a.TaskStates[taskName]; ts != nil {
			for _, ev := range ts.Events[max(0, len(ts.Events)-3):] {
				fmt.Fprintf(&b, "; %s: %s", ev.Type, ev.DisplayMessage)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// progressPoller reads every job's reported progress and checkpoint file a few times a second.
type progressPoller struct {
	st   *stack
	stop chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	samples map[string][]sample
}

func (p *progressPoller) run() {
	defer p.wg.Done()
	for {
		select {
		case <-p.stop:
			return
		case <-time.After(250 * time.Millisecond):
		}
		kv, err := p.st.kvList(prefix + "/progress/")
		if err != nil {
			continue // Consul is down
		}
		now := time.Now()
		p.mu.Lock()
		for id, raw := range kv {
			done, err := strconv.ParseFloat(strings.TrimSpace(string(raw)), 64)
			if err != nil {
				// A report taken with a workload identity is JSON, with its allocation.
				var r struct {
					Done *float64 `json:"done"`
				}
				if json.Unmarshal(raw, &r) != nil || r.Done == nil {
					continue
				}
				done = *r.Done
			}
			ckpt := -1.0
			ns, job, _ := strings.Cut(id, "/")
			if b, err := os.ReadFile(filepath.Join(p.st.ckptDir, ns+"."+job)); err == nil {
				if c, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64); err == nil {
					ckpt = c
				}
			}
			s := p.samples[id]
			if len(s) == 0 || s[len(s)-1].done != done || s[len(s)-1].ckpt != ckpt {
				p.samples[id] = append(s, sample{at: now, done: done, ckpt: ckpt})
			}
		}
		p.mu.Unlock()
	}
}

func (p *progressPoller) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, s := range p.samples {
		n += len(s)
	}
	return n
}

// collect reads the evidence of the run.
func (st *stack) collect(t *testing.T, work map[string]float64, pr *progressPoller) *evidence {
	t.Helper()
	e := &evidence{work: work, ledger: map[string]jobRec{}, samples: pr.samples, applies: map[int]int{}, capacity: map[string]int{}, hostCapacity: map[string]int{},
		flips: st.flips, revocations: st.revocations}
	for _, c := range st.clients {
		e.capacity[c.Model] += c.Count
		e.hostCapacity[st.NodeIDs[c.Name]] = c.Count
	}
	q := &api.QueryOptions{Params: map[string]string{"resources": "true"}}
	stubs, _, err := st.API.Allocations().List(q)
	if err != nil {
		t.Fatalf("listing allocations: %v", err)
	}
	for _, s := range stubs {
		id := s.Namespace + "/" + s.JobID
		if _, ok := work[id]; !ok {
			continue
		}
		a := allocRec{ID: s.ID, Job: id, Node: s.NodeID, Created: time.Unix(0, s.CreateTime), Desired: s.DesiredStatus, Client: s.ClientStatus}
		if s.AllocatedResources != nil {
			for _, tr := range s.AllocatedResources.Tasks {
				for _, d := range tr.Devices {
					a.Model, a.GPUs, a.DeviceIDs = d.Name, len(d.DeviceIDs), d.DeviceIDs
				}
			}
		}
		if ts := s.TaskStates[taskName]; ts != nil {
			a.Started, a.Done = ts.StartedAt, ts.FinishedAt
			if ts.State != "dead" {
				a.Done = time.Time{}
			}
		}
		e.allocs = append(e.allocs, a)
	}
	rounds, err := st.kvList(prefix + "/rounds/")
	if err != nil {
		t.Fatalf("reading the audit log: %v", err)
	}
	for _, k := range sortedKeys(rounds) {
		var r roundRec
		if err := json.Unmarshal(rounds[k], &r); err != nil {
			t.Fatalf("decoding round %s: %v", k, err)
		}
		if n, err := strconv.Atoi(k); err != nil || n != r.Round {
			t.Errorf("audit key %s holds round %d", k, r.Round)
		}
		if r.start, err = time.Parse(time.RFC3339Nano, r.Start); err != nil {
			t.Fatalf("round %d start %q: %v", r.Round, r.Start, err)
		}
		e.rounds = append(e.rounds, &r)
	}
	jobs, err := st.kvList(prefix + "/jobs/")
	if err != nil {
		t.Fatalf("reading the ledger: %v", err)
	}
	for key, raw := range jobs {
		// Layout 2: each key is a chunk of records by job ID.
		var chunk map[string]jobRec
		if err := json.Unmarshal(raw, &chunk); err != nil {
			t.Fatalf("decoding job chunk %s: %v", key, err)
		}
		maps.Copy(e.ledger, chunk)
	}
	e.next = st.nextRound()
	logs, _ := filepath.Glob(filepath.Join(st.root, "fft-allocator-*.log*"))
	for _, path := range logs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		countApplies(string(b), e.applies)
		for _, line := range strings.Split(string(b), "\n") {
			if deniedLine.MatchString(line) {
				if e.deniedFailures == 0 {
					t.Logf("Consul refused the allocators, e.g.: %s", line)
				}
				e.deniedFailures++
			}
		}
	}
	if len(e.revocations) > 0 {
		t.Logf("%d allocator log lines report Consul's refusal", e.deniedFailures)
	}
	return e
}
