package consulstore

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// Record writes the same keys whether Prepare encoded the job records first or not, and
// a Prepare for another ledger is not used.
func TestPrepareAgainstConsul(t *testing.T) {
	c := startConsul(t)
	ctx := context.Background()
	plain, prepared := New(c, "test/plain"), New(c, "test/prepared")
	ledgers := func(round, jobs int, rho float64) *loop.Ledger {
		l := &loop.Ledger{Round: round, Clock: float64(round), Jobs: map[string]loop.JobRecord{}}
		for i := range jobs {
			l.Jobs[fmt.Sprintf("default/job-%04d", i)] = record("", rho+float64(i))
		}
		return l
	}
	for round, tc := range []struct {
		jobs  int
		stale bool // Prepare another next first
	}{{jobs: 3000}, {jobs: 2990}, {jobs: 2990, stale: true}, {jobs: 10}} {
		for _, s := range []*Store{plain, prepared} {
			prev, err := s.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			next := ledgers(round+1, tc.jobs, float64(round))
			if s == prepared {
				if tc.stale {
					s.Prepare(prev, ledgers(round+1, tc.jobs, -1))
				} else {
					s.Prepare(prev, next)
				}
			}
			if err := s.Record(ctx, prev, next, &loop.RoundRecord{Round: round}); err != nil {
				t.Fatalf("round %d, %s: %v", round, s.prefix, err)
			}
		}
		want, got := values(t, c, plain.prefix+dirJobs), values(t, c, prepared.prefix+dirJobs)
		if len(want) == 0 || len(got) != len(want) {
			t.Fatalf("round %d: %d job chunks prepared, %d not", round, len(got), len(want))
		}
		for k, v := range want {
			if !bytes.Equal(got[k], v) {
				t.Errorf("round %d: job chunk %s differs when prepared (stale %v)", round, k, tc.stale)
			}
		}
	}
}

// values are the KV values under prefix, by key below it.
func values(t *testing.T, c *api.Client, prefix string) map[string][]byte {
	t.Helper()
	pairs, _, err := c.KV().List(prefix, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, p := range pairs {
		out[p.Key[len(prefix):]] = p.Value
	}
	return out
}
