package nomadapi

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/nomad/api"
)

// The job list (GET /v1/jobs) carries every job with its summary: at
// 20,000 jobs it is the largest read of a round. While one subscription to
// the event stream has been open since the last full list, a round takes
// the list from the stream instead (listed): every Job event updates the
// job's entry, and a job-deregister evaluation created at an index the
// job's entry is older than is a purge (Nomad 1.6.1 sends no event when it
// deletes a job; a stop sends the stopped job at the evaluation's index).
// The round asks Nomad only for the list's index (one job per page) and
// waits, at most streamWait, for the stream to reach it; the Allocation
// topic is followed only so that the stream's index moves with the job
// summaries, which move the list's index. Anything else (a stream behind,
// broken or resubscribed, a list index that went back, a lost
// check-and-set, fullListEvery since the last full list) lists every job,
// as before: a change Nomad makes without an event (a periodic job purged,
// the garbage collector's purges, a status set when evaluations are
// reaped) leaves the list's index ahead of the stream, so it is read at
// once, or at the latest within fullListEvery when later events hid it.

// defaultFullListEvery bounds how long the job list is taken from the
// stream before every job is listed again.
const defaultFullListEvery = 5 * time.Minute

// evalTriggerJobDeregister is Nomad's TriggeredBy of a stop's or a purge's
// evaluation.
const evalTriggerJobDeregister = "job-deregister"

// listStub is the part of a job list entry Observe uses, from a streamed job.
func listStub(job *api.Job) *api.JobListStub {
	return &api.JobListStub{
		ID: deref(job.ID), Namespace: deref(job.Namespace), Type: deref(job.Type), Status: deref(job.Status),
		Stop: job.Stop != nil && *job.Stop, JobModifyIndex: derefIndex(job.JobModifyIndex), ModifyIndex: derefIndex(job.ModifyIndex),
	}
}

// streamedStub puts a streamed job into the kept job list, unless the list
// holds a newer version. The caller holds c.mu.
func (c *Client) streamedStub(job *api.Job) {
	s := listStub(job)
	key := jobKey(s.Namespace, s.ID)
	if old := c.listed[key]; old != nil && old.ModifyIndex > s.ModifyIndex {
		return
	}
	c.listed[key] = s
}

// streamedPurge drops a purged job from the kept job list: Nomad creates a
// job-deregister evaluation with a stop and with a purge, at the index of
// the deregistration, in a transaction of its own (fsm.go
// applyDeregisterJob), so it may come in a line after the job's. A stop
// also sends the stopped job at that index; a purge sends no job, and the
// job's entry stays older. The caller holds c.mu.
func (c *Client) streamedPurge(ev *api.Evaluation, index uint64, inLine map[string]bool) {
	key := jobKey(ev.Namespace, ev.JobID)
	// CreateIndex: the deregistration itself, not a later update of its evaluation.
	if ev.TriggeredBy != evalTriggerJobDeregister || ev.CreateIndex != index || inLine[key] {
		return
	}
	if s := c.listed[key]; s != nil && s.ModifyIndex < index {
		delete(c.listed, key)
	}
	c.gone[key] = max(c.gone[key], index)
}

// listFromStream reports whether the stream has been open since the last
// full list, within fullListEvery. The caller holds c.mu.
func (c *Client) listFromStream() bool {
	f := &c.feed
	return f.live && c.listEpoch != 0 && c.listEpoch == f.epoch && !c.relist && time.Since(c.listedAt) < c.fullListEvery
}

// streamedList is the job list as the stream keeps it, once the stream has
// reached the list's index (one call, one job). ok is false when the stream
// did not within streamWait, or broke, or the index went back: the round
// lists every job.
func (c *Client) streamedList(ctx context.Context) (stubs []*api.JobListStub, index uint64, ok, resynced bool, err error) {
	q := (&api.QueryOptions{Namespace: "*", PerPage: 1}).WithContext(ctx)
	_, meta, err := c.nomad.Jobs().List(q)
	if err != nil {
		return nil, 0, false, false, fmt.Errorf("reading the job list's index: %w", needs(err, capListJobs))
	}
	index = meta.LastIndex
	if c.resync(index) {
		return nil, index, false, true, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	following := func() bool { return c.feed.live && c.feed.epoch == c.listEpoch }
	// Nothing changed since the full list, or every event up to the index came.
	current := func() bool { return index <= c.fullIndex || c.feed.index >= index }
	c.waitFeed(ctx, func() bool { return following() && !current() })
	if !following() || !current() {
		c.log.Debug("the event stream has not reached the job list's index; listing every job", "list_index", index,
			"stream_index", c.feed.index, "stream_live", c.feed.live)
		return nil, index, false, false, nil
	}
	c.log.Debug("took the job list from the event stream", "list_index", index, "stream_index", c.feed.index, "jobs", len(c.listed))
	return slices.Collect(maps.Values(c.listed)), index, true, false, nil
}

// fullList lists every job and keeps the list, with what the stream brought
// after it, for the rounds that take it from the stream. resynced reports
// that the list's index went back (resync).
func (c *Client) fullList(ctx context.Context) (stubs []*api.JobListStub, index uint64, resynced bool, err error) {
	c.mu.Lock()
	epoch := uint64(0)
	if c.feed.live {
		epoch = c.feed.epoch
	}
	c.mu.Unlock()
	q := (&api.QueryOptions{Namespace: "*"}).WithContext(ctx)
	stubs, meta, err := c.nomad.Jobs().List(q)
	if err != nil {
		return nil, 0, false, fmt.Errorf("listing jobs: %w", needs(err, capListJobs))
	}
	index = meta.LastIndex
	resynced = c.resync(index)
	c.mu.Lock()
	defer c.mu.Unlock()
	listed := make(map[string]*api.JobListStub, len(stubs))
	for _, s := range stubs {
		listed[jobKey(s.Namespace, s.ID)] = s
	}
	// Events past the list may have come before its answer.
	for key, s := range c.listed {
		if s.ModifyIndex > index {
			listed[key] = s
		}
	}
	for key, at := range c.gone {
		if at <= index {
			delete(c.gone, key)
		} else if s := listed[key]; s != nil && s.ModifyIndex < at {
			delete(listed, key)
		}
	}
	c.listed, c.listedAt, c.relist, c.fullIndex = listed, time.Now(), false, index
	// Only a subscription open before the list was asked for has every change after it.
	c.listEpoch = 0
	if epoch != 0 && c.feed.live && c.feed.epoch == epoch {
		c.listEpoch = epoch
	}
	return stubs, index, resynced, nil
}
