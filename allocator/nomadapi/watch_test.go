package nomadapi

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

func TestManagedStubsAndChangedJobs(t *testing.T) {
	fft := map[string]string{"fft.work": "1"}
	stubs := []*api.JobListStub{
		{ID: "train", Namespace: "default", Type: "batch", Meta: fft},
		{ID: "train", Namespace: "team", Type: "service", Meta: fft},
		{ID: "web", Namespace: "default", Type: "service"},
		{ID: "stopped", Namespace: "default", Type: "batch", Meta: fft, Stop: true},
		{ID: "agent", Namespace: "default", Type: "system", Meta: fft},
	}
	cur := managedStubs(stubs)
	if want := map[string]bool{"default/train": true, "team/train": true}; !reflect.DeepEqual(cur, want) {
		t.Errorf("managedStubs = %v, want %v", cur, want)
	}
	for _, tc := range []struct {
		name          string
		prev          map[string]bool
		arrived, left []string
	}{
		{"same", map[string]bool{"default/train": true, "team/train": true}, nil, nil},
		{"both new", map[string]bool{}, []string{"default/train", "team/train"}, nil},
		{"one new, one gone", map[string]bool{"default/train": true, "default/old": true}, []string{"team/train"}, []string{"default/old"}},
	} {
		arrived, left := changedJobs(tc.prev, cur)
		if !reflect.DeepEqual(arrived, tc.arrived) || !reflect.DeepEqual(left, tc.left) {
			t.Errorf("%s: arrived %q left %q, want %q and %q", tc.name, arrived, left, tc.arrived, tc.left)
		}
	}
}

func TestEndedAllocs(t *testing.T) {
	managed := map[string]bool{"default/train": true, "default/other": true}
	alloc := func(id, job, desired, client string) *api.AllocationListStub {
		return &api.AllocationListStub{ID: id, Namespace: "default", JobID: job, DesiredStatus: desired, ClientStatus: client}
	}
	for _, tc := range []struct {
		name   string
		prev   map[string]string
		allocs []*api.AllocationListStub
		want   []string
	}{
		{"first list is the baseline", nil,
			[]*api.AllocationListStub{alloc("a", "train", "run", "complete")}, nil},
		{"completed", map[string]string{"a": "running"},
			[]*api.AllocationListStub{alloc("a", "train", "run", "complete")}, []string{"default/train"}},
		{"failed and lost, one trigger per job", map[string]string{"a": "running", "b": "pending"},
			[]*api.AllocationListStub{alloc("a", "train", "run", "failed"), alloc("b", "train", "run", "lost")}, []string{"default/train"}},
		{"new and already done (a short task between two lists)", map[string]string{},
			[]*api.AllocationListStub{alloc("c", "other", "run", "complete")}, []string{"default/other"}},
		{"already final last time", map[string]string{"a": "complete"},
			[]*api.AllocationListStub{alloc("a", "train", "run", "complete")}, nil},
		{"stopped by a park or an update", map[string]string{"a": "running"},
			[]*api.AllocationListStub{alloc("a", "train", "stop", "complete")}, nil},
		{"still running", map[string]string{"a": "pending"},
			[]*api.AllocationListStub{alloc("a", "train", "run", "running")}, nil},
		{"not a managed job", map[string]string{"w": "running"},
			[]*api.AllocationListStub{alloc("w", "web", "run", "complete")}, nil},
	} {
		next, got := endedAllocs(tc.prev, tc.allocs, managed)
		var jobs []string
		for _, tr := range got {
			if tr.Kind != loop.TriggerFinish {
				t.Errorf("%s: trigger kind %q", tc.name, tr.Kind)
			}
			jobs = append(jobs, tr.Job)
		}
		if !reflect.DeepEqual(jobs, tc.want) {
			t.Errorf("%s: finished %q, want %q", tc.name, jobs, tc.want)
		}
		if len(next) != len(tc.allocs) {
			t.Errorf("%s: kept %d statuses for %d allocations", tc.name, len(next), len(tc.allocs))
		}
	}
}

// Watch against a fake Nomad: the first answers are the baseline; then a held job, an
// unheld one, an allocation that completes and a job that leaves each send their trigger, and
// the next Observe counts the watcher's calls.
func TestWatch(t *testing.T) {
	f, c := newFake(t)
	c.WithNodePool("gpu")
	c.watchEvery = 5 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan loop.Trigger, 16)
	done := make(chan error, 1)
	go func() { done <- c.Watch(ctx, out) }()
	defer func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Watch returned %v, want context.Canceled", err)
		}
	}()
	requests := func(path string) int {
		f.mu.Lock()
		defer f.mu.Unlock()
		n := 0
		for _, r := range f.requests {
			if r == "GET "+path {
				n++
			}
		}
		return n
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 10s", what)
			}
		}
	}
	expect := func(want ...loop.Trigger) {
		t.Helper()
		var got []loop.Trigger
		for len(got) < len(want) {
			select {
			case tr := <-out:
				got = append(got, tr)
			case <-time.After(10 * time.Second):
				t.Fatalf("got %v, want %v", got, want)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("triggers %v, want %v", got, want)
		}
	}
	// Both lists answered twice: the baseline is taken, and nothing changed.
	waitFor("the baseline", func() bool { return requests("/v1/jobs") >= 2 && requests("/v1/allocations") >= 2 })
	select {
	case tr := <-out:
		t.Fatalf("trigger %v with nothing changed", tr)
	default:
	}

	managed := map[string]string{"fft.work": "10", "fft.throughput": "A100=2"}
	f.mu.Lock()
	f.jobs["held"] = nomadJob("held", managed, false) // in the default pool
	f.mu.Unlock()
	expect(loop.Trigger{Kind: loop.TriggerArrival, Job: "default/held"})

	f.mu.Lock()
	unheld := nomadJob("unheld", managed, false)
	unheld.NodePool = new("gpu")
	f.jobs["unheld"] = unheld
	f.mu.Unlock()
	expect(loop.Trigger{Kind: loop.TriggerUnheld, Job: "default/unheld"})

	f.mu.Lock()
	f.allocs = []*api.AllocationListStub{{ID: "a1", Namespace: "default", JobID: "unheld", DesiredStatus: "run", ClientStatus: "running"}}
	f.mu.Unlock()
	n := requests("/v1/allocations")
	waitFor("the running allocation is seen", func() bool { return requests("/v1/allocations") >= n+2 })
	f.mu.Lock()
	f.allocs[0].ClientStatus = "complete"
	f.mu.Unlock()
	expect(loop.Trigger{Kind: loop.TriggerFinish, Job: "default/unheld"})

	f.mu.Lock()
	delete(f.jobs, "held")
	f.mu.Unlock()
	expect(loop.Trigger{Kind: loop.TriggerFinish, Job: "default/held"})

	snap, err := c.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Every list answer and the two job reads, so at least 2+2 baseline lists, 2 reads.
	if snap.WatchCalls < 6 {
		t.Errorf("Observe counted %d watcher calls, want at least 6", snap.WatchCalls)
	}
	if again, _ := c.Observe(context.Background()); again.WatchCalls >= snap.WatchCalls {
		t.Errorf("watcher calls were not reset: %d, then %d", snap.WatchCalls, again.WatchCalls)
	}
}

// A job that arrives after a round observed the cluster but before the watcher's first list
// is still an arrival: the first list is compared with that observation.
func TestWatchStartsFromTheLastObservation(t *testing.T) {
	f, c := newFake(t)
	c.watchEvery = 5 * time.Millisecond
	if _, err := c.Observe(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.jobs["late"] = nomadJob("late", map[string]string{"fft.work": "10", "fft.throughput": "A100=2"}, true)
	f.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan loop.Trigger, 16)
	go func() { _ = c.Watch(ctx, out) }()
	select {
	case tr := <-out:
		if want := (loop.Trigger{Kind: loop.TriggerArrival, Job: "default/late"}); tr != want {
			t.Errorf("first trigger %v, want %v", tr, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no trigger for the job that arrived before the watcher started")
	}
}
