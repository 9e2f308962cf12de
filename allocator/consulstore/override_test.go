package consulstore

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

func TestOverridesAgainstConsul(t *testing.T) {
	c := startConsul(t)
	ctx := context.Background()
	s := New(c, "test/override/v1")
	if o, err := s.Overrides(ctx); err != nil || len(o) != 0 {
		t.Fatalf("empty store: %v, %v", o, err)
	}
	pin := loop.Override{Action: loop.OverridePin, Model: "V100", By: "ops"}
	if err := s.SetOverride(ctx, "ml/a", pin); err != nil {
		t.Fatal(err)
	}
	if err := s.SetOverride(ctx, "ml/b", loop.Override{Action: loop.OverridePark}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Overrides(ctx)
	if err != nil || len(got) != 2 || got["ml/a"].Model != "V100" || got["ml/b"].Action != loop.OverridePark {
		t.Fatalf("overrides %+v, %v", got, err)
	}
	for _, bad := range []struct {
		id string
		o  loop.Override
	}{{"ml/a", loop.Override{Action: "drop"}}, {"nons", pin}, {"a/..", pin}, {"a b/c", pin}} {
		if err := s.SetOverride(ctx, bad.id, bad.o); err == nil {
			t.Errorf("SetOverride(%q, %+v) accepted", bad.id, bad.o)
		}
	}
	// A value written by hand that does not decode holds its job (a park), and does not fail
	// the read: the other overrides still apply and the round runs.
	if _, err := c.KV().Put(&api.KVPair{Key: s.OverrideKey("ml/c"), Value: []byte("park")}, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Overrides(ctx); err != nil || got["ml/c"].Action != loop.OverridePark || got["ml/c"].By != unreadableBy || got["ml/a"].Model != "V100" {
		t.Errorf("with a bad value: %+v, %v; want ml/c held and ml/a pinned", got, err)
	}
	for _, id := range []string{"ml/a", "ml/c", "ml/none"} {
		if err := s.LiftOverride(ctx, id); err != nil {
			t.Fatalf("lift %s: %v", id, err)
		}
	}
	if got, err := s.Overrides(ctx); err != nil || len(got) != 1 {
		t.Errorf("after lifting: %+v, %v", got, err)
	}
}

// TestDecodeOverrides: one bad entry never stops the round. A key that names no job is
// skipped; a value that does not decode or validate holds its job, with the error as the
// audit note; the good ones apply.
func TestDecodeOverrides(t *testing.T) {
	const dir = "p/overrides/"
	pin := `{"action": "pin", "model": "V100", "by": "ops"}`
	got, problems := decodeOverrides(dir, api.KVPairs{
		{Key: dir + "ml/a", Value: []byte(pin)},
		{Key: dir + "ml/bad-json", Value: []byte("park")},
		{Key: dir + "ml/bad-action", Value: []byte(`{"action": "drop"}`)},
		{Key: dir + "ml/long-note", Value: []byte(`{"action": "park", "note": "` + strings.Repeat("x", loop.MaxOverrideNote+1) + `"}`)},
		{Key: dir + "nons", Value: []byte(pin)},
		{Key: dir + "ml/a/b", Value: []byte(pin)},
		{Key: dir + "ml/..", Value: []byte(pin)},
	})
	if len(got) != 4 || got["ml/a"].Action != loop.OverridePin {
		t.Fatalf("overrides %+v: want ml/a pinned and three held", got)
	}
	for _, id := range []string{"ml/bad-json", "ml/bad-action", "ml/long-note"} {
		if o := got[id]; o.Action != loop.OverridePark || o.By != unreadableBy || o.Note == "" || len(o.Note) > loop.MaxOverrideNote {
			t.Errorf("%s: %+v, want held with the error as its note", id, o)
		}
	}
	var skipped []string
	for _, p := range problems {
		if strings.HasPrefix(p.what, "skipped") {
			skipped = append(skipped, strings.TrimPrefix(p.key, dir))
		}
		if p.err == nil || !strings.HasPrefix(p.key, dir) {
			t.Errorf("problem %+v names no key or error", p)
		}
	}
	if strings.Join(skipped, ",") != "nons,ml/a/b,ml/.." || len(problems) != 6 {
		t.Errorf("skipped %v of %d problems, want nons, ml/a/b, ml/.. of 6", skipped, len(problems))
	}
}
