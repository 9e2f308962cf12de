package roundtime

import (
	"context"
	"testing"
	"time"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newFake() (*Meter, *fakeClock) {
	c := &fakeClock{t: time.Unix(0, 0)}
	return &Meter{now: c.now}, c
}

func TestMeterCountsOverlappingCallsOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(m *Meter, c *fakeClock)
		want time.Duration
	}{
		{"none", func(*Meter, *fakeClock) {}, 0},
		{"one call", func(m *Meter, c *fakeClock) { end := m.Begin(); c.add(3 * time.Second); end() }, 3 * time.Second},
		{"end twice counts once", func(m *Meter, c *fakeClock) {
			end := m.Begin()
			c.add(time.Second)
			end()
			c.add(time.Second)
			end()
		}, time.Second},
		{"overlapping", func(m *Meter, c *fakeClock) {
			a := m.Begin()
			c.add(time.Second)
			b := m.Begin()
			c.add(time.Second)
			a()
			c.add(time.Second)
			b()
		}, 3 * time.Second},
		{"a gap between calls is not waiting", func(m *Meter, c *fakeClock) {
			a := m.Begin()
			c.add(time.Second)
			a()
			c.add(5 * time.Second)
			b := m.Begin()
			c.add(2 * time.Second)
			b()
		}, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, c := newFake()
			tc.run(m, c)
			c.add(time.Hour) // after the calls: no waiting
			if got := m.Waited(); got != tc.want {
				t.Errorf("waited %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMeterCountsTheOpenCall(t *testing.T) {
	m, c := newFake()
	end := m.Begin()
	c.add(2 * time.Second)
	if got := m.Waited(); got != 2*time.Second {
		t.Errorf("waited %v while a call is open, want 2s", got)
	}
	end()
}

func TestContextCarriesTheMeter(t *testing.T) {
	if From(context.Background()) != nil {
		t.Fatal("a bare context has a meter")
	}
	Begin(context.Background())() // no meter: no panic
	var none *Meter
	if none.Waited() != 0 {
		t.Fatal("a nil meter waited")
	}
	m, c := newFake()
	ctx := With(context.Background(), m)
	if From(ctx) != m {
		t.Fatal("the context lost its meter")
	}
	end := Begin(ctx)
	c.add(time.Second)
	end()
	if m.Waited() != time.Second {
		t.Errorf("waited %v, want 1s", m.Waited())
	}
}

func TestCPUGrows(t *testing.T) {
	before, ok := CPU()
	if !ok {
		t.Skip("no CPU time on this platform")
	}
	x := 0
	for i := 0; i < 50_000_000; i++ {
		x += i % 7
	}
	after, _ := CPU()
	if after <= before {
		t.Errorf("CPU time did not grow over a busy loop (%d): %v then %v", x, before, after)
	}
}
