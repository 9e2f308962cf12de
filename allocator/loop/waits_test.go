package loop

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/roundtime"
)

// slowObserver waits on "Nomad" (as the measured clients do) before observing.
type slowObserver struct {
	*Harness
	wait time.Duration
}

func (o slowObserver) Observe(ctx context.Context) (*Snapshot, error) {
	end := roundtime.Begin(ctx)
	time.Sleep(o.wait)
	end()
	return o.Harness.Observe(ctx)
}

// Each phase's line tells what it waited on the clients and the CPU it took; the round's line
// the totals.
func TestPhasesTellWaitsAndCPU(t *testing.T) {
	h := &Harness{Models: []allocator.Model{{Name: a100, GPUs: 2}}, Jobs: map[string]*Job{}}
	j := NewJob("a").TP(a100, 1).Obj()
	h.Jobs[j.ID] = &j
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Trace})
	const wait = 30 * time.Millisecond
	l := New(slowObserver{h, wait}, h, NewMemStore(true), WithLogger(log))
	if _, err := l.RunRound(context.Background(), TriggerManual, nil); err != nil {
		t.Fatal(err)
	}
	field := func(mark, key string) time.Duration {
		t.Helper()
		for _, line := range strings.Split(buf.String(), "\n") {
			if !strings.Contains(line, mark) {
				continue
			}
			for _, f := range strings.Fields(line) {
				if v, ok := strings.CutPrefix(f, key+"="); ok {
					// hclog quotes a value with a non-ASCII rune ("627µs").
					if u, err := strconv.Unquote(v); err == nil {
						v = u
					}
					d, err := time.ParseDuration(v)
					if err != nil {
						t.Fatalf("%s in %q: %v", key, line, err)
					}
					return d
				}
			}
			t.Fatalf("no %s in %q", key, line)
		}
		t.Fatalf("no line with %q in\n%s", mark, buf.String())
		return 0
	}
	if w := field("phase done: round=0 phase=1-observe", "waited"); w < wait || w > 20*wait {
		t.Errorf("observe waited %v, want about %v", w, wait)
	}
	if w := field("phase done: round=0 phase=3-solve", "waited"); w != 0 {
		t.Errorf("solve waited %v on no call", w)
	}
	if w := field("round done", "waited"); w < wait {
		t.Errorf("the round waited %v, less than its observe's %v", w, wait)
	}
	if _, ok := roundtime.CPU(); ok && field("round done", "cpu") <= 0 {
		t.Error("the round took no CPU")
	}
}
