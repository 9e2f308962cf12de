package jobid

import (
	"strings"
	"testing"
)

func TestKey(t *testing.T) {
	for _, tc := range []struct{ id, key string }{
		{"default/train", "default/train"},
		{"default/train.v2", "default/train.v2"},
		{"default/parent/dispatch-1700000000-abcd1234", "default/parent%2Fdispatch-1700000000-abcd1234"},
		{"team-x/nightly/periodic-1700000000", "team-x/nightly%2Fperiodic-1700000000"},
		{"default/odd%2Fname", "default/odd%252Fname"},
		{"default/../ledger", "default/..%2Fledger"},
	} {
		key, err := Key(tc.id)
		if err != nil || key != tc.key {
			t.Errorf("Key(%q) = %q, %v; want %q", tc.id, key, err, tc.key)
			continue
		}
		if id, err := FromKey(key); err != nil || id != tc.id {
			t.Errorf("FromKey(%q) = %q, %v; want %q", key, id, err, tc.id)
		}
	}
	for _, key := range []string{"default/a/b", "default/..", "default", "de_fault/a", "default/a%2f", "default/%2E%2E", "default/x%2"} {
		if id, err := FromKey(key); err == nil {
			t.Errorf("FromKey(%q) = %q, want an error", key, id)
		}
	}
}

// FuzzKey: every ID Split takes has a key that is one namespace step and one job step, never
// a path step, and that FromKey turns back into the ID; every key FromKey takes is the Key of
// what it returns.
func FuzzKey(f *testing.F) {
	for _, s := range []string{"default/train", "default/parent/dispatch-1700000000-abcd1234", "ns/a%2Fb", "ns/%", "ns/..", "ns/../x", "ns/a//b", "ns/%25%2F", "ns/%2E%2E"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if _, _, err := Split(s); err == nil {
			key, err := Key(s)
			if err != nil {
				t.Fatalf("Key(%q): %v", s, err)
			}
			ns, step, _ := strings.Cut(key, "/")
			if strings.Contains(step, "/") || step == "" || step == "." || step == ".." || ns == "" {
				t.Fatalf("Key(%q) = %q: not one namespace step and one job step", s, key)
			}
			if back, err := FromKey(key); err != nil || back != s {
				t.Fatalf("FromKey(Key(%q)) = %q, %v", s, back, err)
			}
		}
		// s as a key read from Consul.
		if id, err := FromKey(s); err == nil {
			if key, err := Key(id); err != nil || key != s {
				t.Fatalf("Key(FromKey(%q)) = %q, %v", s, key, err)
			}
		}
	})
}
