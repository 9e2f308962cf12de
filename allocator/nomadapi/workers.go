package nomadapi

import (
	"context"
	"fmt"
	"sync"
)

const (
	// DefaultApplyConcurrency is how many jobs Apply writes at once by
	// default (fft-allocator -apply-concurrency).
	DefaultApplyConcurrency = 8
	// readWorkers is how many jobs Observe reads at once when the event
	// stream has not brought them (the first round reads every job).
	readWorkers = 8
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
