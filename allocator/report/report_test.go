package report

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       Report
		wantErr    string
	}{
		{name: "plain number", body: " 42\n", want: Report{Done: 42}},
		{name: "done only", body: `{"done": 0}`, want: Report{Done: 0}},
		{name: "full", body: `{"done": 120, "throughput_per_second": 2.5, "gpu_model": "Tesla V100-SXM2-16GB", "gpus": 2,
			"restart_seconds": 31.5, "checkpoint_bytes": 1048576, "checkpoint_seconds": 4}`,
			want: Report{Done: 120, ThroughputPerSecond: Float(2.5), GPUModel: "Tesla V100-SXM2-16GB", GPUs: 2,
				RestartSeconds: Float(31.5), CheckpointBytes: Float(1048576), CheckpointSeconds: Float(4)}},
		{name: "empty", body: "  ", wantErr: "empty body: the body is the work units done"},
		{name: "text", body: "ten", wantErr: `body "ten" is not a number`},
		{name: "negative done", body: "-1", wantErr: "done = -1 is not a finite number >= 0"},
		{name: "NaN", body: "NaN", wantErr: "done = NaN"},
		{name: "infinite", body: "+Inf", wantErr: "done = +Inf"},
		{name: "unknown field", body: `{"done": 1, "dnoe": 3}`, wantErr: `unknown field "dnoe"`},
		{name: "no done", body: `{"gpus": 1}`, wantErr: `has no field "done"`},
		{name: "negative rate", body: `{"done": 1, "throughput_per_second": -2}`, wantErr: "throughput_per_second = -2"},
		{name: "negative restart", body: `{"done": 1, "restart_seconds": -0.5}`, wantErr: "restart_seconds = -0.5"},
		{name: "negative checkpoint size", body: `{"done": 1, "checkpoint_bytes": -1}`, wantErr: "checkpoint_bytes = -1"},
		{name: "negative checkpoint time", body: `{"done": 1, "checkpoint_seconds": -3}`, wantErr: "checkpoint_seconds = -3"},
		{name: "fractional gpus", body: `{"done": 1, "gpus": 1.5}`, wantErr: "gpus = 1.5 is not a whole number"},
		{name: "string done", body: `{"done": "3"}`, wantErr: "is not a JSON progress report"},
		{name: "two objects", body: `{"done": 1} {"done": 2}`, wantErr: "text after the object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.body))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse(%q) error = %v, want one containing %q", tc.body, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.body, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse(%q) (-want,+got):\n%s", tc.body, diff)
			}
		})
	}
}

// FuzzParse: whatever Parse accepts is valid and survives a JSON round trip unchanged.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"42", `{"done": 1, "gpus": 2, "gpu_model": "x", "restart_seconds": 3}`, `{"done": -1}`, "{", "1e400"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		r, err := Parse([]byte(body))
		if err != nil {
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("Parse(%q) accepted an invalid report: %v", body, err)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("marshal %#v: %v", r, err)
		}
		back, err := Parse(b)
		if err != nil {
			t.Fatalf("Parse(%s) of a marshalled accepted report: %v", b, err)
		}
		if diff := cmp.Diff(r, back); diff != "" {
			t.Errorf("round trip of %q (-first,+second):\n%s", body, diff)
		}
	})
}
