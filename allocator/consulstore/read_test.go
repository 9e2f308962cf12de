package consulstore

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// recordRounds records the ledger's next n rounds through Record, as the
// allocator does, each with a digest that names its round.
func recordRounds(t *testing.T, s *Store, n int) {
	t.Helper()
	ctx := context.Background()
	for k := 0; k < n; k++ {
		prev, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r := prev.Round
		next := &loop.Ledger{Round: r + 1, Jobs: map[string]loop.JobRecord{"default/a": record("", float64(r))}}
		if err := s.Record(ctx, prev, next, &loop.RoundRecord{Round: r, InputsDigest: fmt.Sprintf("digest-%d", r)}); err != nil {
			t.Fatalf("recording round %d: %v", r, err)
		}
	}
}

func TestReadHelpersAgainstConsul(t *testing.T) {
	c := startConsul(t)
	ctx := context.Background()
	s := New(c, "test/read/v1")

	// An empty store: no rounds, next round 0.
	if rounds, err := s.RoundNumbers(ctx); err != nil || len(rounds) != 0 {
		t.Fatalf("RoundNumbers of an empty store = %v, %v", rounds, err)
	}
	next, idx, err := s.NextRound(ctx, 0)
	if err != nil || next != 0 || idx == 0 {
		t.Fatalf("NextRound of an empty store = %d, index %d, %v; want 0 and an index", next, idx, err)
	}

	// Twelve rounds: numbers sort as numbers, not as the 12-digit keys' text alone.
	recordRounds(t, s, 12)
	rounds, err := s.RoundNumbers(ctx)
	if want := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}; err != nil || !reflect.DeepEqual(rounds, want) {
		t.Fatalf("RoundNumbers = %v, %v; want %v", rounds, err, want)
	}
	for _, tc := range []struct {
		from int
		want []string
	}{
		{0, []string{"digest-0", "digest-1", "digest-2", "digest-3", "digest-4", "digest-5", "digest-6", "digest-7", "digest-8", "digest-9", "digest-10", "digest-11"}},
		{9, []string{"digest-9", "digest-10", "digest-11"}},
		{12, nil},
	} {
		recs, err := s.ReadRounds(ctx, tc.from)
		var got []string
		for k, r := range recs {
			if k > 0 && r.Round != recs[k-1].Round+1 {
				t.Errorf("ReadRounds(%d): round %d follows %d", tc.from, r.Round, recs[k-1].Round)
			}
			got = append(got, r.InputsDigest)
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ReadRounds(%d) = %v, %v; want %v", tc.from, got, err, tc.want)
		}
	}

	// NextRound follows the ledger, and a blocking query returns when a round is recorded.
	next, idx, err = s.NextRound(ctx, 0)
	if err != nil || next != 12 {
		t.Fatalf("NextRound = %d, %v; want 12", next, err)
	}
	type result struct {
		next int
		err  error
	}
	woke := make(chan result, 1)
	go func() {
		n, _, err := s.NextRound(ctx, idx)
		woke <- result{n, err}
	}()
	select {
	case r := <-woke:
		t.Fatalf("the blocking NextRound returned before any change: %+v", r)
	case <-time.After(500 * time.Millisecond):
	}
	recordRounds(t, s, 1) // records round 12, the ledger's next
	select {
	case r := <-woke:
		if r.err != nil || r.next != 13 {
			t.Errorf("the blocking NextRound woke with %+v, want round 13", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the blocking NextRound did not wake when round 12 was recorded")
	}
	// Ending the context ends a blocking query.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, _, err := s.NextRound(cctx, idx+1000); err == nil {
		t.Error("NextRound ignored its context's end")
	}

	// A stray key under rounds/ is named, not skipped silently.
	if _, err := c.KV().Put(&api.KVPair{Key: "test/read/v1/rounds/notes", Value: []byte("x")}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RoundNumbers(ctx); err == nil || !strings.Contains(err.Error(), "test/read/v1/rounds/notes") {
		t.Errorf("RoundNumbers with a stray key: %v", err)
	}
	if _, err := s.ReadRounds(ctx, 0); err == nil || !strings.Contains(err.Error(), "rounds/notes") {
		t.Errorf("ReadRounds with a stray key: %v", err)
	}
}
