package command

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator/policy"
	"github.com/nomad-fft/nomad-fft/allocator/sim/metrics"
)

// simulate runs `fftctl simulate args` and returns the exit code and
// stdout and stderr.
func simulate(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := RunWith(append([]string{"simulate"}, args...), nil, &out, &errb)
	return code, out.String(), errb.String()
}

func TestSimulate(t *testing.T) {
	dir := t.TempDir()
	code, out, errb := simulate("-policies", "fifo,gavel-las", "-jobs", "30", "-rates", "1,2", "-seeds", "0,1",
		"-cluster", "v100=8,p100=8,k80=8", "-out", dir)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errb)
	}
	for _, want := range []string{"Rate 1 jobs/hour, seeds 0,1:", "Rate 2 jobs/hour", "fifo", "gavel-las", "JCT h", "FTF/1st"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if len(line) > 100 {
			t.Errorf("table line over 100 columns: %q", line)
		}
	}
	if !strings.Contains(errb, "gavel-las rate 2 seed 1: done") {
		t.Errorf("no progress on stderr:\n%s", errb)
	}
	for _, f := range []string{
		"jobs-fifo-r1-s0.csv", "rounds-fifo-r1-s0.csv", "summary-gavel-las-r2-s1.json", "workload-r1-s0.csv",
		"jct-cdf-r2-s1.png", "jct-cdf-r2-s1.svg", "ftf-cdf-r1-s0.png", "utilisation-r1-s1.svg",
	} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("output %s missing or empty: %v", f, err)
		}
	}
	// Every seed's written workload replays to the same FIFO result.
	for _, rs := range []string{"r1-s0", "r1-s1", "r2-s0", "r2-s1"} {
		code, out2, errb := simulate("-policies", "fifo", "-trace", filepath.Join(dir, "workload-"+rs+".csv"), "-cluster", "v100=8,p100=8,k80=8",
			"-out", t.TempDir(), "-plots=false", "-json", "-quiet", "-reference", "none")
		if code != 0 {
			t.Fatalf("replay %s: exit %d; stderr:\n%s", rs, code, errb)
		}
		var orig, replay struct {
			Measured int          `json:"measured"`
			JCT      metrics.Stat `json:"jct_s"`
		}
		raw, err := os.ReadFile(filepath.Join(dir, "summary-fifo-"+rs+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &orig); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(out2), &replay); err != nil {
			t.Fatalf("replay %s JSON: %v\n%s", rs, err, out2)
		}
		if replay.Measured != 30 || math.Abs(replay.JCT.Mean-orig.JCT.Mean) > 1e-6*orig.JCT.Mean {
			t.Errorf("replay %s: %d jobs, mean JCT %v; original %d, %v", rs, replay.Measured, replay.JCT.Mean, orig.Measured, orig.JCT.Mean)
		}
	}
}

func TestSimulateUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"help", []string{"-h"}, 0, "Simulate Options:"},
		{"list", []string{"-list"}, 0, policy.DefaultName + " (default)"},
		{"unknown flag", []string{"-nope"}, 1, "-nope"},
		{"unknown policy", []string{"-policies", "nope"}, 1, `-policies: unknown policy "nope"`},
		{"bad cluster", []string{"-cluster", "v100"}, 1, "not model=gpus"},
		{"memory not a number", []string{"-cluster", "v100=4:NaN"}, 1, `-cluster: model "v100": field "memory_gb" = NaN: must be a number in [0, 1e+09]`},
		{"too many GPUs", []string{"-cluster", "v100=1048576x1024"}, 1, `-cluster: model "v100": field "gpus" = 1073741824: must be a GPU count in [0, 16777216]`},
		{"model not in table", []string{"-cluster", "a100=4"}, 1, `-cluster: model "a100" is not in the -throughputs gavel table (its models: v100, p100, k80)`},
		{"synthetic model without its table", []string{"-cluster", "syn-v100-up-50=4"}, 1, "-throughputs gavel-8 has it"},
		{"unknown table", []string{"-throughputs", "a100"}, 1, `-throughputs: unknown throughput table "a100": want gavel or gavel-8`},
		{"negative burst", []string{"-burst", "-1"}, 1, "-burst=-1: want 0 (no burst) or more"},
		{"round not a number", []string{"-round-seconds", "NaN"}, 1, "-round-seconds=NaN: want 0 (each policy's own) or a round length in [0.001, 1e+09] seconds"},
		{"restart not a number", []string{"-restart-seconds", "NaN"}, 1, "-restart-seconds=NaN: want a number of seconds in [0, 1e+09]"},
		{"no runs at once", []string{"-parallel", "0"}, 1, "-parallel=0: want 1 or more"},
		{"bad rate", []string{"-rates", "-1"}, 1, "-rates"},
		{"endless without window", []string{"-jobs", "0"}, 1, "needs -window"},
		{"bad window", []string{"-window", "5:1"}, 1, "-window"},
		{"bad stream", []string{"-rng", "python"}, 1, `-rng: unknown random stream "python"`},
		{"bad reference", []string{"-reference", "nope"}, 1, `-reference: unknown policy "nope"`},
		{"negative gap", []string{"-min-round-gap", "-1s"}, 1, "-min-round-gap=-1s: want 0s (fixed rounds) or more"},
		{"bad gap", []string{"-min-round-gap", "5"}, 1, "-min-round-gap"},
		{"gap tolerance of 1", []string{"-gap-tolerance", "1"}, 1, "-gap-tolerance=1: want a relative gap in [0, 1)"},
		{"negative sim time", []string{"-max-sim-time", "-1h"}, 1, "-max-sim-time=-1h0m0s: want 0s (no limit) or more"},
		{"stray argument", []string{"extra"}, 1, "takes no arguments"},
		{"unknown adversary", []string{"-adversaries", "lie:0.1"}, 1, `-adversaries: adversary "lie:0.1": unknown kind "lie"`},
		{"adversaries over 1", []string{"-adversaries", "split:0.6,inflate:0.5"}, 1, "sum to 1.1"},
		{"over-report with learn", []string{"-adversaries", "over-report:0.1", "-learn"}, 1, "are held for good"},
		{"missing trace", []string{"-trace", "/nonexistent/x.trace", "-quiet"}, 1, "loading trace"},
		{"bad trace", []string{"-trace", "../../../allocator/workload/testdata/gavel_msr_small.trace", "-cluster", "v100=36,p100=36,k80=36", "-quiet"}, 1, `field "scale_factor" = "16"`},
	} {
		code, out, errb := simulate(append(tc.args, "-out", t.TempDir())...)
		if code != tc.code || !strings.Contains(out+errb, tc.want) {
			t.Errorf("%s: exit %d, want %d with %q; output:\n%s%s", tc.name, code, tc.code, tc.want, out, errb)
		}
	}
}

// -adversaries runs each policy honest and with liars and prints the comparison per lie.
func TestSimulateAdversaries(t *testing.T) {
	dir := t.TempDir()
	code, out, errb := simulate("-policies", "fft-rate-w0.25", "-jobs", "30", "-rates", "1", "-seeds", "0",
		"-cluster", "v100=4,p100=4,k80=4", "-restart-seconds", "30", "-adversaries", "over-report:0.2,split:0.2", "-quiet", "-out", dir)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errb)
	}
	for _, want := range []string{"liar JCT x", "over-report", "split", "honest JCT x"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "adversaries.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		Kind  string  `json:"kind"`
		Liars int     `json:"liars"`
		JCT   float64 `json:"liar_jct_ratio"`
	}
	if err := json.Unmarshal(b, &rows); err != nil || len(rows) != 2 {
		t.Fatalf("adversaries.json: %v, %d rows:\n%s", err, len(rows), b)
	}
	for _, r := range rows {
		if r.Liars == 0 || !(r.JCT > 0) {
			t.Errorf("row %+v: want liars and a JCT ratio", r)
		}
	}
}

// -min-round-gap runs the live allocator's schedule: the header and the JSON summary say so,
// and the short jobs of a light load start as they arrive instead of at the next round.
func TestSimulateMinRoundGap(t *testing.T) {
	type run struct {
		Gap        float64      `json:"min_round_gap_s"`
		Early      int          `json:"early_rounds"`
		Starvation metrics.Stat `json:"starvation_s"`
	}
	runs := map[string]run{}
	for _, gap := range []string{"0s", "5s"} {
		args := []string{"-policies", "gavel-ftf", "-jobs", "20", "-min-round-gap", gap, "-out", t.TempDir(), "-plots=false", "-quiet", "-reference", "none"}
		code, out, errb := simulate(args...)
		if code != 0 {
			t.Fatalf("-min-round-gap %s: exit %d; stderr:\n%s", gap, code, errb)
		}
		if want := "(-min-round-gap " + gap; !strings.Contains(out, want) {
			t.Errorf("-min-round-gap %s: the header lacks %q:\n%s", gap, want, out)
		}
		code, out, errb = simulate(append(args, "-json")...)
		var r run
		if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil {
			t.Fatalf("-min-round-gap %s -json: exit %d, %v; stderr:\n%s", gap, code, err, errb)
		}
		runs[gap] = r
	}
	if f, e := runs["0s"], runs["5s"]; f.Gap != 0 || f.Early != 0 || e.Gap != 5 || e.Early == 0 || !(e.Starvation.Mean < f.Starvation.Mean) {
		t.Errorf("fixed rounds %+v, live schedule %+v: want gaps 0 and 5, early rounds only with the gap, and less waiting to start", f, e)
	}
}

// Without -min-round-gap a run keeps the fft-allocator's own schedule
// (its -min-round-gap default), so that the simulator's default is what
// ships: it equals -min-round-gap 5s exactly.
func TestSimulateDefaultScheduleIsTheAllocators(t *testing.T) {
	base := []string{"-policies", "gavel-ftf", "-jobs", "20", "-plots=false", "-quiet", "-reference", "none", "-json"}
	code, def, errb := simulate(append(base, "-out", t.TempDir())...)
	if code != 0 {
		t.Fatalf("default: exit %d; stderr:\n%s", code, errb)
	}
	code, live, errb := simulate(append(base, "-out", t.TempDir(), "-min-round-gap", "5s")...)
	if code != 0 {
		t.Fatalf("-min-round-gap 5s: exit %d; stderr:\n%s", code, errb)
	}
	// What the schedule decides (not the wall and solve times).
	type run struct {
		Gap    float64      `json:"min_round_gap_s"`
		Rounds int          `json:"rounds"`
		Early  int          `json:"early_rounds"`
		JCT    metrics.Stat `json:"jct_s"`
	}
	var d, l run
	if err := json.Unmarshal([]byte(def), &d); err != nil || d.Gap != 5 {
		t.Errorf("default run: min_round_gap_s %v (%v), want 5, the allocator's default", d.Gap, err)
	}
	if err := json.Unmarshal([]byte(live), &l); err != nil || d != l || d.Early == 0 {
		t.Errorf("the default run %+v differs from -min-round-gap 5s %+v (%v), or ran no early round", d, l, err)
	}
}

// -max-sim-time reaches the run: a cluster too small for the jobs stops
// at the limit, and the summary says why and counts the jobs left.
func TestSimulateMaxSimTime(t *testing.T) {
	code, out, errb := simulate("-policies", "fifo", "-jobs", "30", "-cluster", "v100=2", "-plots=false", "-quiet",
		"-reference", "none", "-json", "-max-sim-time", "20h", "-out", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errb)
	}
	var s struct {
		Stopped    string `json:"stopped"`
		Unfinished int    `json:"unfinished"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil || s.Stopped != "simulated time limit 20h0m0s reached" || s.Unfinished == 0 {
		t.Errorf("summary stopped %q with %d unfinished (%v); want the time limit named and jobs left", s.Stopped, s.Unfinished, err)
	}
}

// -gap-tolerance is recorded in the summary, and a run with it is told
// from an exact one.
func TestSimulateGapTolerance(t *testing.T) {
	code, out, errb := simulate("-policies", "fft", "-jobs", "10", "-cluster", "v100=4", "-plots=false", "-quiet",
		"-reference", "none", "-json", "-gap-tolerance", "1e-4", "-out", t.TempDir())
	var s struct {
		GapTolerance float64 `json:"gap_tolerance"`
	}
	if err := json.Unmarshal([]byte(out), &s); code != 0 || err != nil || s.GapTolerance != 1e-4 {
		t.Errorf("exit %d, gap_tolerance %v (%v); want 1e-4 recorded\n%s", code, s.GapTolerance, err, errb)
	}
}

// -list prints every policy with its description, and (default) on the
// allocator's only.
func TestSimulateList(t *testing.T) {
	code, out, errb := simulate("-list")
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errb)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(policy.Names()) {
		t.Fatalf("%d lines for %d policies:\n%s", len(lines), len(policy.Names()), out)
	}
	for k, name := range policy.Names() {
		want := name
		if name == policy.DefaultName {
			want += " (default)"
		}
		if got := lines[k]; !strings.HasPrefix(got, want+"  ") || !strings.HasSuffix(got, policy.Describe(name)) {
			t.Errorf("line %d = %q, want %q then its description", k, got, want)
		}
	}
	if n := strings.Count(out, "(default)"); n != 1 {
		t.Errorf("(default) %d times, want once", n)
	}
}
