package nomadapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/roundtime"
)

// Nomad's event stream (GET /v1/event/stream, topics Job, Evaluation and
// Allocation) carries the whole job with every change of it, and every
// evaluation (allocations only move its index, joblist.go):
// Follow keeps the client's job cache current from it, so that a round reads
// no job on its own that changed while the stream was open, and keeps the
// evaluations that failed to place a job, so that a round asks Nomad for no
// reason the stream brought. The stream only saves reads: Observe still compares
// every cached job with the job list's JobModifyIndex, and reads what the
// stream has not brought, so a stream that breaks, lags or misses events
// costs reads, never a stale job.

const (
	// defaultStreamWait bounds how long Observe waits for the stream to
	// bring a job the list shows changed, before it reads the job itself:
	// events trail the list by milliseconds.
	defaultStreamWait = time.Second
	// streamBackoff is the first wait before subscribing again after the
	// stream broke; it doubles up to watchBackoffMax.
	streamBackoff = time.Second
	// streamHealthy is how long a subscription must have lasted for the
	// next failure to start the backoff over.
	streamHealthy = time.Minute
)

// feed is the event stream's state, under Client.mu.
type feed struct {
	// epoch counts subscriptions that answered; live is true while the
	// latest one is open. index is the highest event index received, where
	// a new subscription resumes.
	epoch uint64
	live  bool
	index uint64
	// wake is closed (and replaced) when the stream brings jobs or breaks,
	// to wake an Observe waiting for it.
	wake chan struct{}
	// synced is the epoch the last Observe started in while live (0: none).
	synced uint64
	// following counts running Follow calls; awaited is set once an
	// Observe waited for the first subscription.
	following int
	awaited   bool
	// from is the job list index of the first Observe in epoch fromEpoch:
	// every evaluation that finished after it came on the stream.
	from, fromEpoch uint64
}

// notify wakes those waiting on the feed; the caller holds Client.mu.
func (f *feed) notify() {
	if f.wake != nil {
		close(f.wake)
	}
	f.wake = make(chan struct{})
}

// streamEvents is one line of the event stream: the events of one index
// ({} is a heartbeat). Decoding the job as Jobs().Info does keeps the cache
// the same whichever way a job came in.
type streamEvents struct {
	Index  uint64
	Events []streamEvent
}

type streamEvent struct {
	Topic   string
	Type    string
	Key     string
	Index   uint64
	Payload streamPayload
}

// streamPayload is what the stream carries of the two topics followed.
type streamPayload struct {
	Job        *api.Job
	Evaluation *api.Evaluation
}

// Follow subscribes to Nomad's event stream (topics Job, Evaluation and
// Allocation, every namespace)
// and keeps the job cache current from it until ctx ends; it subscribes
// again after a failure, from the last index it received, with backoff. The
// token needs read-job on namespace "*" (the shipped policy grants it): a
// token scoped to fewer namespaces is refused, and rounds then read each
// changed job themselves, as without Follow.
func (c *Client) Follow(ctx context.Context) error {
	c.following(1)
	defer c.following(-1)
	return c.followLoop(ctx)
}

// StartFollowing runs Follow in the background until ctx ends. The next
// Observe waits (at most a second) for its subscription, so that the round
// after it takes changed jobs from the stream.
func (c *Client) StartFollowing(ctx context.Context) {
	c.following(1)
	go func() {
		defer c.following(-1)
		_ = c.followLoop(ctx)
	}()
}

func (c *Client) following(d int) {
	c.mu.Lock()
	c.feed.following += d
	c.feed.notify()
	c.mu.Unlock()
}

func (c *Client) followLoop(ctx context.Context) error {
	backoff := c.streamRetry
	for ctx.Err() == nil {
		began := time.Now()
		err := c.follow(ctx)
		c.streamDown()
		if ctx.Err() != nil {
			break
		}
		if time.Since(began) > streamHealthy {
			backoff = c.streamRetry
		}
		c.log.Warn("Nomad's event stream broke; rounds read changed jobs one by one until it is back", "error", err, "retry_in", backoff)
		sleep(ctx, backoff)
		backoff = min(2*backoff, watchBackoffMax)
	}
	return ctx.Err()
}

// follow runs one subscription until it fails or ctx ends.
func (c *Client) follow(ctx context.Context) error {
	c.mu.Lock()
	from := c.feed.index
	c.mu.Unlock()
	q := (&api.QueryOptions{Namespace: "*", Params: map[string]string{"index": strconv.FormatUint(from, 10)}}).WithContext(ctx)
	body, err := c.nomad.Raw().Response("/v1/event/stream?topic=Job&topic=Evaluation&topic=Allocation", q)
	if err != nil {
		return fmt.Errorf("subscribing to the event stream: %w", needsStream(err))
	}
	defer body.Close()
	return c.consume(ctx, body, from)
}

// consume reads the stream's lines into the cache until the stream ends.
// The first line (Nomad sends a heartbeat as soon as it subscribed) marks
// the subscription live.
func (c *Client) consume(ctx context.Context, r io.Reader, from uint64) error {
	dec := json.NewDecoder(r)
	for first := true; ; first = false {
		var evs streamEvents
		if err := dec.Decode(&evs); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				return errors.New("Nomad closed the event stream")
			}
			return fmt.Errorf("reading the event stream: %w", err)
		}
		if first {
			c.log.Info("following Nomad's event stream: rounds take changed jobs from it", "from_index", from)
		}
		c.mu.Lock()
		if first {
			c.feed.epoch++
			c.feed.live = true
			c.feed.notify()
		}
		c.streamed(&evs)
		c.mu.Unlock()
	}
}

// streamed puts the jobs of one line of the stream into the cache: a job
// replaces the cached one unless that is newer (a read can race an event).
// Purges need nothing: Observe drops what the job list no longer shows.
// The caller holds c.mu.
func (c *Client) streamed(evs *streamEvents) {
	// Nomad 1.6 sends no index on the line, only on each event.
	before := c.feed.index
	c.feed.index = max(c.feed.index, evs.Index)
	inLine := map[string]bool{}
	for _, e := range evs.Events {
		if job := e.Payload.Job; e.Topic == string(api.TopicJob) && job != nil && job.ID != nil {
			inLine[jobKey(deref(job.Namespace), *job.ID)] = true
		}
	}
	for _, e := range evs.Events {
		c.feed.index = max(c.feed.index, e.Index)
		if ev := e.Payload.Evaluation; e.Topic == string(api.TopicEvaluation) && ev != nil {
			c.streamedEval(ev)
			c.streamedPurge(ev, e.Index, inLine)
			continue
		}
		job := e.Payload.Job
		if e.Topic != string(api.TopicJob) || job == nil || job.ID == nil || job.JobModifyIndex == nil || job.ModifyIndex == nil {
			continue
		}
		c.streamedStub(job)
		if t := deref(job.Type); t == "system" || t == "sysbatch" {
			continue
		}
		key := jobKey(deref(job.Namespace), *job.ID)
		if old := c.jobs[key]; old != nil && old.ModifyIndex != nil && *old.ModifyIndex > *job.ModifyIndex {
			continue
		}
		c.jobs[key] = job
	}
	if c.feed.index > before {
		// An Observe may wait for a job, or for the stream to reach an index.
		c.feed.notify()
	}
}

// streamedEval keeps an evaluation that finished with placements failed,
// the newest per job: the reason a round records when Nomad did not place a
// job it started (refused). The caller holds c.mu.
func (c *Client) streamedEval(ev *api.Evaluation) {
	if ev.Status != api.EvalStatusComplete || len(ev.FailedTGAllocs) == 0 {
		return
	}
	key := jobKey(ev.Namespace, ev.JobID)
	if old := c.failedEvals[key]; old == nil || ev.CreateIndex > old.CreateIndex {
		c.failedEvals[key] = ev
	}
}

// streamDown marks the stream broken and wakes a waiting Observe.
func (c *Client) streamDown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.feed.live = false
	c.feed.notify()
}

// needsStream is needs for the event stream, whose Job and Evaluation topics on every
// namespace needs read-job on namespace "*".
func needsStream(err error) error {
	var re api.UnexpectedResponseError
	if errors.As(err, &re) && re.StatusCode() == http.StatusForbidden {
		return fmt.Errorf("%w: the allocator's Nomad token lacks %s on namespace \"*\" (grant cmd/fft-allocator/acl/nomad-policy.hcl)", err, capReadJob)
	}
	return err
}

// awaitFirstSubscription waits, at most c.streamWait, for a Follow that has
// not yet subscribed to do so, so that the round after this one already
// takes changed jobs from the stream. The caller holds c.mu.
func (c *Client) awaitFirstSubscription(ctx context.Context) {
	// Once: a stream Nomad refuses must not hold up every round.
	if c.feed.following == 0 || c.feed.epoch > 0 || c.feed.awaited {
		return
	}
	c.feed.awaited = true
	c.waitFeed(ctx, func() bool { return c.feed.epoch == 0 && c.feed.following > 0 })
}

// streamCovers reports whether the stream has been open since before the
// last Observe listed jobs, so that every job changed since then is on its
// way, and marks this observation's epoch. The caller holds c.mu.
func (c *Client) streamCovers() bool {
	f := &c.feed
	covers := f.live && f.synced != 0 && f.synced == f.epoch
	f.synced = 0
	if f.live {
		f.synced = f.epoch
	}
	return covers
}

// awaitStream waits, at most c.streamWait, until stale reports no job the
// stream still has to bring, or the stream breaks. It returns with c.mu
// held, as it was called.
func (c *Client) awaitStream(ctx context.Context, stale func() int) {
	c.waitFeed(ctx, func() bool { return stale() > 0 && c.feed.live })
}

// waitFeed waits while more holds, at most c.streamWait, checking again on
// each wake of the stream. It is called with c.mu held, releases it while
// it waits, and returns with it held.
func (c *Client) waitFeed(ctx context.Context, more func() bool) {
	defer roundtime.Begin(ctx)() // waiting on Nomad, as a call would
	deadline := time.NewTimer(c.streamWait)
	defer deadline.Stop()
	for more() {
		if c.feed.wake == nil {
			c.feed.wake = make(chan struct{})
		}
		wake := c.feed.wake
		c.mu.Unlock()
		select {
		case <-wake:
			c.mu.Lock()
		case <-deadline.C:
			c.mu.Lock()
			return
		case <-ctx.Done():
			c.mu.Lock()
			return
		}
	}
}

// resync drops the cache when the job list's index went back (Nomad's
// state restored from an older snapshot, or a new cluster at the same
// address): the cached versions' indexes mean nothing there, and the stream
// resumes from the start. It reports whether it dropped anything.
func (c *Client) resync(index uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	back := index < c.listIndex
	c.listIndex = index
	if !back {
		return false
	}
	c.log.Warn("Nomad's job index went back; reading every job again", "index", index)
	clear(c.jobs)
	clear(c.failedEvals)
	clear(c.listed)
	clear(c.gone)
	c.listEpoch = 0
	c.feed.index, c.feed.synced, c.feed.fromEpoch = 0, 0, 0
	return true
}

// markFrom records the job list index of the first Observe of the stream's
// current subscription (see feed.from).
func (c *Client) markFrom(index uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := &c.feed; f.synced != 0 && f.fromEpoch != f.synced {
		f.from, f.fromEpoch = index, f.synced
	}
}

// streamedRefusal is refused from the stream's evaluations: ok is false
// when the stream may have missed the job's evaluations (it was not open
// since before the job's current version), and the round asks Nomad.
func (c *Client) streamedRefusal(j *loop.Job, covers bool) (why string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := &c.feed
	if !covers || f.fromEpoch != f.epoch || j.ModifyIndex <= f.from {
		return "", false
	}
	if ev := c.failedEvals[j.ID]; ev != nil && ev.JobModifyIndex >= j.ModifyIndex {
		return placementFailure(ev.FailedTGAllocs), true
	}
	return "", true
}

// fresh reports whether the cached job is the one the list shows (or newer:
// the stream may be ahead of the list).
func fresh(job *api.Job, s *api.JobListStub) bool {
	return job != nil && job.JobModifyIndex != nil && *job.JobModifyIndex >= s.JobModifyIndex
}

// refresh brings the cache up to the job list: a candidate job whose cached
// version is older than the list's (or missing) comes from the event stream
// when the stream covers it (waiting at most c.streamWait), else from one read
// each, readWorkers at a time. It returns the reads it made.
func (c *Client) refresh(ctx context.Context, stubs []*api.JobListStub, covers bool) (int, error) {
	c.mu.Lock()
	var stale []*api.JobListStub
	for _, s := range stubs {
		if candidate(s) && !fresh(c.jobs[jobKey(s.Namespace, s.ID)], s) {
			stale = append(stale, s)
		}
	}
	// Jobs whose write failed left the cache and changed nowhere: no event
	// brings them back.
	reread := c.reread
	c.reread = map[string]bool{}
	if covers && len(stale) > 0 {
		c.awaitStream(ctx, func() int {
			stale = slices.DeleteFunc(stale, func(s *api.JobListStub) bool {
				return fresh(c.jobs[jobKey(s.Namespace, s.ID)], s)
			})
			n := 0
			for _, s := range stale {
				if !reread[jobKey(s.Namespace, s.ID)] {
					n++
				}
			}
			return n
		})
	}
	c.mu.Unlock()
	if len(stale) == 0 {
		return 0, nil
	}
	if c.log.IsDebug() {
		var sample []string
		c.mu.Lock()
		for _, s := range stale[:min(len(stale), 5)] {
			cached := "none"
			if j := c.jobs[jobKey(s.Namespace, s.ID)]; j != nil {
				cached = fmt.Sprintf("%d/%d", derefIndex(j.JobModifyIndex), derefIndex(j.ModifyIndex))
			}
			sample = append(sample, fmt.Sprintf("%s list %d cached %s", jobKey(s.Namespace, s.ID), s.JobModifyIndex, cached))
		}
		feed := c.feed
		c.mu.Unlock()
		c.log.Debug("reading changed jobs the event stream has not brought", "jobs", len(stale), "stream_covers", covers,
			"stream_live", feed.live, "stream_index", feed.index, "sample", sample)
	}
	jobs := make([]*api.Job, len(stale))
	prog := startProgress(c.log, c.progressEvery, "reading jobs", len(stale))
	err := forEach(ctx, len(stale), readWorkers, func(ctx context.Context, k int) error {
		defer prog.add()
		s := stale[k]
		job, _, err := c.nomad.Jobs().Info(s.ID, (&api.QueryOptions{Namespace: s.Namespace}).WithContext(ctx))
		if err != nil {
			return fmt.Errorf("reading job %q: %w", jobKey(s.Namespace, s.ID), needs(err, capReadJob))
		}
		jobs[k] = job
		return nil
	})
	prog.end()
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, job := range jobs {
		if job == nil {
			continue // not read: err says why
		}
		key := jobKey(stale[k].Namespace, stale[k].ID)
		if cur := c.jobs[key]; cur != nil && derefIndex(cur.ModifyIndex) > derefIndex(job.ModifyIndex) {
			continue // the stream brought a newer version meanwhile
		}
		c.jobs[key] = job
	}
	return len(stale), err
}
