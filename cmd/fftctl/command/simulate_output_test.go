package command

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nomad-fft/nomad-fft/allocator/policy"
	"github.com/nomad-fft/nomad-fft/allocator/sim/metrics"
)

// summary is a run's summary with the fields the tables print.
func summary(jctH, ftf float64, finished, preempt, unfinished int) metrics.Summary {
	return metrics.Summary{
		JCT:        metrics.Stat{Mean: jctH * 3600, P50: jctH * 1800, P99: jctH * 7200, Max: jctH * 9000},
		Starvation: metrics.Stat{Mean: 360},
		FTF:        metrics.FairnessStat{Mean: ftf, Max: 2 * ftf, Unfair: 0.5},
		Finished:   finished, Preemptions: preempt, Switches: 2 * preempt, Unfinished: unfinished,
	}
}

func TestWriteTable(t *testing.T) {
	rows := []tableRow{
		{Policy: "fft", Rate: 1, Seeds: []uint64{0, 1}, Runs: []metrics.Summary{summary(10, 1, 100, 50, 0), summary(20, 1, 100, 150, 0)}},
		{Policy: "fft-long-variant", Rate: 1, Seeds: []uint64{0, 1}, Runs: []metrics.Summary{summary(30, 2, 90, 0, 10), summary(30, 2, 90, 0, 10)}},
		{Policy: "fifo", Rate: 2, Seeds: []uint64{0}, Runs: []metrics.Summary{summary(5, 0.5, 10, 10, 0)}},
	}
	var b bytes.Buffer
	writeTable(&b, rows)
	lines := strings.Split(b.String(), "\n")
	fields := func(prefix string) []string {
		for _, l := range lines {
			if f := strings.Fields(l); len(f) > 0 && f[0] == prefix {
				return f
			}
		}
		t.Fatalf("no line for %q:\n%s", prefix, b.String())
		return nil
	}
	for _, tc := range []struct {
		row  string
		want []string
	}{
		// JCT 15 h mean over seeds, p99 30 h, FTF 1, max 2, unfair 0.5,
		// starvation 0.1 h, 1 preemption and 2 switches per job, ratios 1.
		{"fft", []string{"fft", "15.0", "30.0", "1.000", "2.000", "0.500", "0.100", "1.000", "2.000", "1.000", "1.000"}},
		{"fft-long-variant", []string{"fft-long-variant", "30.0", "60.0", "2.000", "4.000", "0.500", "0.100", "0.000", "0.000", "2.000", "2.000"}},
		// A new rate is a new block: fifo is its own first row.
		{"fifo", []string{"fifo", "5.000", "10.0", "0.500", "1.000", "0.500", "0.100", "1.000", "2.000", "1.000", "1.000"}},
	} {
		if d := cmp.Diff(tc.want, fields(tc.row)); d != "" {
			t.Errorf("row %s (-want,+got):\n%s", tc.row, d)
		}
	}
	for _, want := range []string{"Rate 1 jobs/hour, seeds 0,1:", "Rate 2 jobs/hour, seeds 0:",
		"note: fft-long-variant: 10.0 measured jobs unfinished, 0.000 rejected"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "note: fft:") {
		t.Errorf("note for a policy that finished every job:\n%s", b.String())
	}
	for _, l := range lines {
		if len(l) > 100 {
			t.Errorf("line over 100 columns: %q", l)
		}
	}
	b.Reset()
	writeWideTable(&b, rows)
	if header := strings.Split(b.String(), "\n")[0]; !strings.Contains(header, "makespan h") || !strings.Contains(header, "FTFmax/first") {
		t.Errorf("wide header %q lacks columns", header)
	}
}

func TestPerJobWithoutFinishedJobs(t *testing.T) {
	if v := perJob(preemptions)(&metrics.Summary{Preemptions: 3}); !math.IsNaN(v) {
		t.Errorf("preemptions per job with none finished = %v, want NaN", v)
	}
}

// Every series of a plot with as many lines as the registry has policies
// gets its own colour and dash pattern.
func TestLineStylesDistinct(t *testing.T) {
	seen := map[string]int{}
	for k := range len(policy.Names()) + 4 {
		c, d := lineStyle(k)
		key := fmt.Sprint(c, d)
		if prev, ok := seen[key]; ok {
			t.Errorf("series %d has the style of series %d: %s", k, prev, key)
		}
		seen[key] = k
	}
}
