package consulstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// TestLargeRoundRecordAgainstConsul: a round record beyond what Consul takes
// in one value or one transaction (512 KiB) is recorded in parts and read
// back whole, by ReadRound and ReadRounds; small records stay one value.
func TestLargeRoundRecordAgainstConsul(t *testing.T) {
	c := startConsul(t)
	ctx := context.Background()
	s := New(c, "test/parts/v1")
	recordRounds(t, s, 1) // round 0: a small record
	prev, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec := &loop.RoundRecord{Round: 1, InputsDigest: "big"}
	for i := 0; i < 4000; i++ {
		rec.Jobs = append(rec.Jobs, loop.JobAudit{ID: fmt.Sprintf("default/job-%04d-%s", i, strings.Repeat("x", 100)), Model: "A100", RhoAfter: float64(i)})
	}
	size, _ := json.Marshal(rec)
	if len(size) < 1<<20 {
		t.Fatalf("the test record is only %d bytes; it should exceed Consul's limits", len(size))
	}
	next := &loop.Ledger{Round: 2, Jobs: prev.Jobs}
	if err := s.Record(ctx, prev, next, rec); err != nil {
		t.Fatalf("recording a %d-byte round record: %v", len(size), err)
	}
	back, err := s.ReadRound(ctx, 1)
	if err != nil || back.InputsDigest != "big" || len(back.Jobs) != 4000 || back.Jobs[3999].RhoAfter != 3999 {
		t.Fatalf("ReadRound(1) = %d jobs, %v", len(back.Jobs), err)
	}
	all, err := s.ReadRounds(ctx, 0)
	if err != nil || len(all) != 2 || len(all[1].Jobs) != 4000 || all[0].InputsDigest != "digest-0" {
		t.Fatalf("ReadRounds = %d records, %v", len(all), err)
	}
	if rounds, err := s.RoundNumbers(ctx); err != nil || len(rounds) != 2 {
		t.Fatalf("RoundNumbers = %v, %v: the parts must not read as rounds", rounds, err)
	}
	// A part that went missing is an error naming it, not a wrong record.
	keys, _, err := c.KV().Keys(s.prefix+dirRoundParts, "", nil)
	if err != nil || len(keys) < 4 {
		t.Fatalf("part keys %v, %v; want at least 4 parts of %d bytes", keys, err, maxRecordValue)
	}
	if _, err := c.KV().Delete(keys[1], nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadRound(ctx, 1); err == nil || !strings.Contains(err.Error(), "is missing") {
		t.Fatalf("ReadRound with a part missing: %v, want an error naming the part", err)
	}
}
