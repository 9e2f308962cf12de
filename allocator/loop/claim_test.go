package loop

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
)

// claimStore is a MemStore that claims rounds (Claimer) and logs the order of its calls.
type claimStore struct {
	*MemStore
	calls    []string
	claimErr error
	intents  []*RoundRecord
	claimed  []bool // prev.Claimed as each Record saw it
}

func (c *claimStore) Claim(_ context.Context, prev, next *Ledger, intent *RoundRecord) (uint64, error) {
	c.calls = append(c.calls, "claim")
	if c.claimErr != nil {
		return 0, c.claimErr
	}
	c.intents = append(c.intents, intent)
	return prev.Version, nil
}

func (c *claimStore) Record(ctx context.Context, prev, next *Ledger, rec *RoundRecord) error {
	c.calls = append(c.calls, "record")
	c.claimed = append(c.claimed, prev.Claimed)
	return c.MemStore.Record(ctx, prev, next, rec)
}

// recordingApplier logs its applies into the store's call log.
type recordingApplier struct {
	*Harness
	st *claimStore
}

func (a recordingApplier) Apply(ctx context.Context, p *Plan) ApplyResult {
	a.st.calls = append(a.st.calls, "apply")
	return a.Harness.Apply(ctx, p)
}

// Regression (chaos suite): a round applied its decision before anything of it was in the
// store, so a leader killed between apply and record left no record of the round that started
// a job, and the next leader applied the same round number again. With a Claimer the round is
// claimed first, a failed claim applies nothing, and Record replaces the claimed intent.
func TestClaimBeforeApply(t *testing.T) {
	fc := &Harness{Models: []allocator.Model{{Name: a100, GPUs: 1}},
		Jobs: map[string]*Job{"default/a": Ptr(NewJob("a").TP(a100, 1).Obj())}}
	st := &claimStore{MemStore: NewMemStore(true)}
	l := New(fc, recordingApplier{fc, st}, st)
	ctx := context.Background()

	st.claimErr = errors.New("consul: connection refused")
	if _, err := l.RunRound(ctx, TriggerManual, nil); !errors.Is(err, st.claimErr) {
		t.Fatalf("round with a failing claim: err = %v, want the claim's error", err)
	}
	if len(fc.Applied) != 0 || len(st.calls) != 1 {
		t.Fatalf("a round whose claim failed went on: calls %v, applied %v", st.calls, fc.Applied)
	}

	st.claimErr, st.calls = nil, nil
	rec, err := l.RunRound(ctx, TriggerManual, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"claim", "apply", "record"}; !slices.Equal(st.calls, want) {
		t.Errorf("calls %v, want %v", st.calls, want)
	}
	if len(st.intents) != 1 || st.intents[0].State != RoundApplying || st.intents[0].Assignment["default/a"] != a100 || st.intents[0].Round != 0 {
		t.Errorf("intent %+v: want round 0 applying, with the assignment", st.intents)
	}
	if rec.State != "" || len(st.claimed) != 1 || !st.claimed[0] {
		t.Errorf("record state %q, Record saw Claimed %v: want a full record over the claim", rec.State, st.claimed)
	}
	if len(fc.Applied) != 1 {
		t.Errorf("applied %v, want the start of a", fc.Applied)
	}
}
