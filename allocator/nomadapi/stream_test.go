package nomadapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// serveStream is the fake's GET /v1/event/stream: a heartbeat, then each
// line sent on f.stream until it is closed (the stream ends) or the client
// leaves. With streamCode set it answers that code instead.
func (f *fakeNomad) serveStream(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.subscriptions = append(f.subscriptions, "index="+r.URL.Query().Get("index")+"&namespace="+r.URL.Query().Get("namespace")+"&topic="+strings.Join(r.URL.Query()["topic"], ","))
	code, lines, delay := f.streamCode, f.stream, f.streamDelay
	f.mu.Unlock()
	time.Sleep(delay)
	if code == 0 && lines == nil {
		code = http.StatusNotFound
	}
	if code != 0 {
		http.Error(w, "Permission denied", code)
		return
	}
	fl := w.(http.Flusher)
	_, _ = fmt.Fprintln(w, "{}")
	fl.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case line, ok := <-lines:
			if !ok {
				return
			}
			_, _ = fmt.Fprintln(w, line)
			fl.Flush()
		}
	}
}

// publishLocked puts a JobRegistered event for job on the stream (f.mu held).
func (f *fakeNomad) publishLocked(job *api.Job) {
	if f.stream == nil {
		return
	}
	b, _ := json.Marshal(streamEvents{Index: *job.ModifyIndex, Events: []streamEvent{{
		Topic: "Job", Type: "JobRegistered", Key: *job.ID, Index: *job.ModifyIndex,
		Payload: streamPayload{Job: job},
	}}})
	f.stream <- string(b)
}

// update changes a job in the fake as a user would (a new JobModifyIndex and
// work), publishing the event when publish is set.
func (f *fakeNomad) update(id, work string, publish bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j := *f.jobs[id]
	f.index = max(f.index, *j.JobModifyIndex) + 1
	j.JobModifyIndex, j.ModifyIndex = new(f.index), new(f.index)
	j.Meta = map[string]string{"fft.work": work, "fft.throughput": "A100=2"}
	f.jobs[id] = &j
	if publish {
		f.publishLocked(&j)
	}
}

func versioned(id string, jobModify, modify uint64, typ string) *api.Job {
	ns := "default"
	return &api.Job{ID: &id, Namespace: &ns, Type: &typ, JobModifyIndex: &jobModify, ModifyIndex: &modify}
}

func TestStreamed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cached []*api.Job
		events []streamEvent
		// want is the cached jobs' (JobModifyIndex, ModifyIndex) by key;
		// woken: a line past the stream's index wakes a waiting Observe.
		want  map[string][2]uint64
		woken bool
	}{
		{"a new job is cached", nil,
			[]streamEvent{{Topic: "Job", Payload: streamPayload{Job: versioned("a", 5, 5, "batch")}}},
			map[string][2]uint64{"default/a": {5, 5}}, true},
		{"a newer version replaces the cached one", []*api.Job{versioned("a", 5, 5, "batch")},
			[]streamEvent{{Topic: "Job", Payload: streamPayload{Job: versioned("a", 9, 9, "batch")}}},
			map[string][2]uint64{"default/a": {9, 9}}, true},
		{"a status change (same JobModifyIndex) replaces it too", []*api.Job{versioned("a", 5, 5, "batch")},
			[]streamEvent{{Topic: "Job", Payload: streamPayload{Job: versioned("a", 5, 7, "batch")}}},
			map[string][2]uint64{"default/a": {5, 7}}, true},
		{"an older event than a read does not", []*api.Job{versioned("a", 9, 9, "batch")},
			[]streamEvent{{Topic: "Job", Payload: streamPayload{Job: versioned("a", 5, 5, "batch")}}},
			map[string][2]uint64{"default/a": {9, 9}}, true},
		{"system jobs, other topics and empty payloads are skipped", nil,
			[]streamEvent{
				{Topic: "Job", Payload: streamPayload{Job: versioned("sys", 3, 3, "system")}},
				{Topic: "Job", Payload: streamPayload{Job: versioned("sb", 3, 3, "sysbatch")}},
				{Topic: "Allocation", Payload: streamPayload{Job: versioned("x", 3, 3, "batch")}},
				{Topic: "Job"},
			},
			map[string][2]uint64{}, true},
		{"the last of several versions in one line wins", nil,
			[]streamEvent{
				{Topic: "Job", Payload: streamPayload{Job: versioned("a", 5, 5, "batch")}},
				{Topic: "Job", Payload: streamPayload{Job: versioned("a", 6, 6, "batch")}},
				{Topic: "Job", Payload: streamPayload{Job: versioned("b", 6, 6, "service")}},
			},
			map[string][2]uint64{"default/a": {6, 6}, "default/b": {6, 6}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(nil, nil)
			for _, j := range tc.cached {
				c.jobs[jobKey(*j.Namespace, *j.ID)] = j
			}
			c.feed.notify()
			wake := c.feed.wake
			c.streamed(&streamEvents{Index: 42, Events: tc.events})
			got := map[string][2]uint64{}
			for k, j := range c.jobs {
				got[k] = [2]uint64{*j.JobModifyIndex, *j.ModifyIndex}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("cache = %v, want %v", got, tc.want)
			}
			woken := false
			select {
			case <-wake:
				woken = true
			default:
			}
			if woken != tc.woken || c.feed.index != 42 {
				t.Errorf("woken = %v, index %d; want %v, 42", woken, c.feed.index, tc.woken)
			}
		})
	}
}

// streamCovers says a round may wait for the stream only when one
// subscription has been open since the previous observation.
func TestStreamCovers(t *testing.T) {
	for _, tc := range []struct {
		name       string
		feed       feed
		want       bool
		wantSynced uint64
	}{
		{"never subscribed", feed{}, false, 0},
		{"live, first observation", feed{epoch: 1, live: true}, false, 1},
		{"live since the last observation", feed{epoch: 1, live: true, synced: 1}, true, 1},
		{"subscribed again since", feed{epoch: 2, live: true, synced: 1}, false, 2},
		{"down", feed{epoch: 1, synced: 1}, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(nil, nil)
			c.feed = tc.feed
			if got := c.streamCovers(); got != tc.want || c.feed.synced != tc.wantSynced {
				t.Errorf("covers = %v, synced %d; want %v, %d", got, c.feed.synced, tc.want, tc.wantSynced)
			}
		})
	}
}

// waitFeed waits until the client's stream is live (or not) at an epoch of at least epoch.
func waitFeed(t *testing.T, c *Client, live bool, epoch uint64) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		c.mu.Lock()
		ok := c.feed.live == live && c.feed.epoch >= epoch
		c.mu.Unlock()
		if ok {
			return
		}
	}
	t.Fatalf("the stream did not become live=%v at epoch %d", live, epoch)
}

func reads(f *fakeNomad) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.requests {
		if strings.HasPrefix(r, "GET /v1/job/") {
			out = append(out, strings.TrimPrefix(r, "GET /v1/job/"))
		}
	}
	f.requests = nil
	return out
}

// The job cache follows the event stream: a warm round reads no job the
// stream brought (its own writes included), reads what the stream missed
// after a bounded wait, and reads without waiting while the stream is
// down or has just come back; the stream resumes from the last index.
func TestObserveFollowsStream(t *testing.T) {
	f, c := newFake(t)
	f.stream, f.autoEvents = make(chan string, 64), true
	c.streamWait, c.streamRetry = 100*time.Millisecond, 10*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error)
	go func() { done <- c.Follow(ctx) }()
	waitFeed(t, c, true, 1)

	// A round makes 3 calls and its reads; listed: one more, to list every
	// job after the stream did not reach the job list's index.
	listed := 0
	observe := func(step string, wantReads []string, wantWork float64) (time.Duration, *loop.Snapshot) {
		t.Helper()
		begin := time.Now()
		snap, err := c.Observe(ctx)
		took := time.Since(begin)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		got := reads(f)
		slices.Sort(got)
		if !slices.Equal(got, wantReads) || snap.Calls != 3+listed+len(wantReads) {
			t.Errorf("%s: read %q in %d calls, want %q in %d", step, got, snap.Calls, wantReads, 3+listed+len(wantReads))
		}
		listed = 0
		if len(snap.Jobs) != 1 || snap.Jobs[0].Spec.Work != wantWork {
			t.Errorf("%s: jobs %+v, want default/train with work %g", step, snap.Jobs, wantWork)
		}
		return took, snap
	}

	observe("cold", []string{"bad", "train", "web"}, 10)
	f.update("train", "30", true)
	observe("a user's update the stream brought", nil, 30)
	f.update("train", "40", false)
	listed = 1
	if took, _ := observe("an update the stream missed", []string{"train"}, 40); took < c.streamWait {
		t.Errorf("the missed update was read after %s, want after waiting %s for the stream", took, c.streamWait)
	}

	// The round's own write comes back on the stream: no read.
	_, snap := observe("before the start", nil, 40)
	if res := c.Apply(ctx, loop.Diff(snap.Jobs, map[string]string{"default/train": "A100"})); res.Calls != 1 || res.Applied[loop.ActionStart] != 1 {
		t.Fatalf("start: %+v", res)
	}
	if _, snap := observe("after the start", nil, 40); snap.Jobs[0].Gated || snap.Jobs[0].Model != "A100" {
		t.Errorf("after the start: %+v, want it ungated on A100 (the stream's version)", snap.Jobs[0])
	}

	// The stream breaks and Nomad refuses it for a while: rounds read what changed, without waiting.
	f.mu.Lock()
	last := f.index
	f.streamCode = http.StatusInternalServerError
	close(f.stream)
	f.mu.Unlock()
	waitFeed(t, c, false, 1)
	c.streamWait = time.Minute
	f.update("train", "50", false)
	if took, _ := observe("stream down", []string{"train"}, 50); took > 10*time.Second {
		t.Errorf("with the stream down the read took %s: it waited for the stream", took)
	}

	// It comes back, from the last index it saw; the first round after reads, the next does not.
	f.mu.Lock()
	f.streamCode, f.stream = 0, make(chan string, 64)
	f.mu.Unlock()
	waitFeed(t, c, true, 2)
	f.update("train", "60", false)
	observe("first round after the stream is back", []string{"train"}, 60)
	f.update("train", "70", true)
	observe("second round after the stream is back", nil, 70)
	f.mu.Lock()
	resumed := f.subscriptions
	f.mu.Unlock()
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("Follow returned %v after its context ended", err)
	}
	if want := fmt.Sprintf("index=%d&namespace=*&topic=Job,Evaluation,Allocation", last); !slices.Contains(resumed, want) {
		t.Errorf("subscriptions %q, want one resuming at the last index seen (%q)", resumed, want)
	}
}

// A token refused the stream gets the capability named.
func TestStreamRefused(t *testing.T) {
	f, c := newFake(t)
	f.streamCode = http.StatusForbidden
	err := c.follow(context.Background())
	if err == nil || !strings.Contains(err.Error(), `namespace capability "read-job" on namespace "*"`) {
		t.Errorf("a refused subscription: %v, want the capability named", err)
	}
	if !slices.Equal(f.subscriptions, []string{"index=0&namespace=*&topic=Job,Evaluation,Allocation"}) {
		t.Errorf("subscriptions %q, want one to topic Job from index 0", f.subscriptions)
	}
}

// The first round after StartFollowing waits for the subscription, so the
// next round already takes a changed job from the stream.
func TestFirstRoundAwaitsTheSubscription(t *testing.T) {
	f, c := newFake(t)
	f.stream = make(chan string, 64)
	f.streamDelay = 200 * time.Millisecond // the subscription answers after the first observation's lists
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.StartFollowing(ctx)
	if _, err := c.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	reads(f)
	f.update("train", "30", true)
	snap, err := c.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := reads(f); len(got) != 0 || snap.Calls != 3 || snap.Jobs[0].Spec.Work != 30 {
		t.Errorf("second round read %q in %d calls, work %g; want no read, 3 calls, work 30", got, snap.Calls, snap.Jobs[0].Spec.Work)
	}
}

// A job list whose index went back (Nomad restored from an older snapshot,
// or a new cluster at the same address) drops the cache: every job is read
// again, even one whose JobModifyIndex is below the cached one's.
func TestResyncWhenTheIndexGoesBack(t *testing.T) {
	f, c := newFake(t)
	ctx := context.Background()
	f.headerIndex = 500
	if _, err := c.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	reads(f)
	c.mu.Lock()
	c.feed = feed{epoch: 1, live: true, synced: 1, index: 500}
	c.mu.Unlock()
	// The new cluster holds train at a lower index, with other meta.
	f.mu.Lock()
	j := *f.jobs["train"]
	j.JobModifyIndex, j.ModifyIndex = new(uint64(4)), new(uint64(4))
	j.Meta = map[string]string{"fft.work": "77", "fft.throughput": "A100=2"}
	f.jobs["train"] = &j
	f.headerIndex = 20
	f.mu.Unlock()
	begin := time.Now()
	snap, err := c.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := reads(f)
	slices.Sort(got)
	if !slices.Equal(got, []string{"bad", "train", "web"}) || snap.Jobs[0].Spec.Work != 77 || snap.Jobs[0].ModifyIndex != 4 {
		t.Errorf("after the index went back: read %q, job %+v; want every job read, train at index 4 with work 77", got, snap.Jobs[0])
	}
	if took := time.Since(begin); took >= c.streamWait {
		t.Errorf("the round waited %s for the stream after a resync", took)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.feed.index != 0 {
		t.Errorf("the stream resumes from index %d, want 0 (the start) after a resync", c.feed.index)
	}
}

// A started job Nomad has not placed gets its reason from the stream's
// evaluations when the stream has been open since before the job's version,
// and from Nomad otherwise.
func TestStreamedRefusal(t *testing.T) {
	failed := func(jobModify, create uint64) *api.Evaluation {
		return &api.Evaluation{Namespace: "default", JobID: "train", Status: api.EvalStatusComplete, JobModifyIndex: jobModify, CreateIndex: create,
			FailedTGAllocs: map[string]*api.AllocationMetric{"train": {DimensionExhausted: map[string]int{"devices": 1}}}}
	}
	const reason = `task group "train": devices exhausted on 1 node(s)`
	for _, tc := range []struct {
		name    string
		covers  bool
		epoch   uint64 // the stream's epoch; from was set in epoch 1 at index 100
		version uint64 // the job's JobModifyIndex
		evals   []*api.Evaluation
		why     string
		ok      bool
	}{
		{"a failed evaluation of this version", true, 1, 150, []*api.Evaluation{failed(150, 151)}, reason, true},
		{"none yet: Nomad has not answered", true, 1, 150, nil, "", true},
		{"only an older version's", true, 1, 150, []*api.Evaluation{failed(120, 121)}, "", true},
		{"the newest of several wins", true, 1, 150, []*api.Evaluation{failed(150, 152), failed(150, 151)}, reason, true},
		{"a running or blocked evaluation is no answer", true, 1, 150, []*api.Evaluation{{Namespace: "default", JobID: "train", Status: "blocked", JobModifyIndex: 150, CreateIndex: 151}}, "", true},
		{"a version from before the stream: ask", true, 1, 90, []*api.Evaluation{failed(90, 91)}, "", false},
		{"the stream does not cover this round: ask", false, 1, 150, []*api.Evaluation{failed(150, 151)}, "", false},
		{"subscribed again since: ask", true, 2, 150, []*api.Evaluation{failed(150, 151)}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(nil, nil)
			c.feed = feed{epoch: tc.epoch, live: true, from: 100, fromEpoch: 1}
			for _, ev := range tc.evals {
				c.streamedEval(ev)
			}
			why, ok := c.streamedRefusal(&loop.Job{ID: "default/train", ModifyIndex: tc.version}, tc.covers)
			if why != tc.why || ok != tc.ok {
				t.Errorf("= %q, %v; want %q, %v", why, ok, tc.why, tc.ok)
			}
		})
	}
}

// A stream Nomad refuses holds up the first round by at most the wait, and
// no later one.
func TestRefusedStreamWaitsOnce(t *testing.T) {
	f, c := newFake(t)
	f.streamCode = http.StatusForbidden
	c.streamWait, c.streamRetry = 300*time.Millisecond, time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.StartFollowing(ctx)
	for round := 0; round < 3; round++ {
		begin := time.Now()
		if _, err := c.Observe(ctx); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(begin); round > 0 && took >= c.streamWait {
			t.Errorf("round %d took %s: it waited again for a refused stream", round, took)
		}
	}
}
