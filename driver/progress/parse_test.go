package progress

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestParseLine(t *testing.T) {
	for _, tc := range []struct {
		line    string
		want    Point
		wantErr string
	}{
		{line: `{"t": 1700000000.5, "done": 12}`, want: Point{TimeUnix: 1700000000.5, Done: 12}},
		{line: "  {\"done\": 3, \"t\": 9, \"phase\": \"train\", \"loss\": 0.3}\n", want: Point{TimeUnix: 9, Done: 3}},
		{line: `{"t": 1}`, wantErr: `no field "done"`},
		{line: `{"done": 1}`, wantErr: `no field "t"`},
		{line: `{"t": 1, "done": -4}`, wantErr: "done = -4"},
		{line: `{"t": -1, "done": 4}`, wantErr: "t = -1"},
		{line: `{"t": 1, "done": "4"}`, wantErr: "cannot unmarshal string"},
		{line: `{"t": 1, "done": 4} {"t": 2}`, wantErr: "text after the object"},
		{line: `step 40`, wantErr: "invalid character"},
		{line: ``, wantErr: "EOF"},
	} {
		got, err := ParseLine([]byte(tc.line))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseLine(%q) error = %v, want one containing %q", tc.line, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseLine(%q) = %+v, %v; want %+v", tc.line, got, err, tc.want)
		}
	}
}

// FuzzParseLine: an accepted line has finite values >= 0 and reads back the same once
// re-encoded; a refused one says what a line must be.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{`{"t": 1, "done": 2}`, `{"t": 1e308, "done": 0, "x": [1]}`, `{"t": 1, "done": -0}`, `{"t":`, `null`, `{}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		p, err := ParseLine([]byte(line))
		if err != nil {
			if !strings.Contains(err.Error(), LineFormat) {
				t.Fatalf("ParseLine(%q) error %q does not say the format", line, err)
			}
			return
		}
		for _, v := range []float64{p.TimeUnix, p.Done} {
			if !(v >= 0) || math.IsInf(v, 0) {
				t.Fatalf("ParseLine(%q) accepted %+v", line, p)
			}
		}
		b, _ := json.Marshal(p)
		back, err := ParseLine(b)
		if err != nil || back != p {
			t.Fatalf("ParseLine(%s) = %+v, %v; want %+v", b, back, err, p)
		}
	})
}

func TestPattern(t *testing.T) {
	if _, err := CompilePattern(`step (\d+)`); err == nil || !strings.Contains(err.Error(), `no named group "done"`) {
		t.Errorf("a pattern without a done group: %v", err)
	}
	if _, err := CompilePattern(`step (?P<done>\d+`); err == nil || !strings.Contains(err.Error(), "compiling") {
		t.Errorf("a bad regexp: %v", err)
	}
	p, err := CompilePattern(`step (?P<done>[0-9.e+]+)`)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		line string
		want float64
		ok   bool
	}{
		{"epoch 1 step 120 loss 0.3", 120, true},
		{"step 1.5e+2", 150, true},
		{"loss 0.3", 0, false},
		{"step ...", 0, false},
	} {
		if got, ok := p.Match([]byte(tc.line)); got != tc.want || ok != tc.ok {
			t.Errorf("Match(%q) = %g, %v; want %g, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}
