package task

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseMarker(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    marker
		wantErr string
	}{
		{in: `{"step": 400, "bytes": 2500000}`, want: marker{Step: 400, Bytes: 2500000}},
		{in: " {\"step\": 1, \"bytes\": 0, \"path\": \"model.pt\"}\n", want: marker{Step: 1}},
		{in: `{"step": -1, "bytes": 3}`, wantErr: "step = -1"},
		{in: `{"step": 1, "bytes": -3}`, wantErr: "bytes = -3"},
		{in: `{"step": "1"}`, wantErr: `want JSON {"step": N, "bytes": B}`},
		{in: ``, wantErr: "unexpected end"},
	} {
		got, err := parseMarker([]byte(tc.in))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseMarker(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseMarker(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// FuzzParseMarker: the task writes the marker; whatever is accepted is finite and >= 0.
func FuzzParseMarker(f *testing.F) {
	for _, s := range []string{`{"step": 1, "bytes": 2}`, `{"step": 1e400}`, `[]`, `{"bytes": -0}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		m, err := parseMarker([]byte(in))
		if err != nil {
			return
		}
		for _, v := range []float64{m.Step, m.Bytes} {
			if !(v >= 0) || math.IsInf(v, 0) {
				t.Fatalf("parseMarker(%q) accepted %+v", in, m)
			}
		}
	})
}

func TestEventMessages(t *testing.T) {
	msg, ann := checkpointEvent(checkpointRecord{Step: 400, SizeBytes: 3.2e9, Seconds: 41.004}, "stop")
	if msg != "Checkpoint saved: 3.2 GB in 41s at step 400" || ann["checkpoint_bytes"] != "3200000000" || ann["checkpoint_seconds"] != "41.004" {
		t.Errorf("checkpointEvent = %q %v", msg, ann)
	}
	msg, ann = noCheckpointEvent(20*time.Second, "stop")
	if msg != "No checkpoint written within 20s" || ann["budget_seconds"] != "20.000" {
		t.Errorf("noCheckpointEvent = %q %v", msg, ann)
	}
	for b, want := range map[float64]string{0: "0 B", 999: "999 B", 1000: "1.0 kB", 65536: "65.5 kB", 2.5e6: "2.5 MB"} {
		if got := formatBytes(b); got != want {
			t.Errorf("formatBytes(%g) = %q, want %q", b, got, want)
		}
	}
}
