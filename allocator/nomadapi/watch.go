package nomadapi

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/allocator/jobmeta"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

var _ loop.Watcher = (*Client)(nil)

const (
	// watchInterval is the least time between two blocking queries on one
	// list: on a busy cluster the allocations change often, and each answer
	// is the whole list.
	watchInterval = time.Second
	// watchWait is how long one blocking query waits for a change.
	watchWait = 5 * time.Minute
	// watchBackoffMax bounds the wait between retries after a failed query.
	watchBackoffMax = 30 * time.Second
)

// Watch reports, until ctx ends, the changes that may justify an early
// round, from two blocking queries: the job list (with meta) for managed
// jobs that appear (arrival, or unheld when the job is neither gated nor
// outside the GPU pool; one job read each) or disappear (finish: a stop or
// purge frees its GPUs), and the allocation list for allocations of managed
// jobs that end on their own (finish). The first job list is compared with
// the last Observe (the baseline when there was none); the first allocation
// list is the baseline. A failed query is retried with backoff. Every call
// counts in the next Observe's WatchCalls.
func (c *Client) Watch(ctx context.Context, out chan<- loop.Trigger) error {
	w := &watcher{c: c, out: out}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.watchLoop(ctx, "jobs", w.jobs) }()
	go func() { defer wg.Done(); c.watchLoop(ctx, "allocations", w.allocs) }()
	wg.Wait()
	return ctx.Err()
}

// watchLoop runs one blocking query after another, at most one per
// watchEvery, from the index the last answer returned.
func (c *Client) watchLoop(ctx context.Context, list string, query func(ctx context.Context, index uint64) (uint64, error)) {
	var index uint64
	backoff := c.watchEvery
	for ctx.Err() == nil {
		begin := time.Now()
		next, err := query(ctx, index)
		c.watchCalls.Add(1)
		wait := c.watchEvery - time.Since(begin)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			c.log.Warn("watching Nomad for early rounds failed; retrying", "list", list, "error", err, "retry_in", backoff)
			wait, backoff = backoff, min(2*backoff, watchBackoffMax)
		default:
			backoff = c.watchEvery
			// An index that goes back (a restored snapshot) starts over.
			if next < index {
				next = 0
			}
			index = next
		}
		sleep(ctx, wait)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// watcher holds what the two lists looked like last time.
type watcher struct {
	c   *Client
	out chan<- loop.Trigger

	mu sync.Mutex
	// managed are the managed jobs the job list last showed (nil before
	// its first answer); status is each allocation's client status as the
	// allocation list last showed it (nil before its first answer).
	managed map[string]bool
	status  map[string]string
}

func (w *watcher) send(ctx context.Context, trs []loop.Trigger) {
	for _, tr := range trs {
		w.c.log.Debug("cluster change", "trigger", tr.Kind, "job", tr.Job)
		select {
		case w.out <- tr:
		case <-ctx.Done():
			return
		}
	}
}

func (w *watcher) jobs(ctx context.Context, index uint64) (uint64, error) {
	q := (&api.QueryOptions{Namespace: "*", WaitIndex: index, WaitTime: watchWait, Params: map[string]string{"meta": "true"}}).WithContext(ctx)
	stubs, meta, err := w.c.nomad.Jobs().List(q)
	if err != nil {
		return 0, fmt.Errorf("listing jobs: %w", needs(err, capListJobs))
	}
	cur := managedStubs(stubs)
	w.mu.Lock()
	prev := w.managed
	w.managed = cur
	w.mu.Unlock()
	if prev == nil {
		// The first list: what a round already observed is no news, so a
		// job that arrived between that round and this list still counts.
		w.c.mu.Lock()
		prev = maps.Clone(w.c.observed)
		w.c.mu.Unlock()
	}
	if prev == nil {
		return meta.LastIndex, nil
	}
	arrived, left := changedJobs(prev, cur)
	var trs []loop.Trigger
	for _, id := range arrived {
		trs = append(trs, loop.Trigger{Kind: w.arrival(ctx, id), Job: id})
	}
	for _, id := range left {
		trs = append(trs, loop.Trigger{Kind: loop.TriggerFinish, Job: id})
	}
	w.send(ctx, trs)
	return meta.LastIndex, nil
}

// arrival reads a job that appeared and says whether Nomad may place it on
// its own (unheld) or it is held; a job that cannot be read counts as held.
func (w *watcher) arrival(ctx context.Context, id string) loop.TriggerKind {
	ns, name, _ := strings.Cut(id, "/")
	job, _, err := w.c.nomad.Jobs().Info(name, (&api.QueryOptions{Namespace: ns}).WithContext(ctx))
	w.c.watchCalls.Add(1)
	if err != nil {
		w.c.log.Debug("reading an arrived job failed; taking it as held", "job", id, "error", err)
		return loop.TriggerArrival
	}
	if Gated(job) || !InPool(job, w.c.pool) {
		return loop.TriggerArrival
	}
	return loop.TriggerUnheld
}

func (w *watcher) allocs(ctx context.Context, index uint64) (uint64, error) {
	q := (&api.QueryOptions{Namespace: "*", WaitIndex: index, WaitTime: watchWait}).WithContext(ctx)
	allocs, meta, err := w.c.nomad.Allocations().List(q)
	if err != nil {
		return 0, fmt.Errorf("listing allocations: %w", needs(err, capReadJob))
	}
	w.mu.Lock()
	managed := w.managed
	next, ended := endedAllocs(w.status, allocs, managed)
	w.status = next
	w.mu.Unlock()
	w.send(ctx, ended)
	return meta.LastIndex, nil
}

// managedStubs returns the keys of the candidate jobs in the list that opt
// in with fft. meta (the list carries meta when asked with meta=true).
func managedStubs(stubs []*api.JobListStub) map[string]bool {
	out := map[string]bool{}
	for _, s := range stubs {
		if candidate(s) && jobmeta.Managed(s.Meta) {
			out[jobKey(s.Namespace, s.ID)] = true
		}
	}
	return out
}

// changedJobs returns, sorted, the jobs in cur that prev lacks and the jobs
// in prev that cur lacks.
func changedJobs(prev, cur map[string]bool) (arrived, left []string) {
	for id := range cur {
		if !prev[id] {
			arrived = append(arrived, id)
		}
	}
	for id := range prev {
		if !cur[id] {
			left = append(left, id)
		}
	}
	sort.Strings(arrived)
	sort.Strings(left)
	return arrived, left
}

// terminal reports whether a client status is final.
func terminal(status string) bool {
	return status == api.AllocClientStatusComplete || status == api.AllocClientStatusFailed || status == api.AllocClientStatusLost
}

// endedAllocs compares an allocation list with the client statuses seen
// last time (prev; nil for the first list, which is only the baseline) and
// returns the statuses to keep and a finish trigger per managed job one of
// whose allocations ended on its own: it is meant to run (a park or an
// update stops allocations with desired status stop) and its client status
// became final since the last list, or it is new and already final.
func endedAllocs(prev map[string]string, allocs []*api.AllocationListStub, managed map[string]bool) (map[string]string, []loop.Trigger) {
	next := make(map[string]string, len(allocs))
	seen := map[string]bool{}
	var out []loop.Trigger
	for _, a := range allocs {
		next[a.ID] = a.ClientStatus
		if prev == nil || a.DesiredStatus != api.AllocDesiredStatusRun || !terminal(a.ClientStatus) {
			continue
		}
		if was, ok := prev[a.ID]; ok && terminal(was) {
			continue
		}
		key := jobKey(a.Namespace, a.JobID)
		if managed[key] && !seen[key] {
			seen[key] = true
			out = append(out, loop.Trigger{Kind: loop.TriggerFinish, Job: key})
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Job < out[b].Job })
	return next, out
}
