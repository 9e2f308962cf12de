package consulstore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// A round is claimed before it is applied: the claim advances the ledger and writes the
// round's intent, so a replica that dies before recording leaves the intent and the next
// leader goes on with the following round; a second claim of the same round, or a claim from
// a stale ledger, loses; the full record replaces the intent only at the claim's index.
func TestClaimAgainstConsul(t *testing.T) {
	c := startConsul(t)
	ctx := context.Background()
	s := New(c, "test/claim/v1")

	empty, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := &loop.Ledger{Round: 1, Clock: 1, Jobs: map[string]loop.JobRecord{"default/a": record("", 0.5)}}
	intent := &loop.RoundRecord{Round: 0, State: loop.RoundApplying, Assignment: map[string]string{"default/a": "A100"}}
	v, err := s.Claim(ctx, empty, next, intent)
	if err != nil || v == 0 {
		t.Fatalf("Claim round 0 = %d, %v", v, err)
	}

	// The claimer dies here. The store says: round 1 next, no job records yet, round 0's intent.
	after, err := s.Load(ctx)
	if err != nil || after.Round != 1 || after.Version != v || len(after.Jobs) != 0 {
		t.Fatalf("Load after the claim = round %d version %d (want 1, %d), %d jobs, %v", after.Round, after.Version, v, len(after.Jobs), err)
	}
	back, err := s.ReadRound(ctx, 0)
	if err != nil || back.State != loop.RoundApplying || back.Assignment["default/a"] != "A100" {
		t.Fatalf("round 0 after the claim = %+v, %v; want its intent", back, err)
	}
	// Claiming round 0 again from the empty store loses, as does recording it unclaimed.
	if _, err := s.Claim(ctx, empty, next, intent); !errors.Is(err, loop.ErrConflict) {
		t.Errorf("second claim of round 0: err = %v, want ErrConflict", err)
	}
	if err := s.Record(ctx, after, &loop.Ledger{Round: 1}, &loop.RoundRecord{Round: 0}); !errors.Is(err, loop.ErrConflict) {
		t.Errorf("recording round 0 over its intent without the claim: err = %v, want ErrConflict", err)
	}

	// The next leader claims and records round 1.
	next2 := &loop.Ledger{Round: 2, Clock: 2, Jobs: map[string]loop.JobRecord{"default/a": record("", 1)}}
	v2, err := s.Claim(ctx, after, next2, &loop.RoundRecord{Round: 1, State: loop.RoundApplying})
	if err != nil {
		t.Fatalf("Claim round 1: %v", err)
	}
	claimed := *after
	claimed.Version, claimed.Claimed = v2, true
	if err := s.Record(ctx, &claimed, next2, &loop.RoundRecord{Round: 1, InputsDigest: "full"}); err != nil {
		t.Fatalf("Record round 1 over its claim: %v", err)
	}
	got, err := s.Load(ctx)
	if err != nil || got.Round != 2 || got.Version != next2.Version || got.Jobs["default/a"].Rho != 1 {
		t.Fatalf("Load after round 1 = %+v, %v", got, err)
	}
	if r1, err := s.ReadRound(ctx, 1); err != nil || r1.State != "" || r1.InputsDigest != "full" {
		t.Errorf("round 1 = %+v, %v; want the full record", r1, err)
	}
	if r0, _ := s.ReadRound(ctx, 0); r0.State != loop.RoundApplying {
		t.Errorf("round 0's intent was replaced: %+v", r0)
	}
}

// Layout 2 writes at most JobChunks job keys per round, however many jobs change; a round
// record too large for one transaction is gzipped, then stored without options; the audit log
// keeps the latest rounds only.
func TestBoundedWritesAgainstConsul(t *testing.T) {
	c := startConsul(t)
	ctx := context.Background()
	s := New(c, "test/bounded/v2").WithAuditRounds(3)
	prev, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const jobs = 3000
	for round := 0; round < 5; round++ {
		next := &loop.Ledger{Round: round + 1, Clock: float64(round + 1), Jobs: map[string]loop.JobRecord{}}
		rec := &loop.RoundRecord{Round: round, Assignment: map[string]string{}}
		for i := 0; i < jobs; i++ {
			id := fmt.Sprintf("team-%d/job-%04d", i%7, i)
			// Every job's rho changes every round, as a waiting job's does.
			next.Jobs[id] = record("", float64(round*jobs+i)/3)
			rec.Jobs = append(rec.Jobs, loop.JobAudit{ID: id, RhoBefore: 1, RhoAfter: 2,
				Options: []allocator.Terms{{Model: "NVIDIA A100-SXM4-40GB", Cost: float64(i)}, {Model: "Tesla V100-SXM2-16GB", Cost: float64(i) / 3}}})
		}
		if err := s.Record(ctx, prev, next, rec); err != nil {
			t.Fatalf("Record round %d: %v", round, err)
		}
		prev = next
	}
	keys, _, err := c.KV().Keys("test/bounded/v2/jobs/", "", nil)
	if err != nil || len(keys) != JobChunks {
		t.Errorf("job keys %d (%v), want %d chunks", len(keys), err, JobChunks)
	}
	got, err := s.Load(ctx)
	if err != nil || len(got.Jobs) != jobs || !reflect.DeepEqual(got.Jobs["team-3/job-0010"], prev.Jobs["team-3/job-0010"]) {
		t.Fatalf("Load = %d jobs, job-0010 %+v (want %+v), %v", len(got.Jobs), got.Jobs["team-3/job-0010"], prev.Jobs["team-3/job-0010"], err)
	}
	rounds, err := s.RoundNumbers(ctx)
	if err != nil || !slices.Equal(rounds, []int{2, 3, 4}) {
		t.Errorf("audit log holds rounds %v (%v), want the latest 3: [2 3 4]", rounds, err)
	}
	rec, err := s.ReadRound(ctx, 4)
	if err != nil || len(rec.Jobs) != jobs || rec.Jobs[10].RhoAfter != 2 {
		t.Fatalf("ReadRound(4) = %d lines, %v", len(rec.Jobs), err)
	}
	pair, _, _ := c.KV().Get(s.RoundKey(4), nil)
	if pair == nil || pair.Value[0] != 0x1f || len(pair.Value) > maxTxnBytes {
		t.Errorf("round 4's value: %d bytes, gzipped %v; want gzip within %d bytes", len(pair.Value), pair.Value[0] == 0x1f, maxTxnBytes)
	}
}
