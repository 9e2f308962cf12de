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
	}{{"ml/a", loop.Override{Action: "drop"}}, {"nons", pin}, {"a/b/c", pin}} {
		if err := s.SetOverride(ctx, bad.id, bad.o); err == nil {
			t.Errorf("SetOverride(%q, %+v) accepted", bad.id, bad.o)
		}
	}
	// A value written by hand that does not decode fails the read, naming the key: the round
	// then fails rather than start a job an operator meant to hold.
	if _, err := c.KV().Put(&api.KVPair{Key: s.OverrideKey("ml/c"), Value: []byte("park")}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Overrides(ctx); err == nil || !strings.Contains(err.Error(), "overrides/ml/c") {
		t.Errorf("bad value read as %v", err)
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
