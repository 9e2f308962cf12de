// Package recycle keeps one large scratch value between the rounds of a
// process, as sync.Pool does, but where the next round always finds it.
//
// sync.Pool keeps a value Put on one P where only that P's Get sees it
// first: with two Ps, about every other round of BenchmarkDecide found the
// pool empty and allocated its scratch (tens of MB at 100,000 jobs) again,
// and fresh memory costs a page fault per 4 KiB. A Keeper holds the value
// for every goroutine, and drops it once two garbage collections have
// passed without a round taking it, so an idle process does not keep it.
package recycle

import (
	"runtime"
	"sync"
)

// Keeper holds at most one value of *T between its users. The zero Keeper
// is empty and ready.
type Keeper[T any] struct {
	mu sync.Mutex
	// cur was put since the last collection; old before it.
	cur, old *T
	clock    sync.Once
	// ages counts the collections seen (for tests).
	ages int
}

// Take returns the kept value, or nil; the caller then owns it.
func (k *Keeper[T]) Take() *T {
	k.mu.Lock()
	defer k.mu.Unlock()
	v := k.cur
	if v == nil {
		v = k.old
	}
	k.cur, k.old = nil, nil
	return v
}

// Put keeps v for the next Take (dropping any other value kept).
func (k *Keeper[T]) Put(v *T) {
	k.clock.Do(func() { everyGC(k.age) })
	k.mu.Lock()
	k.cur, k.old = v, nil
	k.mu.Unlock()
}

// age runs after each garbage collection: a value not taken since the one
// before is dropped.
func (k *Keeper[T]) age() {
	k.mu.Lock()
	k.cur, k.old = nil, k.cur
	k.ages++
	k.mu.Unlock()
}

// sentinel is a heap object whose collection marks a garbage collection
// (a pointer field keeps it out of the tiny allocator, which would tie
// its lifetime to its neighbours').
type sentinel struct{ _ *byte }

// everyGC calls f after every garbage collection from now on.
func everyGC(f func()) {
	runtime.AddCleanup(new(sentinel), func(f func()) {
		f()
		everyGC(f)
	}, f)
}
