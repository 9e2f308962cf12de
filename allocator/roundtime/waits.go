// Package roundtime measures where a round's wall time goes: how long the round waited on Nomad and
// Consul (a Meter carried in the round's context, fed by the HTTP clients' transport), and how
// much CPU the process spent meanwhile (CPU). The rest of a phase is the allocator's own: its
// CPU, or waiting for a core.
package roundtime

import (
	"context"
	"sync"
	"time"
)

// Meter adds up the wall time during which at least one call is outstanding: calls made at
// once (the apply's, the record's) count once, not once each.
type Meter struct {
	mu    sync.Mutex
	out   int
	since time.Time
	total time.Duration
	now   func() time.Time
}

// NewMeter returns a meter on the wall clock.
func NewMeter() *Meter { return &Meter{now: time.Now} }

// Begin marks a call as started; the function it returns marks it done (once, however often
// it is called).
func (m *Meter) Begin() (end func()) {
	m.mu.Lock()
	if m.out == 0 {
		m.since = m.now()
	}
	m.out++
	m.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			m.out--
			if m.out == 0 {
				m.total += m.now().Sub(m.since)
			}
			m.mu.Unlock()
		})
	}
}

// Waited is the time with a call outstanding so far, the open stretch included.
func (m *Meter) Waited() time.Duration {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.out > 0 {
		return m.total + m.now().Sub(m.since)
	}
	return m.total
}

type meterKey struct{}

// With returns ctx carrying m: the calls made with it are measured by m.
func With(ctx context.Context, m *Meter) context.Context {
	return context.WithValue(ctx, meterKey{}, m)
}

// From is the meter ctx carries (nil: none).
func From(ctx context.Context) *Meter {
	m, _ := ctx.Value(meterKey{}).(*Meter)
	return m
}

// Begin marks a wait on Nomad or Consul under ctx's meter as started (a no-op without one).
func Begin(ctx context.Context) (end func()) {
	if m := From(ctx); m != nil {
		return m.Begin()
	}
	return func() {}
}
