package nomadapi

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/placement"
)

// fakeNomad serves the few Nomad HTTP API paths the Client uses, from
// in-memory nodes, jobs and allocations, and records every request.
type fakeNomad struct {
	mu        sync.Mutex
	nodes     []*api.NodeListStub
	jobs      map[string]*api.Job
	allocs    []*api.AllocationListStub
	requests  []string
	registers []*api.JobRegisterRequest
	stopped   []string
	// The event stream (stream_test.go): lines to send, the answer code
	// when not 0, and whether a registration publishes its job.
	stream        chan string
	headerIndex   uint64
	streamDelay   time.Duration
	subscriptions []string
	streamCode    int
	autoEvents    bool
	index         uint64
	fullLists     int
	// failRegister answers a registration of these job IDs with a 500.
	failRegister map[string]bool
	// delay holds every request that long before it is served (outside
	// the lock); inflight and maxInflight count requests being served.
	delay                 time.Duration
	inflight, maxInflight atomic.Int64
}

func (f *fakeNomad) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := f.inflight.Add(1)
	defer f.inflight.Add(-1)
	for m := f.maxInflight.Load(); n > m && !f.maxInflight.CompareAndSwap(m, n); m = f.maxInflight.Load() {
	}
	time.Sleep(f.delay)
	if r.URL.Path == "/v1/event/stream" {
		f.serveStream(w, r)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r.Method+" "+r.URL.Path)
	w.Header().Set("X-Nomad-Index", fmt.Sprint(max(1, f.headerIndex, f.index)))
	send := func(v any) { _ = json.NewEncoder(w).Encode(v) }
	switch {
	case r.URL.Path == "/v1/nodes":
		send(f.nodes)
	case r.URL.Path == "/v1/jobs" && r.Method == http.MethodGet:
		var stubs []*api.JobListStub
		for _, id := range slices.Sorted(maps.Keys(f.jobs)) {
			j := f.jobs[id]
			stub := &api.JobListStub{ID: *j.ID, Namespace: *j.Namespace, Type: *j.Type, JobModifyIndex: *j.JobModifyIndex, ModifyIndex: derefIndex(j.ModifyIndex), Status: cmp.Or(deref(j.Status), "pending"), Stop: j.Stop != nil && *j.Stop}
			if r.URL.Query().Get("meta") == "true" {
				stub.Meta = j.Meta
			}
			stubs = append(stubs, stub)
		}
		if r.URL.Query().Get("per_page") == "1" {
			stubs = stubs[:min(1, len(stubs))]
		} else {
			f.fullLists++
		}
		send(stubs)
	case strings.HasPrefix(r.URL.Path, "/v1/job/") && r.Method == http.MethodGet:
		send(f.jobs[strings.TrimPrefix(r.URL.Path, "/v1/job/")])
	case (r.URL.Path == "/v1/jobs" || strings.HasPrefix(r.URL.Path, "/v1/job/")) && r.Method != http.MethodGet:
		var req api.JobRegisterRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		if f.failRegister[*req.Job.ID] {
			http.Error(w, "no leader", http.StatusInternalServerError)
			return
		}
		cur := f.jobs[*req.Job.ID]
		if req.EnforceIndex && req.JobModifyIndex != *cur.JobModifyIndex {
			http.Error(w, "1 error occurred:\n\t* Enforcing job modify index "+
				"10: job exists with conflicting job modify index: 11", http.StatusInternalServerError)
			return
		}
		f.registers = append(f.registers, &req)
		idx := max(*cur.JobModifyIndex, f.index) + 1
		f.index = idx
		req.Job.JobModifyIndex, req.Job.ModifyIndex = &idx, &idx
		f.jobs[*req.Job.ID] = req.Job
		if f.autoEvents {
			f.publishLocked(req.Job)
		}
		send(api.JobRegisterResponse{EvalID: "eval"})
	case r.URL.Path == "/v1/allocations":
		send(f.allocs)
	case strings.HasPrefix(r.URL.Path, "/v1/allocation/") && strings.HasSuffix(r.URL.Path, "/stop"):
		f.stopped = append(f.stopped, strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/allocation/"), "/stop"))
		send(api.AllocStopResponse{EvalID: "eval"})
	default:
		http.Error(w, "not faked: "+r.URL.Path, http.StatusNotFound)
	}
}

func gpus(model string, healthy ...bool) *api.NodeDeviceResource {
	d := &api.NodeDeviceResource{Vendor: "nvidia", Type: "gpu", Name: model}
	for i, h := range healthy {
		d.Instances = append(d.Instances, &api.NodeDevice{ID: model + string(rune('a'+i)), Healthy: h})
	}
	return d
}

func node(id, status, elig string, drain bool, devs ...*api.NodeDeviceResource) *api.NodeListStub {
	return &api.NodeListStub{ID: id, Status: status, SchedulingEligibility: elig, Drain: drain,
		NodeResources: &api.NodeResources{Devices: devs}, NodePool: "gpu"}
}

func nomadJob(id string, meta map[string]string, gated bool) *api.Job {
	j := gpuJob("nvidia/gpu", 2, 1)
	ns, typ, idx := "default", "batch", uint64(10)
	j.ID, j.Namespace, j.Type, j.JobModifyIndex, j.Meta = &id, &ns, &typ, &idx, meta
	j.ModifyIndex = new(idx)
	if gated {
		SetGate(j, true)
	}
	return j
}

func newFake(t *testing.T) (*fakeNomad, *Client) {
	f := &fakeNomad{
		nodes: []*api.NodeListStub{
			node("n1", "ready", "eligible", false, gpus("A100", true, true, false), gpus("T4", true)),
			node("n2", "ready", "eligible", false, gpus("A100", true, true), &api.NodeDeviceResource{Vendor: "intel", Type: "fpga", Name: "x", Instances: []*api.NodeDevice{{Healthy: true}}}),
			node("n3", "down", "eligible", false, gpus("A100", true)),
			node("n4", "ready", "ineligible", false, gpus("V100", true)),
			node("n5", "ready", "eligible", true, gpus("V100", true)),
		},
		jobs: map[string]*api.Job{
			"train": nomadJob("train", map[string]string{"fft.work": "10", "fft.throughput": "A100=2"}, true),
			"bad":   nomadJob("bad", map[string]string{"fft.work": "-1", "fft.throughput": "A100=2"}, true),
			"web":   nomadJob("web", nil, false),
		},
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	nc, err := api.NewClient(&api.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return f, New(nc, nil)
}

func TestObserve(t *testing.T) {
	f, c := newFake(t)
	snap, err := c.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Healthy GPUs on ready, eligible, undrained nodes only; other devices ignored.
	want := []allocator.Model{{Name: "A100", GPUs: 4}, {Name: "T4", GPUs: 1}}
	if !reflect.DeepEqual(snap.Models, want) {
		t.Errorf("models = %+v, want %+v", snap.Models, want)
	}
	if len(snap.Jobs) != 1 || snap.Jobs[0].ID != "default/train" || !snap.Jobs[0].Gated || snap.Jobs[0].Spec.GPUs != 2 || snap.Jobs[0].ModifyIndex != 10 {
		t.Errorf("jobs = %+v, want the gated 2-GPU job default/train at index 10", snap.Jobs)
	}
	if len(snap.Invalid) != 1 || snap.Invalid[0].ID != "default/bad" || !strings.Contains(snap.Invalid[0].Err, `"fft.work" = "-1"`) {
		t.Errorf("invalid = %+v, want default/bad naming fft.work", snap.Invalid)
	}
	// nodes, jobs, 3 job reads, allocations.
	if snap.Calls != 6 || len(f.requests) != 6 {
		t.Errorf("first observation made %d calls (%q), want 6", snap.Calls, f.requests)
	}
	// Unchanged jobs are not read again.
	snap, _ = c.Observe(context.Background())
	if snap.Calls != 3 {
		t.Errorf("second observation made %d calls, want 3 (nodes, jobs, allocations)", snap.Calls)
	}
}

func TestApply(t *testing.T) {
	f, c := newFake(t)
	ctx := context.Background()
	snap, _ := c.Observe(ctx)
	p := loop.Diff(snap.Jobs, map[string]string{"default/train": "A100"})
	res := c.Apply(ctx, p)
	if res.Calls != 1 || len(res.Errors) != 0 || len(res.Conflicts) != 0 || len(f.registers) != 1 || res.Applied[loop.ActionStart] != 1 {
		t.Fatalf("start: %+v, %d registers", res, len(f.registers))
	}
	reg := f.registers[0]
	if !reg.EnforceIndex || reg.JobModifyIndex != 10 || Gated(reg.Job) || SteeredModel(reg.Job) != "A100" {
		t.Errorf("start registered enforce %v at %d, gated %v, model %q; want a CAS at 10, ungated, A100",
			reg.EnforceIndex, reg.JobModifyIndex, Gated(reg.Job), SteeredModel(reg.Job))
	}

	// The job now runs; a round that leaves it out parks it: gate, then stop.
	f.allocs = []*api.AllocationListStub{{ID: "al1", Namespace: "default", JobID: "train", DesiredStatus: "run", ClientStatus: "running"}}
	snap, _ = c.Observe(ctx)
	if j := snap.Jobs[0]; j.Gated || j.Model != "A100" || j.RunningModel != "A100" || len(j.Allocs) != 1 {
		t.Fatalf("observed after start: %+v", j)
	}
	again := c.Apply(ctx, loop.Diff(snap.Jobs, map[string]string{"default/train": "A100"}))
	if again.Calls != 0 {
		t.Errorf("re-applying the same decision made %d calls, want 0", again.Calls)
	}
	res = c.Apply(ctx, loop.Diff(snap.Jobs, nil))
	if res.Calls != 2 || !reflect.DeepEqual(f.stopped, []string{"al1"}) || !Gated(f.jobs["train"]) || !reflect.DeepEqual(res.Applied, map[loop.Action]int{loop.ActionPark: 1}) {
		t.Errorf("park: %+v, stopped %q, gated %v; want 2 calls, al1 stopped, gated", res, f.stopped, Gated(f.jobs["train"]))
	}
}

// A round that comes before Nomad's scheduler has run a park's stop still sees the
// allocation meant to run, and parks the job again: that costs no call until restopAfter has
// passed (the first stop's evaluation may have failed), then the stop is sent once more.
func TestApplyStopsOnce(t *testing.T) {
	f, c := newFake(t)
	ctx := context.Background()
	clock := time.Unix(1000, 0)
	c.now = func() time.Time { return clock }
	f.allocs = []*api.AllocationListStub{{ID: "al1", Namespace: "default", JobID: "train", DesiredStatus: "run", ClientStatus: "running"}}
	for _, tc := range []struct {
		after     time.Duration
		wantCalls int
		stopped   []string
	}{
		{0, 1, []string{"al1"}},                            // gated already: the stop alone
		{20 * time.Second, 0, []string{"al1"}},             // gated, the stop pending
		{restopAfter - 21*time.Second, 0, []string{"al1"}}, // still within restopAfter of it
		{time.Second, 1, []string{"al1", "al1"}},           // restopAfter since the stop: again
		{20 * time.Second, 0, []string{"al1", "al1"}},      // and trusted again
	} {
		clock = clock.Add(tc.after)
		snap, err := c.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		res := c.Apply(ctx, loop.Diff(snap.Jobs, nil))
		if res.Calls != tc.wantCalls || res.Applied[loop.ActionPark] != 1 || !reflect.DeepEqual(f.stopped, tc.stopped) {
			t.Errorf("park %v later: %+v, stopped %q; want %d calls, stopped %q", tc.after, res, f.stopped, tc.wantCalls, tc.stopped)
		}
	}
	if len(c.stopsSent) != 1 {
		t.Errorf("stops remembered: %v, want al1's alone", c.stopsSent)
	}
	clock = clock.Add(restopAfter)
	c.Apply(ctx, &loop.Plan{})
	if len(c.stopsSent) != 0 {
		t.Errorf("stops remembered %v after restopAfter, want none", c.stopsSent)
	}
}

// A park takes the job's pin off with the gate: Nomad re-runs the blocked evaluation of a job
// constrained on a unique attribute whenever any capacity frees.
func TestApplyParkDropsPin(t *testing.T) {
	f, c := newFake(t)
	ctx := context.Background()
	snap, _ := c.Observe(ctx)
	slots := map[string][]placement.Slot{"default/train": {{Host: "n1", GPUs: 2}}}
	if res := c.Apply(ctx, loop.DiffPlaced(snap.Jobs, map[string]string{"default/train": "A100"}, slots)); len(res.Errors) != 0 {
		t.Fatalf("start: %+v", res)
	}
	if got := PinnedNodes(f.jobs["train"]); !reflect.DeepEqual(got, []string{"n1"}) {
		t.Fatalf("started job pinned to %q, want n1", got)
	}
	f.allocs = []*api.AllocationListStub{{ID: "al1", Namespace: "default", JobID: "train", DesiredStatus: "run", ClientStatus: "running"}}
	snap, _ = c.Observe(ctx)
	if res := c.Apply(ctx, loop.DiffPlaced(snap.Jobs, nil, nil)); res.Applied[loop.ActionPark] != 1 {
		t.Fatalf("park: %+v", res)
	}
	if job := f.jobs["train"]; !Gated(job) || PinnedNodes(job) != nil {
		t.Errorf("parked job: gated %v, pinned to %q; want gated, no pin", Gated(job), PinnedNodes(job))
	}
}

// With a GPU node pool, capacity counts that pool's nodes only, a job outside the pool is
// held without the gate, and a start moves it into the pool with the gate lifted and the model
// steered, in one check-and-set registration.
func TestNodePoolObserveAndStart(t *testing.T) {
	f, c := newFake(t)
	c.WithNodePool("gpu")
	f.nodes = append(f.nodes, node("cpu1", "ready", "eligible", false, gpus("T4", true, true)))
	f.nodes[len(f.nodes)-1].NodePool = "default"
	plain := nomadJob("plain", map[string]string{"fft.work": "10", "fft.throughput": "A100=2"}, false)
	plain.NodePool = new("default")
	f.jobs["plain"] = plain
	ctx := context.Background()
	snap, err := c.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []allocator.Model{{Name: "A100", GPUs: 4}, {Name: "T4", GPUs: 1}}; !reflect.DeepEqual(snap.Models, want) {
		t.Errorf("models = %+v, want %+v (the default pool's T4s left out)", snap.Models, want)
	}
	held := map[string][2]bool{}
	for _, j := range snap.Jobs {
		held[j.ID] = [2]bool{j.Gated, j.OffPool}
	}
	if want := map[string][2]bool{"default/plain": {false, true}, "default/train": {true, true}}; !reflect.DeepEqual(held, want) {
		t.Errorf("(gated, off pool) = %v, want %v", held, want)
	}
	p := loop.Diff(snap.Jobs, map[string]string{"default/plain": "A100"})
	if len(p.Start) != 1 || len(p.Keep) != 1 || len(p.Park) != 0 {
		t.Fatalf("plan %s: want plain started, train kept held", p.GoString())
	}
	// The start, and train held in the pool behind the gate (Nomad re-runs the blocked
	// evaluation of a job outside the pool whenever a GPU frees): one registration each.
	res := c.Apply(ctx, p)
	if res.Calls != 2 || res.HeldInPool != 1 || len(res.Errors)+len(res.Conflicts) != 0 || len(f.registers) != 2 {
		t.Fatalf("start: %+v, %d registers; want two calls, one holding in the pool", res, len(f.registers))
	}
	for _, reg := range f.registers {
		want := map[string]bool{"plain": false, "train": true}[deref(reg.Job.ID)]
		if deref(reg.Job.NodePool) != "gpu" || Gated(reg.Job) != want || !reg.EnforceIndex {
			t.Errorf("%s registered in pool %q, gated %v, CAS %v; want gpu, gated %v, CAS",
				deref(reg.Job.ID), deref(reg.Job.NodePool), Gated(reg.Job), reg.EnforceIndex, want)
		}
		if deref(reg.Job.ID) == "plain" && SteeredModel(reg.Job) != "A100" {
			t.Errorf("plain steered to %q, want A100", SteeredModel(reg.Job))
		}
	}
	// Held in the pool, train costs no write in later rounds.
	snap, _ = c.Observe(ctx)
	for _, j := range snap.Jobs {
		if j.ID == "default/train" && (!j.Gated || j.OffPool) {
			t.Fatalf("train observed gated %v, off pool %v; want gated in the pool", j.Gated, j.OffPool)
		}
	}
	if again := c.Apply(ctx, loop.Diff(snap.Jobs, map[string]string{"default/plain": "A100"})); again.HeldInPool != 0 || len(f.registers) != 2 {
		t.Errorf("the next round held %d in the pool, %d registers in all; want none more", again.HeldInPool, len(f.registers))
	}
}

func TestPoolWarning(t *testing.T) {
	for _, tc := range []struct {
		pool            string
		inside, outside int
		want            string
	}{
		{"", 0, 4, ""},
		{"gpu", 4, 0, ""},
		{"gpu", 0, 0, `no healthy GPUs on ready, eligible nodes in node pool "gpu" (fft-allocator -node-pool): put each GPU client in it with client { node_pool = "gpu" }`},
		{"gpu", 0, 3, `but 3 on nodes in other pools: put each GPU client in it with client { node_pool = "gpu" }, or set -node-pool to their pool`},
		{"gpu", 2, 3, `3 healthy GPUs are on nodes outside node pool "gpu" (fft-allocator -node-pool): FFT does not count them`},
	} {
		got := poolWarning(tc.pool, tc.inside, tc.outside)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("poolWarning(%q, %d, %d) = %q, want it to hold %q", tc.pool, tc.inside, tc.outside, got, tc.want)
		}
	}
}

// A user's update between the observation and the write wins: the
// check-and-set registration fails, nothing is overwritten, and the job is
// read afresh next round.
func TestApplyConflict(t *testing.T) {
	f, c := newFake(t)
	ctx := context.Background()
	snap, _ := c.Observe(ctx)
	// The user updates the job meanwhile.
	user := *f.jobs["train"]
	idx := uint64(11)
	user.JobModifyIndex = &idx
	user.Meta = map[string]string{"fft.work": "20", "fft.throughput": "A100=2"}
	f.jobs["train"] = &user

	res := c.Apply(ctx, loop.Diff(snap.Jobs, map[string]string{"default/train": "A100"}))
	if !reflect.DeepEqual(res.Conflicts, []string{"default/train"}) || len(res.Errors) != 0 || len(f.registers) != 0 {
		t.Fatalf("apply over a concurrent update: %+v, %d registers; want one conflict and no write", res, len(f.registers))
	}
	if f.jobs["train"].Meta["fft.work"] != "20" {
		t.Errorf("the user's update was overwritten")
	}
	snap, _ = c.Observe(ctx)
	if snap.Jobs[0].ModifyIndex != 11 || snap.Jobs[0].Spec.Work != 20 {
		t.Errorf("next observation: %+v, want the user's version (index 11, work 20)", snap.Jobs[0])
	}
	res = c.Apply(ctx, loop.Diff(snap.Jobs, map[string]string{"default/train": "A100"}))
	if len(res.Conflicts) != 0 || len(f.registers) != 1 || f.registers[0].JobModifyIndex != 11 {
		t.Errorf("retry next round: %+v, registers %d", res, len(f.registers))
	}
}

// Apply writes up to WithApplyConcurrency jobs at once, every park before
// any start, and a job whose write fails is an error naming it while every
// other change is applied.
func TestApplyConcurrent(t *testing.T) {
	for _, tc := range []struct {
		workers int
		fail    []string
	}{
		{1, nil},
		{4, nil},
		{4, []string{"s03", "p07"}},
		{64, []string{"s00"}},
	} {
		t.Run(fmt.Sprintf("workers=%d,fail=%v", tc.workers, tc.fail), func(t *testing.T) {
			f, c := newFake(t)
			c.WithApplyConcurrency(tc.workers)
			f.delay = 2 * time.Millisecond
			f.failRegister = map[string]bool{}
			for _, id := range tc.fail {
				f.failRegister[id] = true
			}
			meta := map[string]string{"fft.work": "10", "fft.throughput": "A100=2"}
			assignment := map[string]string{}
			for i := 0; i < 12; i++ {
				p, s := fmt.Sprintf("p%02d", i), fmt.Sprintf("s%02d", i)
				f.jobs[p] = nomadJob(p, meta, false)
				f.jobs[s] = nomadJob(s, meta, true)
				f.allocs = append(f.allocs, &api.AllocationListStub{ID: "a" + p, Namespace: "default", JobID: p, DesiredStatus: "run", ClientStatus: "running"})
				assignment["default/"+s] = "A100"
			}
			ctx := context.Background()
			snap, err := c.Observe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			plan := loop.Diff(snap.Jobs, assignment)
			if len(plan.Park) != 12 || len(plan.Start) != 12 {
				t.Fatalf("plan %s, want 12 parks and 12 starts", plan.GoString())
			}
			f.maxInflight.Store(0)
			res := c.Apply(ctx, plan)

			var wantErrs []string
			for _, id := range tc.fail {
				action := map[byte]string{'p': "park", 's': "start"}[id[0]]
				wantErrs = append(wantErrs, fmt.Sprintf("%s default/%s: registering: ", action, id))
			}
			slices.Sort(wantErrs)
			if len(res.Errors) != len(wantErrs) {
				t.Fatalf("errors %q, want %d naming %v", res.Errors, len(wantErrs), tc.fail)
			}
			for k, e := range res.Errors {
				if !strings.HasPrefix(e, wantErrs[k]) {
					t.Errorf("error %q, want it to start %q", e, wantErrs[k])
				}
			}
			failedParks := 0
			for _, id := range tc.fail {
				if id[0] == 'p' {
					failedParks++
				}
			}
			want := map[loop.Action]int{loop.ActionPark: 12 - failedParks, loop.ActionStart: 12 - (len(tc.fail) - failedParks)}
			// 24 registrations (failed ones included) and a stop per parked allocation.
			if !reflect.DeepEqual(res.Applied, want) || res.Calls != 24+12-failedParks || len(res.Conflicts) != 0 {
				t.Errorf("applied %v in %d calls, conflicts %v; want %v in %d", res.Applied, res.Calls, res.Conflicts, want, 24+12-failedParks)
			}
			if m := f.maxInflight.Load(); m > int64(tc.workers) || (tc.workers > 1 && m < 2) {
				t.Errorf("%d requests at once, want 2 to %d", m, tc.workers)
			}
			seenStart := false
			for _, r := range f.registers {
				if !Gated(r.Job) {
					seenStart = true
				} else if seenStart {
					t.Errorf("park of %s registered after a start", *r.Job.ID)
				}
			}
		})
	}
}
