package live

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// fakeClock is a clock whose timers fire when the test advances it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []fakeTimer
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.timers = append(c.timers, fakeTimer{c.now.Add(d), ch})
	return ch
}

// Advance moves the clock and fires the timers that are due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if tm.at.After(c.now) {
			kept = append(kept, tm)
		} else {
			tm.ch <- c.now
		}
	}
	c.timers = kept
}

// watchCluster is a fakeCluster that is also a Watcher: it passes on what
// the test sends.
type watchCluster struct {
	*loop.Harness
	triggers chan loop.Trigger

	mu        sync.Mutex
	out       chan<- loop.Trigger
	forwarded int
}

func (w *watchCluster) Watch(ctx context.Context, out chan<- loop.Trigger) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case tr := <-w.triggers:
			out <- tr
			w.mu.Lock()
			w.out = out
			w.forwarded++
			w.mu.Unlock()
		}
	}
}

// taken reports whether Run has received n triggers.
func (w *watchCluster) taken(n int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.forwarded >= n && len(w.out) == 0
}

// Run answers a burst of arrivals with one early round, gap after the last round, and goes
// back to the schedule, R after that early round.
func TestRunEarlyRound(t *testing.T) {
	const every, gap = 300 * time.Second, 5 * time.Second
	clk := &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	t0 := clk.now
	wc := &watchCluster{
		Harness:  &loop.Harness{Models: []allocator.Model{{Name: a100, GPUs: 2}}, Jobs: map[string]*loop.Job{}},
		triggers: make(chan loop.Trigger),
	}
	recs := make(chan *loop.RoundRecord, 8)
	s := New(loop.New(wc, wc, loop.NewMemStore(false), loop.WithClock(clk.Now)), WithClock(clk.Now), WithEarlyRounds(gap),
		WithRoundHook(func(r *loop.RoundRecord, err error) {
			if err != nil {
				t.Errorf("round failed: %v", err)
			}
			recs <- r
		}))
	s.opts.after = clk.After
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, every) }()
	defer func() {
		cancel()
		<-done
	}()
	next := func() *loop.RoundRecord {
		t.Helper()
		select {
		case r := <-recs:
			return r
		case <-time.After(10 * time.Second):
			t.Fatal("no round")
			return nil
		}
	}

	r0 := next()
	if r0.Trigger != loop.TriggerSchedule || r0.IdleGPUs != 2 {
		t.Fatalf("first round: trigger %q, idle %d; want schedule, 2 idle", r0.Trigger, r0.IdleGPUs)
	}
	// Two jobs arrive one second later (the round hook ran, so Run is waiting: the cluster is
	// the test's to change until a trigger wakes it).
	wc.Set(loop.NewJob("a").TP(a100, 1).OffPool().Obj())
	wc.Set(loop.NewJob("b").TP(a100, 1).OffPool().Obj())
	clk.Advance(time.Second)
	wc.triggers <- loop.Trigger{Kind: loop.TriggerArrival, Job: "default/b"}
	wc.triggers <- loop.Trigger{Kind: loop.TriggerArrival, Job: "default/a"}
	// Once Run has received both, the early round answers both whenever the timer fires.
	for deadline := time.Now().Add(10 * time.Second); !wc.taken(2); {
		if time.Now().After(deadline) {
			t.Fatal("Run did not take the triggers")
		}
		time.Sleep(time.Millisecond)
	}
	clk.Advance(gap - time.Second)
	r1 := next()
	if r1.Trigger != loop.TriggerArrival || !reflect.DeepEqual(r1.TriggerJobs, []string{"default/a", "default/b"}) ||
		r1.Start != t0.Add(gap).Format(time.RFC3339Nano) || len(r1.Assignment) != 2 {
		t.Errorf("early round: trigger %q for %q at %s, assignment %v; want one arrival round for a and b at +5s running both",
			r1.Trigger, r1.TriggerJobs, r1.Start, r1.Assignment)
	}
	// Both jobs run: the next round is the regular one, R after the early round.
	clk.Advance(every)
	r2 := next()
	if r2.Trigger != loop.TriggerSchedule || r2.Start != t0.Add(gap+every).Format(time.RFC3339Nano) || r2.TriggerJobs != nil {
		t.Errorf("after the early round: trigger %q at %s; want schedule at +%s", r2.Trigger, r2.Start, gap+every)
	}
	if st := s.Status(); st.Rounds != 3 || st.EarlyRounds != 1 {
		t.Errorf("status counts %d rounds, %d early; want 3 and 1", st.Rounds, st.EarlyRounds)
	}
}
