package nomadapi

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

const (
	// DefaultApplyConcurrency is how many jobs Apply writes at once by
	// default (fft-allocator -apply-concurrency).
	DefaultApplyConcurrency = 8
	// readWorkers is how many jobs Observe reads at once when the event
	// stream has not brought them (the first round reads every job).
	readWorkers = 8
	// progressEvery is how often a long batch of calls logs how far it got.
	progressEvery = 15 * time.Second
)

// forEach calls f(ctx, k) for k in [0, n), at most workers at once, and
// returns the error of the lowest k that failed (with how many others
// failed); every k runs, so nothing is left out when one fails.
func forEach(ctx context.Context, n, workers int, f func(ctx context.Context, k int) error) error {
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(max(1, workers), n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				errs[k] = f(ctx, k)
			}
		}()
	}
	for k := 0; k < n; k++ {
		next <- k
	}
	close(next)
	wg.Wait()
	var first error
	failed := 0
	for _, err := range errs {
		if err != nil {
			if first == nil {
				first = err
			}
			failed++
		}
	}
	if failed > 1 {
		return fmt.Errorf("%w (and %d more failed)", first, failed-1)
	}
	return first
}

func derefIndex(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

// progress logs, every interval while a batch of calls lasts, how many of
// its total are done: a cold round reads every job and holds every waiting
// job in the GPU pool, minutes of calls at 20,000 jobs, which would
// otherwise show nothing between the round's start and its end.
type progress struct {
	done atomic.Int64
	stop chan struct{}
	wg   sync.WaitGroup
}

// startProgress starts logging msg with the count done of total every
// interval; end stops it. An interval of 0 logs nothing.
func startProgress(log hclog.Logger, interval time.Duration, msg string, total int) *progress {
	p := &progress{stop: make(chan struct{})}
	if interval <= 0 || total == 0 {
		return p
	}
	start := time.Now()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				log.Info(msg, "done", p.done.Load(), "total", total, "elapsed", time.Since(start).Round(time.Second))
			}
		}
	}()
	return p
}

// add counts one call of the batch done (or failed).
func (p *progress) add() { p.done.Add(1) }

// end stops the logging, once the batch is done.
func (p *progress) end() {
	close(p.stop)
	p.wg.Wait()
}
