package nomadapi

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// publishLineLocked puts one line of events at the next index on the stream
// (f.mu held); build fills the events for that index.
func (f *fakeNomad) publishLineLocked(build func(index uint64) []streamEvent) {
	f.index++
	evs := build(f.index)
	for i := range evs {
		evs[i].Index = f.index
	}
	if f.stream == nil {
		return
	}
	b, _ := json.Marshal(streamEvents{Index: f.index, Events: evs})
	f.stream <- string(b)
}

// deregister stops (purge false) or purges a job as Nomad 1.6.1 streams it:
// a stop sends the stopped job and its job-deregister evaluation in one
// line, a purge only the evaluation; event false sends nothing (a periodic
// job's purge, the garbage collector's).
func (f *fakeNomad) deregister(id string, purge, event bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	eval := func(index uint64) streamEvent {
		return streamEvent{Topic: "Evaluation", Payload: streamPayload{Evaluation: &api.Evaluation{
			Namespace: "default", JobID: id, TriggeredBy: evalTriggerJobDeregister, Status: "pending", CreateIndex: index, ModifyIndex: index}}}
	}
	if !event {
		f.index++
		delete(f.jobs, id)
		return
	}
	f.publishLineLocked(func(index uint64) []streamEvent {
		if purge {
			delete(f.jobs, id)
			return []streamEvent{eval(index)}
		}
		j := *f.jobs[id]
		j.Stop, j.Status, j.ModifyIndex = new(true), new("dead"), new(index)
		f.jobs[id] = &j
		return []streamEvent{{Topic: "Job", Payload: streamPayload{Job: &j}}, eval(index)}
	})
}

// allocEvent moves Nomad's index with an allocation's change (the job
// summary, so the job list's index, moves with it).
func (f *fakeNomad) allocEvent() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.publishLineLocked(func(uint64) []streamEvent { return []streamEvent{{Topic: "Allocation"}} })
}

func fullLists(f *fakeNomad) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.fullLists
	f.fullLists = 0
	return n
}

// While the stream has been open since the last full list, a round takes
// the job list from it: a stop and a purge the stream shows leave the
// round's jobs without a full list; a change the stream never shows (a
// purge without an evaluation) lists every job after the bounded wait; so
// does a lost check-and-set, and fullListEvery since the last full list.
func TestObserveListsFromStream(t *testing.T) {
	f, c := newFake(t)
	f.jobs["other"] = nomadJob("other", map[string]string{"fft.work": "10", "fft.throughput": "A100=2"}, true)
	f.jobs["third"] = nomadJob("third", map[string]string{"fft.work": "10", "fft.throughput": "A100=2"}, true)
	f.stream, f.autoEvents = make(chan string, 64), true
	c.streamWait, c.streamRetry = 200*time.Millisecond, 10*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Follow(ctx) }()
	waitFeed(t, c, true, 1)

	observe := func(step string, wantFull int, wantJobs ...string) *loop.Snapshot {
		t.Helper()
		snap, err := c.Observe(ctx)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		var got []string
		for _, j := range snap.Jobs {
			got = append(got, j.ID)
		}
		if full := fullLists(f); full != wantFull || !slices.Equal(got, wantJobs) {
			t.Errorf("%s: %d full lists, jobs %q; want %d, %q", step, full, got, wantFull, wantJobs)
		}
		return snap
	}
	observe("cold", 1, "default/other", "default/third", "default/train")
	reads(f)
	f.allocEvent()
	if snap := observe("warm", 0, "default/other", "default/third", "default/train"); snap.Calls != 3 {
		t.Errorf("warm: %d calls, want 3 (nodes, the list's index, allocations)", snap.Calls)
	}
	f.update("train", "30", true)
	if snap := observe("a streamed update", 0, "default/other", "default/third", "default/train"); snap.Jobs[2].Spec.Work != 30 {
		t.Errorf("a streamed update: work %g, want 30", snap.Jobs[2].Spec.Work)
	}
	f.deregister("other", false, true)
	observe("a streamed stop", 0, "default/third", "default/train")
	f.deregister("third", true, true)
	observe("a streamed purge", 0, "default/train")
	if got := reads(f); len(got) != 0 {
		t.Errorf("reads %q, want none: the stream brought every change", got)
	}

	// A purge Nomad streams nothing for: the list's index runs ahead of the stream.
	f.jobs["gc"] = nomadJob("gc", map[string]string{"fft.work": "10", "fft.throughput": "A100=2"}, true)
	f.update("gc", "10", true)
	observe("a new job", 0, "default/gc", "default/train")
	f.deregister("gc", true, false)
	begin := time.Now()
	observe("an unstreamed purge", 1, "default/train")
	if took := time.Since(begin); took < c.streamWait {
		t.Errorf("the unstreamed purge was seen after %s, before the stream had %s to catch up", took, c.streamWait)
	}
	observe("nothing changed since the full list", 0, "default/train")

	// A lost check-and-set lists every job next round.
	snap := observe("before the conflict", 0, "default/train")
	f.update("train", "40", false)
	if res := c.Apply(ctx, loop.Diff(snap.Jobs, map[string]string{"default/train": "A100"})); len(res.Conflicts) != 1 {
		t.Fatalf("apply: %+v, want a conflict", res)
	}
	f.allocEvent()
	observe("after the conflict", 1, "default/train")

	c.mu.Lock()
	c.fullListEvery = 0
	c.mu.Unlock()
	observe("fullListEvery since the last full list", 1, "default/train")
}

// A full list keeps what the stream brought past the list's index: a job
// registered after it, a newer version, and a purge after it.
func TestFullListKeepsWhatCameAfter(t *testing.T) {
	f, c := newFake(t)
	f.headerIndex = 100
	stub := func(id string, modify uint64) *api.JobListStub {
		return &api.JobListStub{ID: id, Namespace: "default", Type: "batch", JobModifyIndex: modify, ModifyIndex: modify}
	}
	for _, id := range []string{"train", "bad", "web"} {
		idx := uint64(10)
		f.jobs[id].ModifyIndex = &idx
	}
	c.listed = map[string]*api.JobListStub{
		"default/new":   stub("new", 101),   // registered after the list
		"default/train": stub("train", 105), // changed after it
		"default/old":   stub("old", 50),    // purged before it: the list has it not
	}
	c.gone = map[string]uint64{"default/web": 102, "default/older": 90}
	if _, _, _, err := c.fullList(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for key, s := range c.listed {
		got = append(got, fmt.Sprintf("%s@%d", key, s.ModifyIndex))
	}
	slices.Sort(got)
	want := []string{"default/bad@10", "default/new@101", "default/train@105"}
	if !slices.Equal(got, want) {
		t.Errorf("listed %q, want %q", got, want)
	}
	if _, ok := c.gone["default/older"]; ok || len(c.gone) != 1 {
		t.Errorf("gone %v, want only the purge after the list", c.gone)
	}
}

// A later update of a job-deregister evaluation is no purge: the job may
// have been registered again since.
func TestStreamedPurge(t *testing.T) {
	c := New(nil, nil)
	c.listed["default/a"] = &api.JobListStub{ID: "a", Namespace: "default", ModifyIndex: 30}
	ev := &api.Evaluation{Namespace: "default", JobID: "a", TriggeredBy: evalTriggerJobDeregister, CreateIndex: 20, ModifyIndex: 40}
	c.streamed(&streamEvents{Events: []streamEvent{{Topic: "Evaluation", Index: 40, Payload: streamPayload{Evaluation: ev}}}})
	if c.listed["default/a"] == nil {
		t.Error("an update of an older deregistration's evaluation dropped the job")
	}
	ev = &api.Evaluation{Namespace: "default", JobID: "a", TriggeredBy: evalTriggerJobDeregister, CreateIndex: 50, ModifyIndex: 50}
	c.streamed(&streamEvents{Events: []streamEvent{{Topic: "Evaluation", Index: 50, Payload: streamPayload{Evaluation: ev}}}})
	if c.listed["default/a"] != nil || c.gone["default/a"] != 50 {
		t.Errorf("a purge's evaluation left %v, gone %v", c.listed["default/a"], c.gone)
	}

	// A stop: the stopped job, then its evaluation in a line of its own at the same index
	// (Nomad commits the two separately).
	stopped := versioned("b", 60, 70, "batch")
	stopped.Stop = new(true)
	c.streamed(&streamEvents{Events: []streamEvent{{Topic: "Job", Index: 70, Payload: streamPayload{Job: stopped}}}})
	ev = &api.Evaluation{Namespace: "default", JobID: "b", TriggeredBy: evalTriggerJobDeregister, CreateIndex: 70, ModifyIndex: 70}
	c.streamed(&streamEvents{Events: []streamEvent{{Topic: "Evaluation", Index: 70, Payload: streamPayload{Evaluation: ev}}}})
	if s := c.listed["default/b"]; s == nil || !s.Stop {
		t.Errorf("a stop's evaluation after its job left %+v, want the job listed, stopped", s)
	}
}
