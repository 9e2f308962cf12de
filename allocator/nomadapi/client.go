package nomadapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/jobmeta"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/placement"
)

var (
	_ loop.Observer = (*Client)(nil)
	_ loop.Applier  = (*Client)(nil)
)

// Client observes and changes a Nomad cluster for the allocator service.
// Observe caches each job by its JobModifyIndex, kept current by Nomad's
// event stream while Follow runs, so a round costs 3 list calls plus one
// read per new or changed job the stream has not brought (every job, the
// first round). Apply acts on the jobs the last Observe returned, several
// jobs at once (WithApplyConcurrency).
type Client struct {
	nomad *api.Client
	log   hclog.Logger
	// pool is the GPU node pool ("": none; every node counts and only the
	// gate holds jobs).
	pool string
	// watchEvery is the least time between two blocking queries on one list.
	watchEvery time.Duration
	watchCalls atomic.Int64
	// applyWorkers is how many jobs Apply writes at once.
	applyWorkers int

	mu sync.Mutex
	// jobs caches full jobs by "namespace/id", from reads and the event
	// stream; a job Apply writes is dropped (Apply changes the cached
	// value), so the next Observe takes it from the stream or reads it.
	jobs map[string]*api.Job
	// failedEvals are, by job, the newest evaluation the event stream
	// showed finish with placements failed (streamedRefusal).
	failedEvals map[string]*api.Evaluation
	// reread are the jobs dropped whose write failed: no event brings
	// them back, so the next Observe reads them without waiting.
	reread map[string]bool
	// feed is the event stream's state (stream.go); streamWait bounds how
	// long Observe waits for it.
	feed       feed
	streamWait time.Duration
	// streamRetry is the first wait before subscribing again.
	streamRetry time.Duration
	// listIndex is the index of the last job list: one lower means
	// Nomad's state went back (resync).
	listIndex uint64
	// listed is the job list as the stream keeps it (joblist.go): the
	// last full list, listed at listedAt while the stream's subscription
	// listEpoch was open (0: none) at index fullIndex, with every streamed job since; gone
	// are the purges streamed since, by index. relist makes the next
	// round list every job.
	listed        map[string]*api.JobListStub
	gone          map[string]uint64
	listEpoch     uint64
	fullIndex     uint64
	listedAt      time.Time
	relist        bool
	fullListEvery time.Duration
	// poolWarning is the last warning logged about the GPU pool, so that a
	// lasting condition is logged once.
	poolWarning string
	// progressEvery is how often a long read or apply logs how far it got
	// (0: never).
	progressEvery time.Duration
	// observed are the managed jobs the last Observe saw (nil before the
	// first): the watcher's baseline when it starts after an observation.
	observed map[string]bool
	// parsed is what the last Observe read from each managed job's spec (Observe's own: rounds
	// observe one at a time).
	parsed map[string]parsedJob
	// stopsSent are, by allocation ID, when Apply last asked Nomad to stop
	// it (stopOnce); now is the clock they are read on.
	stopsSent map[string]time.Time
	now       func() time.Time
}

// restopAfter is how long Apply trusts a stop Nomad accepted. Nomad marks the
// allocation to stop only when its scheduler has run the stop's evaluation;
// until then the allocation still shows as meant to run, and a round parks
// the job again. Another stop would only add an evaluation to a scheduler
// that is already behind (the 5,000-job benchmark re-stopped 32 allocations
// a round for 4 rounds), so one is sent again only once this has passed, in
// case that evaluation failed.
const restopAfter = 2 * time.Minute

// parsedJob is what Observe reads from a job's spec alone, kept while the cache holds the
// same *api.Job: a job Apply edits leaves the cache first, and a new version is a new
// pointer, so at 20,000 jobs a round parses only the jobs that changed.
type parsedJob struct {
	job           *api.Job
	spec          *jobmeta.Spec
	err           error
	gated, inPool bool
	model         string
	pieces        []int
	pinned        []string
}

// parseJob reads job's spec; pool is the client's GPU node pool.
func parseJob(job *api.Job, pool string) parsedJob {
	spec, err := jobmeta.Parse(job.Meta, GPUDemand(job))
	return parsedJob{job: job, spec: spec, err: err, gated: Gated(job), inPool: InPool(job, pool),
		model: SteeredModel(job), pieces: GPUPieces(job), pinned: PinnedNodes(job)}
}

// New returns a Client over a Nomad API client, with no GPU node pool.
func New(nomad *api.Client, log hclog.Logger) *Client {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Client{nomad: nomad, log: log, jobs: map[string]*api.Job{}, reread: map[string]bool{}, failedEvals: map[string]*api.Evaluation{}, watchEvery: watchInterval,
		applyWorkers: DefaultApplyConcurrency, streamWait: defaultStreamWait, streamRetry: streamBackoff,
		listed: map[string]*api.JobListStub{}, gone: map[string]uint64{}, fullListEvery: defaultFullListEvery,
		progressEvery: progressEvery, stopsSent: map[string]time.Time{}, now: time.Now}
}

// WithApplyConcurrency sets how many jobs Apply writes at once (at least
// 1; default DefaultApplyConcurrency) and returns the client.
func (c *Client) WithApplyConcurrency(n int) *Client {
	c.applyWorkers = max(1, n)
	return c
}

// WithNodePool sets the GPU node pool and returns the client: capacity is
// counted on that pool's nodes only, a managed job outside it is held, and
// a start moves the job into it. "" counts every node and holds jobs with
// the gate alone.
func (c *Client) WithNodePool(pool string) *Client {
	c.pool = pool
	return c
}

func jobKey(ns, id string) string { return ns + "/" + id }

// Observe reads GPU capacity per model and the FFT-managed jobs with their
// allocations.
func (c *Client) Observe(ctx context.Context) (*loop.Snapshot, error) {
	snap := &loop.Snapshot{WatchCalls: int(c.watchCalls.Swap(0))}
	models, hosts, unhealthy, calls, err := c.capacity(ctx)
	snap.Calls += calls
	if err != nil {
		return nil, err
	}
	snap.Models = models
	defer func() {
		// The hosts with what the managed jobs hold on them.
		held := make(map[string][]placement.Slot, len(snap.Jobs))
		for _, j := range snap.Jobs {
			if len(j.Slots) > 0 {
				held[j.ID] = j.Slots
			}
		}
		snap.Hosts = placement.WithJobs(hosts, held)
	}()

	c.mu.Lock()
	c.awaitFirstSubscription(ctx)
	covers := c.streamCovers()
	fromStream := c.listFromStream()
	c.mu.Unlock()
	var (
		stubs            []*api.JobListStub
		index            uint64
		listed, resynced bool
	)
	if fromStream {
		stubs, index, listed, resynced, err = c.streamedList(ctx)
		snap.Calls++
		if err != nil {
			return nil, err
		}
	}
	if !listed {
		var back bool
		stubs, index, back, err = c.fullList(ctx)
		snap.Calls++
		if err != nil {
			return nil, err
		}
		resynced = resynced || back
	}
	if resynced {
		covers = false
	}
	c.markFrom(index)
	reads, err := c.refresh(ctx, stubs, covers)
	snap.Calls += reads
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	present := map[string]bool{}
	dead := map[string]bool{}
	var managed []*api.Job
	c.observed = map[string]bool{}
	for _, s := range stubs {
		if !candidate(s) {
			continue
		}
		key := jobKey(s.Namespace, s.ID)
		present[key] = true
		dead[key] = s.Status == "dead"
		job := c.jobs[key]
		if job == nil {
			// Purged between the list and its read: the next round sees it gone.
			continue
		}
		if jobmeta.Managed(job.Meta) {
			c.observed[key] = true
			managed = append(managed, job)
		}
	}
	for key := range c.jobs {
		if !present[key] {
			delete(c.jobs, key)
		}
	}
	for key := range c.failedEvals {
		if !present[key] {
			delete(c.failedEvals, key)
		}
	}
	// The jobs in managed stay as they are (Apply edits only jobs it took
	// out of the cache): the lock need not cover the rest, and the event
	// stream goes on meanwhile.
	c.mu.Unlock()
	if len(managed) == 0 {
		return snap, nil
	}

	aq := (&api.QueryOptions{Namespace: "*", Params: map[string]string{"resources": "true"}}).WithContext(ctx)
	allocs, _, err := c.nomad.Allocations().List(aq)
	snap.Calls++
	if err != nil {
		return nil, fmt.Errorf("listing allocations: %w", needs(err, capReadJob))
	}
	byJob := map[string][]*api.AllocationListStub{}
	for _, a := range allocs {
		key := jobKey(a.Namespace, a.JobID)
		byJob[key] = append(byJob[key], a)
	}
	parsed := make(map[string]parsedJob, len(managed))
	defer func() { c.parsed = parsed }()
	snap.Jobs = make([]loop.Job, 0, len(managed))
	for _, job := range managed {
		key := jobKey(deref(job.Namespace), deref(job.ID))
		p, ok := c.parsed[key]
		if !ok || p.job != job {
			p = parseJob(job, c.pool)
		}
		parsed[key] = p
		if p.err != nil {
			snap.Invalid = append(snap.Invalid, loop.Invalid{ID: key, Err: p.err.Error()})
			continue
		}
		j := loop.Job{
			ID: key, Namespace: deref(job.Namespace), Name: deref(job.ID), Spec: p.spec,
			Gated: p.gated, OffPool: !p.inPool, Model: p.model, Pieces: p.pieces, Pinned: p.pinned,
		}
		if job.JobModifyIndex != nil {
			j.ModifyIndex = *job.JobModifyIndex
		}
		if job.CreateIndex != nil {
			j.CreateIndex = *job.CreateIndex
		}
		observeAllocs(&j, byJob[key], dead[key])
		j.UnhealthyGPU = holdsUnhealthy(byJob[key], unhealthy)
		if !j.Held() && !j.Finished && len(j.Allocs) == 0 && len(j.Pinned) > 0 {
			// Started and pinned, yet nothing placed: why, from the stream's
			// evaluations, else ask Nomad.
			why, ok := c.streamedRefusal(&j, covers)
			if !ok {
				why, err = c.refused(ctx, &j)
				snap.Calls++
				if err != nil {
					return nil, fmt.Errorf("reading the evaluations of job %q: %w", key, needs(err, capReadJob))
				}
			}
			j.Refused = why
		}
		snap.Jobs = append(snap.Jobs, j)
	}
	sort.Slice(snap.Jobs, func(a, b int) bool { return snap.Jobs[a].ID < snap.Jobs[b].ID })
	sort.Slice(snap.Invalid, func(a, b int) bool { return snap.Invalid[a].ID < snap.Invalid[b].ID })
	return snap, nil
}

// refused is Nomad's reason for not placing the job's current version: its
// newest evaluation for that version that finished with placements failed,
// "" when there is none (Nomad has not answered yet, or placed it).
func (c *Client) refused(ctx context.Context, j *loop.Job) (string, error) {
	evals, _, err := c.nomad.Jobs().Evaluations(j.Name, (&api.QueryOptions{Namespace: j.Namespace}).WithContext(ctx))
	if err != nil {
		return "", err
	}
	var newest *api.Evaluation
	for _, e := range evals {
		if e.Status != api.EvalStatusComplete || len(e.FailedTGAllocs) == 0 || e.JobModifyIndex < j.ModifyIndex {
			continue
		}
		if newest == nil || e.CreateIndex > newest.CreateIndex {
			newest = e
		}
	}
	if newest == nil {
		return "", nil
	}
	return placementFailure(newest.FailedTGAllocs), nil
}

// placementFailure says, as Nomad's CLI does, why each task group was not
// placed: the constraints that filtered nodes and the resources exhausted.
func placementFailure(failed map[string]*api.AllocationMetric) string {
	var parts []string
	for _, tg := range slices.Sorted(maps.Keys(failed)) {
		m := failed[tg]
		if m == nil {
			continue
		}
		var why []string
		for _, c := range slices.Sorted(maps.Keys(m.ConstraintFiltered)) {
			why = append(why, fmt.Sprintf("constraint %s filtered %d node(s)", c, m.ConstraintFiltered[c]))
		}
		for _, d := range slices.Sorted(maps.Keys(m.DimensionExhausted)) {
			why = append(why, fmt.Sprintf("%s exhausted on %d node(s)", d, m.DimensionExhausted[d]))
		}
		if len(why) == 0 {
			why = append(why, fmt.Sprintf("%d node(s) evaluated, none feasible", m.NodesEvaluated))
		}
		parts = append(parts, fmt.Sprintf("task group %q: %s", tg, strings.Join(why, "; ")))
	}
	return strings.Join(parts, "; ")
}

// candidate reports whether a listed job may be one the allocator manages:
// not stopped, and not a system or sysbatch job (those run on every node).
func candidate(s *api.JobListStub) bool {
	return !s.Stop && s.Type != "system" && s.Type != "sysbatch"
}

// observeAllocs fills the job's live allocations, the model they hold and
// whether the job finished: an allocation Nomad meant to run completed and
// none is left running, or one failed (or was lost), none replaces it and
// Nomad marks the job dead. A stopped allocation (desired status stop, as a
// park leaves it) is neither.
func observeAllocs(j *loop.Job, allocs []*api.AllocationListStub, dead bool) {
	completed, failed := false, false
	sort.Slice(allocs, func(a, b int) bool { return allocs[a].ID < allocs[b].ID })
	for _, a := range allocs {
		if a.DesiredStatus != api.AllocDesiredStatusRun {
			continue
		}
		switch a.ClientStatus {
		case api.AllocClientStatusPending, api.AllocClientStatusRunning:
			j.Allocs = append(j.Allocs, a.ID)
			j.RunID += a.CreateIndex
			for _, ts := range a.TaskStates {
				if ts != nil {
					j.RunID += ts.Restarts
				}
			}
			if m := allocModel(a); m != "" {
				j.RunningModel = m
			}
			if n := allocGPUCount(a); n > 0 {
				j.Slots = append(j.Slots, placement.Slot{Host: a.NodeID, GPUs: n})
			}
		case api.AllocClientStatusComplete:
			completed = true
		case api.AllocClientStatusFailed, api.AllocClientStatusLost:
			failed = true
		}
	}
	if len(j.Allocs) > 0 && j.RunningModel == "" {
		j.RunningModel = j.Model // the list did not carry resources
	}
	switch {
	case len(j.Allocs) > 0:
	case completed:
		j.Finished = true
	case failed && dead:
		j.Finished, j.Failed = true, true
	}
}

// unhealthyGPUs are, per node ID, the GPU instance IDs Nomad reports
// unhealthy (fake GPUs share UUIDs across nodes, so the node is part of the key).
type unhealthyGPUs map[string]map[string]bool

// holdsUnhealthy reports whether a live allocation (meant to run, pending or
// running) holds a GPU its node reports unhealthy: Nomad does not move it.
func holdsUnhealthy(allocs []*api.AllocationListStub, bad unhealthyGPUs) bool {
	for _, a := range allocs {
		live := a.ClientStatus == api.AllocClientStatusPending || a.ClientStatus == api.AllocClientStatusRunning
		if a.DesiredStatus != api.AllocDesiredStatusRun || !live || bad[a.NodeID] == nil {
			continue
		}
		for _, d := range allocGPUs(a) {
			for _, id := range d.DeviceIDs {
				if bad[a.NodeID][id] {
					return true
				}
			}
		}
	}
	return false
}

// allocGPUCount is how many GPU instances the allocation holds.
func allocGPUCount(a *api.AllocationListStub) int {
	n := 0
	for _, d := range allocGPUs(a) {
		n += len(d.DeviceIDs)
	}
	return n
}

func allocModel(a *api.AllocationListStub) string {
	if gpus := allocGPUs(a); len(gpus) > 0 {
		return gpus[0].Name
	}
	return ""
}

// allocGPUs are the GPU devices (the device plugin's vendor and type) the
// allocation's tasks hold (Tasks is a map: a gang's tasks hold one model).
func allocGPUs(a *api.AllocationListStub) []*api.AllocatedDeviceResource {
	if a.AllocatedResources == nil {
		return nil
	}
	var out []*api.AllocatedDeviceResource
	for _, t := range a.AllocatedResources.Tasks {
		for _, d := range t.Devices {
			if d != nil && d.Vendor == GPUVendor && d.Type == GPUType {
				out = append(out, d)
			}
		}
	}
	return out
}

// capacity counts healthy GPUs per model on ready, eligible, undrained
// nodes of the GPU pool (every node without one), per model and per host
// (one host per node and model), and returns the unhealthy ones by node. It asks for node resources in the list (one call); a node
// the list shows without resources is read on its own.
func (c *Client) capacity(ctx context.Context) ([]allocator.Model, []placement.Host, unhealthyGPUs, int, error) {
	calls := 1
	nodes, _, err := c.nomad.Nodes().List((&api.QueryOptions{Params: map[string]string{"resources": "true"}}).WithContext(ctx))
	if err != nil {
		return nil, nil, nil, calls, fmt.Errorf("listing nodes: %w", needs(err, capNodeRead))
	}
	gpus := map[string]int{}
	var hosts []placement.Host
	bad := unhealthyGPUs{}
	outside := 0
	for _, n := range nodes {
		if n.Status != api.NodeStatusReady || n.SchedulingEligibility != api.NodeSchedulingEligible || n.Drain {
			continue
		}
		res := n.NodeResources
		if res == nil {
			node, _, err := c.nomad.Nodes().Info(n.ID, (&api.QueryOptions{}).WithContext(ctx))
			calls++
			if err != nil {
				return nil, nil, nil, calls, fmt.Errorf("reading node %s: %w", n.ID, needs(err, capNodeRead))
			}
			res = node.NodeResources
		}
		if res == nil {
			continue
		}
		in := c.pool == "" || n.NodePool == c.pool
		for _, d := range res.Devices {
			if d == nil || d.Vendor != GPUVendor || d.Type != GPUType || d.Name == "" {
				continue
			}
			before := gpus[d.Name]
			for _, inst := range d.Instances {
				switch {
				case inst == nil:
				case !inst.Healthy:
					if bad[n.ID] == nil {
						bad[n.ID] = map[string]bool{}
					}
					bad[n.ID][inst.ID] = true
				case in:
					gpus[d.Name]++
				default:
					outside++
				}
			}
			if healthy := gpus[d.Name] - before; healthy > 0 {
				hosts = append(hosts, placement.Host{ID: n.ID, Name: n.Name, Model: d.Name, GPUs: healthy})
			}
		}
	}
	sort.Slice(hosts, func(a, b int) bool {
		if hosts[a].Model != hosts[b].Model {
			return hosts[a].Model < hosts[b].Model
		}
		return hosts[a].ID < hosts[b].ID
	})
	models := make([]allocator.Model, 0, len(gpus))
	inside := 0
	for name, n := range gpus {
		models = append(models, allocator.Model{Name: name, GPUs: n})
		inside += n
	}
	sort.Slice(models, func(a, b int) bool { return models[a].Name < models[b].Name })
	c.warnPool(poolWarning(c.pool, inside, outside))
	return models, hosts, bad, calls, nil
}

// warnPool logs a warning about the GPU pool when it differs from the last
// one, so a lasting condition is logged once.
func (c *Client) warnPool(w string) {
	c.mu.Lock()
	changed := w != c.poolWarning
	c.poolWarning = w
	c.mu.Unlock()
	if changed && w != "" {
		c.log.Warn(w)
	}
}

// poolWarning says what is wrong with the GPU pool given the healthy GPUs
// on usable nodes inside and outside it; "" when nothing is.
func poolWarning(pool string, inside, outside int) string {
	switch {
	case pool == "":
		return ""
	case inside == 0 && outside == 0:
		return fmt.Sprintf("no healthy GPUs on ready, eligible nodes in node pool %q (fft-allocator -node-pool): put each GPU client in it with client { node_pool = %q }", pool, pool)
	case inside == 0:
		return fmt.Sprintf("no healthy GPUs on ready, eligible nodes in node pool %q (fft-allocator -node-pool), but %d on nodes in other pools: put each GPU client in it with client { node_pool = %q }, or set -node-pool to their pool (\"\" counts every node and holds jobs with the gate alone)", pool, outside, pool)
	case outside > 0:
		return fmt.Sprintf("%d healthy GPUs are on nodes outside node pool %q (fft-allocator -node-pool): FFT does not count them, and jobs in those pools may be placed on them without FFT", outside, pool)
	}
	return ""
}

// Apply carries out the plan: parks first (gate, then stop the job's
// allocations; the gate blocks their reschedule), then migrations and
// starts (move the job into the GPU pool, lift the gate and steer the GPU
// request to the model, in one registration). Within each stage up to
// WithApplyConcurrency jobs are written at once; one job's calls stay in
// order. Every job write is a check-and-set registration at the
// JobModifyIndex the round observed, so a user's concurrent update wins and
// the job is re-read next round. A change the job already shows costs no
// call, nor does a stop Apply sent within restopAfter. Every change ends
// applied, a conflict or an error naming its job.
func (c *Client) Apply(ctx context.Context, p *loop.Plan) loop.ApplyResult {
	var (
		mu  sync.Mutex
		res loop.ApplyResult
	)
	var pool []loop.Change
	for _, ch := range p.Keep {
		if c.holdsInPool(ch) {
			pool = append(pool, ch)
		}
	}
	changes := len(p.Park) + len(p.Migrate) + len(p.Start)
	c.forgetOldStops()
	// With one "applied" line per change, it tells how far an apply got.
	c.log.Trace("applying", "changes", changes, "holding_in_pool", len(pool))
	prog := startProgress(c.log, c.progressEvery, "applying the round's changes", changes+len(pool))
	defer prog.end()
	for _, stage := range [][]loop.Change{p.Park, slices.Concat(p.Migrate, p.Start, pool)} {
		_ = forEach(ctx, len(stage), c.applyWorkers, func(ctx context.Context, k int) error {
			ch := stage[k]
			calls, err := c.apply(ctx, ch)
			prog.add()
			mu.Lock()
			defer mu.Unlock()
			res.Calls += calls
			switch {
			case errors.Is(err, errConflict):
				res.Conflicts = append(res.Conflicts, ch.Job.ID)
			case err != nil:
				res.Errors = append(res.Errors, fmt.Sprintf("%s %s: %v", ch.Action, ch.Job.ID, err))
			case ch.Action == loop.ActionKeep:
				res.HeldInPool++
			default:
				if res.Applied == nil {
					res.Applied = map[loop.Action]int{}
				}
				res.Applied[ch.Action]++
			}
			return nil
		})
	}
	// The same plan gives the same record, whichever write finished first.
	sort.Strings(res.Conflicts)
	sort.Strings(res.Errors)
	return res
}

var errConflict = errors.New("job modify index changed")

// stopOnce asks Nomad to stop an allocation unless Apply asked within
// restopAfter, and reports whether it sent the request.
func (c *Client) stopOnce(ctx context.Context, namespace, id string) (sent bool, err error) {
	c.mu.Lock()
	at, pending := c.stopsSent[id]
	pending = pending && c.now().Sub(at) < restopAfter
	c.mu.Unlock()
	if pending {
		return false, nil
	}
	wq := (&api.QueryOptions{Namespace: namespace}).WithContext(ctx)
	if _, err := c.nomad.Allocations().Stop(&api.Allocation{ID: id, Namespace: namespace}, wq); err != nil {
		return true, err
	}
	c.mu.Lock()
	c.stopsSent[id] = c.now()
	c.mu.Unlock()
	return true, nil
}

// forgetOldStops drops the stops older than restopAfter, so the memory holds
// only the last minutes' parks.
func (c *Client) forgetOldStops() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for id, at := range c.stopsSent {
		if now.Sub(at) >= restopAfter {
			delete(c.stopsSent, id)
		}
	}
}

// holdsInPool reports whether Apply moves the kept job into the GPU pool
// behind the gate: a held job outside the pool, with no allocation. Its
// blocked evaluation then knows the GPU nodes and that they cannot take it.
// Outside the pool it has never seen them, and Nomad re-runs such an
// evaluation whenever any GPU frees: with thousands of jobs waiting that is
// thousands of evaluations per parked job, and Nomad 1.6.1's blocked
// evaluations' statistics copy a map with an entry per blocked job at each
// one, holding its state store meanwhile: Nomad writes waited 11-22 s
// in a round of 3 of 5 runs of the 5,000-job benchmark
// (cmd/fft-allocator/README.md).
func (c *Client) holdsInPool(ch loop.Change) bool {
	return ch.Action == loop.ActionKeep && ch.Model == "" && c.pool != "" && ch.Job.OffPool && len(ch.Job.Allocs) == 0
}

// apply makes one change and returns the API calls it made.
func (c *Client) apply(ctx context.Context, ch loop.Change) (calls int, err error) {
	j := ch.Job
	if ch.Action != loop.ActionStart && ch.Action != loop.ActionMigrate && ch.Action != loop.ActionPark && !c.holdsInPool(ch) {
		return 0, nil
	}
	c.mu.Lock()
	cached := c.jobs[j.ID]
	if cached == nil || cached.JobModifyIndex == nil || *cached.JobModifyIndex != j.ModifyIndex {
		// Changed since the round observed it: the cache holds the newer
		// version, or the stream brings it.
		c.mu.Unlock()
		return 0, fmt.Errorf("%w: the job is not the one observed", errConflict)
	}
	// The change edits the cached job: take it out, so the next round
	// takes the job as Nomad has it from the stream, or reads it.
	delete(c.jobs, j.ID)
	c.mu.Unlock()
	defer func() {
		if err != nil && !errors.Is(err, errConflict) {
			c.mu.Lock()
			c.reread[j.ID] = true
			c.mu.Unlock()
		}
	}()
	job := cached
	changed := false
	switch ch.Action {
	case loop.ActionStart, loop.ActionMigrate:
		changed = SetPool(job, c.pool)
		changed = SetGate(job, false) || changed
		if len(ch.Slots) > 0 {
			changed = Pin(job, ch.Hosts()) || changed
		}
		if SteeredModel(job) != ch.Model {
			if err := Steer(job, ch.Model); err != nil {
				return calls, err
			}
			changed = true
		}
	case loop.ActionKeep:
		changed = SetGate(job, true)
		changed = SetPool(job, c.pool) || changed
	case loop.ActionPark:
		changed = SetGate(job, true)
		// The pin goes too: a constraint on a unique attribute makes the
		// parked job's blocked evaluation escape Nomad's node classes, and
		// Nomad re-runs an escaped one whenever an allocation ends (see
		// holdsInPool). The round pins the job again when it starts it.
		changed = Pin(job, nil) || changed
	}
	if changed {
		wq := (&api.WriteOptions{Namespace: j.Namespace}).WithContext(ctx)
		_, _, err := c.nomad.Jobs().EnforceRegister(job, j.ModifyIndex, wq)
		calls++
		if err != nil {
			// Nomad reports a lost check-and-set only in the message (its
			// own CLI tests for the same prefix).
			if strings.Contains(err.Error(), api.RegisterEnforceIndexErrPrefix) {
				// The job changed or went in a way the stream may not show
				// (a purge by the garbage collector): list every job next round.
				c.mu.Lock()
				c.relist = true
				c.mu.Unlock()
				return calls, fmt.Errorf("%w: %v", errConflict, err)
			}
			return calls, fmt.Errorf("registering: %w", needs(err, capSubmitJob))
		}
	} else {
		// Nothing written, nothing edited: the cached job is still Nomad's.
		c.mu.Lock()
		if c.jobs[j.ID] == nil {
			c.jobs[j.ID] = cached
		}
		c.mu.Unlock()
	}
	if ch.Action == loop.ActionPark {
		for _, id := range j.Allocs {
			sent, err := c.stopOnce(ctx, j.Namespace, id)
			if sent {
				calls++
			}
			if err != nil {
				return calls, fmt.Errorf("stopping allocation %s: %w", id, needs(err, capAllocLifecycle))
			}
		}
	}
	if ch.Action == loop.ActionKeep {
		c.log.Debug("held in the GPU pool behind the gate", "job", j.ID, "pool", c.pool)
		return calls, nil
	}
	c.log.Info("applied", "action", ch.Action, "job", j.ID, "model", ch.Model, "nodes", ch.Hosts())
	return calls, nil
}
