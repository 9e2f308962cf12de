package consulstore

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// Record writes the same keys whether Prepare encoded the job records and the record's job
// lines first or not (the record read back as the same JSON), and a Prepare for another
// ledger or record is not used.
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
	roundRecord := func(round, jobs int) *loop.RoundRecord {
		rec := &loop.RoundRecord{Round: round, Start: "2026-12-06T00:00:00Z"}
		for i := range jobs {
			rec.Jobs = append(rec.Jobs, loop.JobAudit{ID: fmt.Sprintf("default/job-%04d", i), RhoAfter: float64(round + i), Action: loop.ActionKeep})
		}
		return rec
	}
	for round, tc := range []struct {
		jobs  int
		stale string // Prepare another next or record first
	}{{jobs: 3000}, {jobs: 2990}, {jobs: 2990, stale: "ledger"}, {jobs: 2990, stale: "record"}, {jobs: 10}} {
		for _, s := range []*Store{plain, prepared} {
			prev, err := s.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			next, rec := ledgers(round+1, tc.jobs, float64(round)), roundRecord(round, tc.jobs)
			if s == prepared {
				switch tc.stale {
				case "ledger":
					s.Prepare(prev, ledgers(round+1, tc.jobs, -1), rec)
				case "record":
					s.Prepare(prev, next, roundRecord(round, tc.jobs-1))
				default:
					s.Prepare(prev, next, rec)
				}
			}
			if err := s.Record(ctx, prev, next, rec); err != nil {
				t.Fatalf("round %d, %s: %v", round, s.prefix, err)
			}
		}
		want, got := values(t, c, plain.prefix+dirJobs), values(t, c, prepared.prefix+dirJobs)
		if len(want) == 0 || len(got) != len(want) {
			t.Fatalf("round %d: %d job chunks prepared, %d not", round, len(got), len(want))
		}
		for k, v := range want {
			if !bytes.Equal(got[k], v) {
				t.Errorf("round %d: job chunk %s differs when prepared (stale %q)", round, k, tc.stale)
			}
		}
		key := fmt.Sprintf("%012d", round)
		want, got = values(t, c, plain.prefix+dirRounds), values(t, c, prepared.prefix+dirRounds)
		if w, g := unzipped(t, want[key]), unzipped(t, got[key]); len(w) == 0 || !bytes.Equal(g, w) {
			t.Errorf("round %d: the record reads back as %d bytes of JSON when prepared, %d when not (stale %q)", round, len(g), len(w), tc.stale)
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
