package consulstore

import (
	"context"
	"errors"
	"testing"

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
