package devices

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const testUUID = "GPU-6c0f5d4e-2b0a-4e57-9a55-6e6f6d616466"

func TestParseFakeHealth(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
		err      string
	}{
		{"empty", "", nil, ""},
		{"comments and blanks", "# none\n\n   \n", nil, ""},
		{"one", testUUID + "\n", []string{testUUID}, ""},
		{"spaces and duplicates", "  " + testUUID + " \n" + testUUID, []string{testUUID}, ""},
		{"no prefix", "6c0f5d4e-2b0a-4e57-9a55-6e6f6d616466", nil, `line 1: "6c0f5d4e`},
		{"not a uuid", "# x\nGPU-0", nil, `line 2: "GPU-0" is not a GPU UUID`},
		{"index", "0", nil, "line 1"},
		{"braces", "GPU-{6c0f5d4e-2b0a-4e57-9a55-6e6f6d616466}", nil, "line 1"},
		{"too large", strings.Repeat("#", maxFakeHealthBytes+1), nil, "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseFakeHealth(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for _, id := range tc.want {
				if !got[id] {
					t.Errorf("%s missing from %v", id, got)
				}
			}
		})
	}
}

// FuzzParseFakeHealth: no input panics, and every UUID accepted is "GPU-" and 36 characters.
func FuzzParseFakeHealth(f *testing.F) {
	for _, s := range []string{"", "# c\n" + testUUID, "GPU-", "GPU-x\n", testUUID + "\r\n" + testUUID} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseFakeHealth(s)
		if err != nil {
			return
		}
		for id := range got {
			if !strings.HasPrefix(id, "GPU-") || len(id) != 40 {
				t.Errorf("accepted %q", id)
			}
		}
	})
}

// The health file flips a fake GPU unhealthy through the NVML event path (an XID names it in
// the health description), and back when the file no longer lists it; a bad file changes
// nothing.
func TestFakeHealthFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "unhealthy")
	src, _, err := NewFakeSourceWithHealthFile([]FakeGPU{{Model: "NVIDIA A100-SXM4-40GB", Count: 2}}, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx := context.Background()
	gpus, err := src.GPUs(ctx) // registers the health events
	if err != nil || len(gpus) != 2 {
		t.Fatalf("GPUs: %v, %v", gpus, err)
	}
	bad := gpus[1].UUID
	health := func() map[string]Health {
		gs, err := src.GPUs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]Health{}
		for _, g := range gs {
			out[g.UUID] = g.Health
		}
		return out
	}
	wait := func(why string, ok func(map[string]Health) bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !ok(health()); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: health %v", why, health())
			}
		}
	}
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	write("# flip one\n" + bad + "\n")
	wait("the listed GPU turns unhealthy", func(h map[string]Health) bool {
		return !h[bad].Healthy && strings.Contains(h[bad].Description, "XID 79") && h[gpus[0].UUID].Healthy
	})
	select {
	case <-src.(Notifier).Changes():
	default:
		t.Error("no change announced")
	}
	write("not a uuid\n")
	time.Sleep(3 * FakeHealthPoll)
	if h := health(); h[bad].Healthy {
		t.Errorf("a bad file recovered the GPU: %v", h)
	}
	write("GPU-00000000-0000-0000-0000-000000000000\n")
	time.Sleep(3 * FakeHealthPoll)
	if h := health(); h[bad].Healthy {
		t.Errorf("a file naming an unknown GPU recovered the GPU: %v", h)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	wait("the GPU recovers once unlisted", func(h map[string]Health) bool { return h[bad].Healthy && h[bad].Known })
}
