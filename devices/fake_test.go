package devices

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
)

func TestNewFakeRejects(t *testing.T) {
	cases := []struct {
		name string
		spec []FakeGPU
		want string
	}{
		{"empty model", []FakeGPU{{Model: " ", Count: 1, MemoryMiB: 1}}, "model must not be empty"},
		{"zero count", []FakeGPU{{Model: "X", Count: 0, MemoryMiB: 1}}, "count must be at least 1, got 0"},
		{"unknown model without memory", []FakeGPU{{Model: "Tesla T4", Count: 1}}, `memory_mib must be set for model "Tesla T4"`},
		{"bad compute capability", []FakeGPU{{Model: "Tesla T4", Count: 1, MemoryMiB: 15360, ComputeCapability: "7"}}, `compute capability "7" is not of the form`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewFake(tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewFake error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestFakeSourcePresentsModels(t *testing.T) {
	spec := []FakeGPU{
		{Model: "Tesla V100-SXM2-16GB", Count: 2, MemoryMiB: 16384, ComputeCapability: "7.0"},
		{Model: "NVIDIA A100-SXM4-40GB", Count: 1},
		{Model: "Tesla T4", Count: 1, MemoryMiB: 15360},
	}
	s, _, err := NewFakeSource(spec, nil)
	if err != nil {
		t.Fatalf("NewFakeSource: %v", err)
	}
	defer s.Close()
	got, err := s.GPUs(context.Background())
	if err != nil {
		t.Fatalf("GPUs: %v", err)
	}
	type summary struct {
		Model, CC string
		MemoryMiB uint64
		MIG       MIGMode
	}
	count := map[summary]int{}
	for _, g := range got {
		count[summary{g.Model, g.ComputeCapability, g.MemoryMiB, g.MIG}]++
		if g.DriverVersion != FakeDriverVersion || !strings.HasPrefix(g.UUID, "GPU-") || g.PCIBusID == "" {
			t.Errorf("fake GPU lacks facts: %+v", g)
		}
	}
	want := map[summary]int{
		{"Tesla V100-SXM2-16GB", "7.0", 16384, MIGUnsupported}: 2,
		{"NVIDIA A100-SXM4-40GB", "8.0", 40960, MIGDisabled}:   1,
		{"Tesla T4", "", 15360, MIGUnsupported}:                1,
	}
	if diff := cmp.Diff(want, count); diff != "" {
		t.Errorf("models (-want,+got):\n%s", diff)
	}
}

func TestFakeUUIDsAreStable(t *testing.T) {
	spec := []FakeGPU{{Model: "Tesla V100-SXM2-16GB", Count: 3, MemoryMiB: 16384}}
	uuids := fakeUUIDs(t, spec)
	first, second := uuids(), uuids()
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("UUIDs changed between two fakes (-first,+second):\n%s", diff)
	}
	if len(first) != 3 || first[0] == first[1] {
		t.Errorf("want 3 distinct UUIDs, got %v", first)
	}
}

// Fakes seeded differently (two hosts of one model) share no UUID; a seed gives the same UUIDs
// every time; no seed gives the UUIDs of model and position alone.
func TestFakeUUIDSeeds(t *testing.T) {
	seeded := func(seed string) []string {
		return fakeUUIDs(t, []FakeGPU{{Model: "NVIDIA A100-SXM4-40GB", Count: 2, UUIDSeed: seed}})()
	}
	hostA, hostB, none := seeded("fft-e2e-a100-1"), seeded("fft-e2e-a100-2"), seeded("")
	for _, u := range hostA {
		if slices.Contains(hostB, u) || slices.Contains(none, u) {
			t.Errorf("UUID %s is on two fakes seeded differently: %v, %v, %v", u, hostA, hostB, none)
		}
	}
	if again := seeded("fft-e2e-a100-1"); !slices.Equal(again, hostA) {
		t.Errorf("the same seed gave %v, then %v", hostA, again)
	}
	// The unseeded derivation, unchanged since the first release: dev clusters and tests that
	// named these UUIDs still find them.
	if want := "GPU-" + uuid.NewSHA1(fakeUUIDSpace, []byte("NVIDIA A100-SXM4-40GB/1")).String(); !slices.Contains(none, want) {
		t.Errorf("unseeded UUIDs %v lack %s", none, want)
	}
}

// fakeUUIDs returns a function that builds a fake of spec and lists its GPUs' UUIDs.
func fakeUUIDs(t *testing.T, spec []FakeGPU) func() []string {
	return func() []string {
		s, _, err := NewFakeSource(spec, nil)
		if err != nil {
			t.Fatalf("NewFakeSource: %v", err)
		}
		defer s.Close()
		got, err := s.GPUs(context.Background())
		if err != nil {
			t.Fatalf("GPUs: %v", err)
		}
		var out []string
		for _, g := range got {
			out = append(out, g.UUID)
		}
		return out
	}
}

func TestFakeInjectEventUnknownGPU(t *testing.T) {
	f, err := NewFake([]FakeGPU{{Model: "X", Count: 1, MemoryMiB: 1}})
	if err != nil {
		t.Fatalf("NewFake: %v", err)
	}
	if err := f.InjectEvent("GPU-nope", 8, 79); err == nil || !strings.Contains(err.Error(), `"GPU-nope"`) {
		t.Errorf("InjectEvent error = %v, want one naming the UUID", err)
	}
}

func TestParseComputeCapability(t *testing.T) {
	cases := []struct {
		in           string
		major, minor int
		ok           bool
	}{
		{"8.0", 8, 0, true}, {"10.0", 10, 0, true}, {"7.5", 7, 5, true},
		{"8", 0, 0, false}, {"a.b", 0, 0, false}, {"0.1", 0, 0, false}, {"8.-1", 0, 0, false}, {"", 0, 0, false},
	}
	for _, tc := range cases {
		major, minor, err := ParseComputeCapability(tc.in)
		if (err == nil) != tc.ok || major != tc.major || minor != tc.minor {
			t.Errorf("ParseComputeCapability(%q) = %d, %d, %v; want %d, %d, ok=%v", tc.in, major, minor, err, tc.major, tc.minor, tc.ok)
		}
	}
}
