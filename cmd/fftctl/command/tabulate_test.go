package command

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/cli"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/sim"
	"github.com/nomad-fft/nomad-fft/allocator/sim/metrics"
)

// What writeRoundsCSV writes, readRoundsCSV reads back (to the CSV's six
// significant digits).
func TestRoundsCSVRoundTrip(t *testing.T) {
	in := []sim.RoundStats{
		{Round: 0, Start: 0, Active: 4000, Seconds: 300, Trigger: loop.TriggerManual, Wall: 278 * time.Millisecond,
			Solve: 21500 * time.Microsecond, Place: 11800 * time.Microsecond, Status: "optimal", Nodes: 6},
		{Round: 1947, Start: 584100, Active: 562, Seconds: 300, Trigger: loop.TriggerManual, Wall: 1750 * time.Millisecond,
			Solve: 1720 * time.Millisecond, Status: "feasible", Gap: 1.01e-3, Nodes: 13667},
		{Round: 2, Active: 3, Seconds: 360, Trigger: loop.TriggerManual, Solve: 2600 * time.Microsecond},
	}
	var b bytes.Buffer
	if err := writeRoundsCSV(&b, in); err != nil {
		t.Fatal(err)
	}
	got, err := readRoundsCSV(&b)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(in, got); d != "" {
		t.Errorf("round trip (-want,+got):\n%s", d)
	}
	for _, tc := range []struct{ name, csv, err string }{
		{"empty", "", "empty file"},
		{"no solve column", "round,active,status\n0,1,optimal\n", `no "solve_s" column`},
		{"bad number", "round,active,solve_s,status\n0,x,0.1,optimal\n", "line 2: active"},
	} {
		if _, err := readRoundsCSV(strings.NewReader(tc.csv)); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.err)
		}
	}
}

// A -out folder's runs, read back and tabulated: one row per run, a mean ±
// sd row per policy with several, "-" where a policy has no value.
func TestTabulateRuns(t *testing.T) {
	dir := t.TempDir()
	run := func(policy string, seed uint64, restart, gapTol float64, wall time.Duration, jctH, ftf float64, notProven float64, stopped string, rounds []sim.RoundStats) {
		t.Helper()
		s := metrics.Summary{Policy: policy, Measured: 4000, Finished: 4000, Rounds: 4000 + int(seed), Wall: wall, Stopped: stopped,
			JCT: metrics.Stat{Mean: jctH * 3600, P50: jctH * 1800}, FTF: metrics.FairnessStat{Mean: ftf, Max: 2 * ftf, Unfair: ftf / 10},
			Preemptions: 8000, Switches: 2000,
			Solve: metrics.Stat{P50: 0.01, P99: 0.98, Max: 1.72}}
		if notProven >= 0 {
			s.PolicyStats = map[string]float64{"rounds_not_optimal": notProven, "max_gap": 1e-3}
		}
		name := func(prefix, ext string) string {
			return filepath.Join(dir, fmt.Sprintf("%s-%s-r20-s%d-%g-%g%s", prefix, policy, seed, restart, gapTol, ext))
		}
		var b bytes.Buffer
		if err := writeSummaryJSON(&b, 20, seed, restart, gapTol, s); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name("summary", ".json"), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if rounds == nil {
			return
		}
		b.Reset()
		if err := writeRoundsCSV(&b, rounds); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name("rounds", ".csv"), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rounds := []sim.RoundStats{
		{Round: 0, Active: 4000, Solve: 30 * time.Millisecond, Status: "optimal"},
		{Round: 1947, Active: 562, Solve: 1720 * time.Millisecond, Status: "feasible", Gap: 2e-4},
		{Round: 1948, Active: 561, Solve: 1720 * time.Millisecond, Status: "optimal"},
	}
	run("fft-rate-w0.25", 1, 60, 0, 9*time.Minute+29*time.Second, 30, 0.4, 400, "", rounds)
	run("fft-rate-w0.25", 2, 60, 0, 10*time.Minute+31*time.Second, 32, 0.5, 500, "", rounds)
	run("gavel-ftf", 1, 60, 0, 168*time.Second, 50.6, 0.9, -1, "", []sim.RoundStats{{Round: 7, Active: 4006, Solve: 300 * time.Millisecond}})
	run("fft", 0, 60, 0, 30*time.Minute, 45.8, 1, 986, "context canceled", nil)
	// The same policy and seed at another restart cost: its own row, kept
	// out of the 60 s runs' mean.
	run("fft-rate-w0.25", 1, 0, 0, 52*time.Minute, 29.4, 0.4, 2019, "", rounds)
	// The same setting with a gap tolerance: named, kept out of the exact
	// runs' mean, and a round proven within it counts as proven.
	run("fft-rate-w0.25", 2, 60, 1e-4, 3*time.Minute, 32, 0.5, 500, "",
		append(slices.Clone(rounds), sim.RoundStats{Round: 1949, Active: 560, Solve: time.Millisecond, Status: "feasible", Gap: 1e-4}))
	// Exact, a round not proven optimal whose gap rounds to 0 (a stalled
	// LP) is still counted: only a tolerance lets a round stop short.
	run("fft", 1, 120, 0, 52*time.Minute, 29.4, 0.4, 2019, "",
		append(slices.Clone(rounds), sim.RoundStats{Round: 1949, Active: 560, Solve: time.Millisecond, Status: "feasible"}))

	var b bytes.Buffer
	ui := cli.NewMockUi()
	if code := (&TabulateCommand{Meta: Meta{Ui: ui, Stdout: &b}}).Run([]string{dir}); code != 0 {
		t.Fatalf("tabulate %s: exit %d: %s", dir, code, ui.ErrorWriter.String())
	}
	rows := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		cells := strings.Split(strings.TrimSuffix(strings.TrimPrefix(l, "| "), " |"), " | ")
		rows[cells[0]+" "+cells[1]+" "+cells[2]] = cells[3:]
	}
	for _, tc := range []struct {
		row  string
		want []string
	}{
		// wall, rounds, finished, JCT h mean and p50, FTF mean and max,
		// unfair, preemptions and switches per job, solve p50/p99/max, not
		// proven and max gap over the rounds file (the summary's 400 and
		// 1e-3 are the policy's), slowest round (the first of equals).
		{"fft-rate-w0.25 1 60 s", []string{"9 min 29 s", "4,001", "4,000", "30.0", "15.0", "0.400", "0.80", "4.0%", "2.00", "0.50", "10.0 ms", "980.0 ms", "1.72 s", "1", "2.0e-04", "1947 (562): 1.72 s, feasible"}},
		{"fft-rate-w0.25 2 60 s", []string{"10 min 31 s", "4,002", "4,000", "32.0", "16.0", "0.500", "1.00", "5.0%", "2.00", "0.50", "10.0 ms", "980.0 ms", "1.72 s", "1", "2.0e-04", "1947 (562): 1.72 s, feasible"}},
		{"fft-rate-w0.25 (gap tolerance 0.0001) 2 60 s", []string{"3 min 0 s", "4,002", "4,000", "32.0", "16.0", "0.500", "1.00", "5.0%", "2.00", "0.50", "10.0 ms", "980.0 ms", "1.72 s", "1", "2.0e-04", "1947 (562): 1.72 s, feasible"}},
		{"fft-rate-w0.25 1 0 s", []string{"52 min 0 s", "4,001", "4,000", "29.4", "14.7", "0.400", "0.80", "4.0%", "2.00", "0.50", "10.0 ms", "980.0 ms", "1.72 s", "1", "2.0e-04", "1947 (562): 1.72 s, feasible"}},
		{"fft 1 120 s", []string{"52 min 0 s", "4,001", "4,000", "29.4", "14.7", "0.400", "0.80", "4.0%", "2.00", "0.50", "10.0 ms", "980.0 ms", "1.72 s", "2", "2.0e-04", "1947 (562): 1.72 s, feasible"}},
		// No search: nothing to prove, and no status shown.
		{"gavel-ftf 1 60 s", []string{"2 min 48 s", "4,001", "4,000", "50.6", "25.3", "0.900", "1.80", "9.0%", "2.00", "0.50", "10.0 ms", "980.0 ms", "1.72 s", "-", "-", "7 (4,006): 300.0 ms"}},
		// Stopped by Ctrl-C, and no rounds file: the policy's counts.
		{"fft 0 60 s", []string{"30 min 0 s (stopped by hand)", "4,000", "4,000", "45.8", "22.9", "1.000", "2.00", "10.0%", "2.00", "0.50", "10.0 ms", "980.0 ms", "1.72 s", "986", "1.0e-03", "-"}},
		// Two seeds: mean ± sample sd (sd of 569 s and 631 s is 43.8 s).
		{"fft-rate-w0.25, mean ± sd 1,2 60 s", []string{"10 min 0 s ± 44 s", "4,002 ± 1", "4,000 ± 0", "31.0 ± 1.4", "15.5 ± 0.7", "0.450 ± 0.071", "0.90 ± 0.14", "4.5% ± 0.7%", "2.00 ± 0.00", "0.50 ± 0.00",
			"10.0 ms ± 0.0 ms", "980.0 ms ± 0.0 ms", "1.72 s ± 0.0 ms", "1 ± 0", "≤ 2.0e-04", ""}},
	} {
		if d := cmp.Diff(tc.want, rows[tc.row]); d != "" {
			t.Errorf("row %q (-want,+got):\n%s\n%s", tc.row, d, b.String())
		}
	}
	// The same seed in another folder (another setting): no mean row.
	other := filepath.Join(t.TempDir(), "r0")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	b2, err := os.ReadFile(filepath.Join(dir, "summary-gavel-ftf-r20-s1-60-0.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "summary-gavel-ftf-r20-s1-60-0.json"), b2, 0o644); err != nil {
		t.Fatal(err)
	}
	var b3 bytes.Buffer
	if code := (&TabulateCommand{Meta: Meta{Ui: ui, Stdout: &b3}}).Run([]string{dir, other}); code != 0 || strings.Contains(b3.String(), "gavel-ftf, mean") ||
		strings.Count(b3.String(), "| gavel-ftf | 1 | 60 s |") != 2 {
		t.Errorf("seed 1 of gavel-ftf in two folders: exit %d, want its two rows and no mean:\n%s", code, b3.String())
	}
	if len(rows) != 2+8 {
		t.Errorf("%d lines, want a header, a rule, 7 runs and 1 mean:\n%s", len(rows), b.String())
	}
	for _, args := range [][]string{nil, {t.TempDir()}} {
		ui := cli.NewMockUi()
		if code := (&TabulateCommand{Meta: Meta{Ui: ui, Stdout: &b}}).Run(args); code != 1 ||
			!strings.Contains(ui.ErrorWriter.String(), map[bool]string{true: "at least one argument", false: "no summary-*.json"}[args == nil]) {
			t.Errorf("tabulate %q: exit %d, %q", args, code, ui.ErrorWriter.String())
		}
	}
}

func TestMeanSD(t *testing.T) {
	for _, tc := range []struct {
		in     []float64
		m, sd  float64
		absent bool
	}{
		{in: []float64{1, 2, 3}, m: 2, sd: 1},
		{in: []float64{5, 5}, m: 5, sd: 0},
		{in: []float64{1, math.NaN()}, absent: true},
		{in: []float64{1, -1}, absent: true}, // -1: NaN in a summary
	} {
		m, sd := meanSD(tc.in)
		if tc.absent {
			if !math.IsNaN(m) {
				t.Errorf("meanSD(%v) = %v, want NaN", tc.in, m)
			}
			continue
		}
		if math.Abs(m-tc.m) > 1e-12 || math.Abs(sd-tc.sd) > 1e-12 {
			t.Errorf("meanSD(%v) = %v ± %v, want %v ± %v", tc.in, m, sd, tc.m, tc.sd)
		}
	}
}
