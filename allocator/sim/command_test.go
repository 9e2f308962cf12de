package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunCommand(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	args := []string{"-policies", "fifo,gavel-las", "-jobs", "30", "-rates", "1,2", "-seeds", "0,1",
		"-cluster", "v100=8,p100=8,k80=8", "-out", dir}
	if code := RunCommand(context.Background(), args, &out, &errb); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errb.String())
	}
	for _, want := range []string{"fifo", "gavel-las", "JCT h", "FTF gavel"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(errb.String(), "gavel-las rate 2 seed 1: done") {
		t.Errorf("no progress on stderr:\n%s", errb.String())
	}
	for _, f := range []string{
		"jobs-fifo-r1-s0.csv", "summary-gavel-las-r2-s1.json", "workload-r1-s0.csv",
		"jct-cdf-r2-s1.png", "jct-cdf-r2-s1.svg", "ftf-cdf-r1-s0.png", "utilisation-r1-s1.svg",
	} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("output %s missing or empty: %v", f, err)
		}
	}
	// The written workload replays to the same FIFO result.
	var out2 bytes.Buffer
	args = []string{"-policies", "fifo", "-trace", filepath.Join(dir, "workload-r1-s0.csv"), "-cluster", "v100=8,p100=8,k80=8",
		"-out", t.TempDir(), "-plots=false", "-json", "-quiet", "-reference", "none"}
	if code := RunCommand(context.Background(), args, &out2, &errb); code != 0 {
		t.Fatalf("replay: exit %d; stderr:\n%s", code, errb.String())
	}
	var orig, replay struct {
		Measured int  `json:"measured"`
		JCT      Stat `json:"jct_s"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "summary-fifo-r1-s0.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &orig); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out2.Bytes(), &replay); err != nil {
		t.Fatalf("replay JSON: %v\n%s", err, out2.String())
	}
	if replay.Measured != 30 || math.Abs(replay.JCT.Mean-orig.JCT.Mean) > 1e-6*orig.JCT.Mean {
		t.Errorf("replay: %d jobs, mean JCT %v; original %d, %v", replay.Measured, replay.JCT.Mean, orig.Measured, orig.JCT.Mean)
	}
}

func TestRunCommandUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"help", []string{"-h"}, 0, "Usage: fftctl simulate"},
		{"list", []string{"-list"}, 0, "gavel-ftf"},
		{"unknown policy", []string{"-policies", "nope"}, 2, `unknown policy "nope"`},
		{"bad cluster", []string{"-cluster", "v100"}, 2, "not model=gpus"},
		{"bad rate", []string{"-rates", "-1"}, 2, "-rates"},
		{"endless without window", []string{"-jobs", "0"}, 2, "needs -window"},
		{"bad window", []string{"-window", "5:1"}, 2, "-window"},
		{"bad stream", []string{"-rng", "python"}, 2, `unknown random stream "python"`},
		{"stray argument", []string{"extra"}, 2, "unexpected arguments"},
		{"missing trace", []string{"-trace", "/nonexistent/x.trace", "-quiet"}, 1, "loading trace"},
		{"bad trace", []string{"-trace", "testdata/gavel_msr_small.trace", "-cluster", "v100=36,p100=36,k80=36", "-quiet"}, 1, `field "scale_factor" = "16"`},
	} {
		var out, errb bytes.Buffer
		args := append(tc.args, "-out", t.TempDir())
		code := RunCommand(context.Background(), args, &out, &errb)
		if code != tc.code || !strings.Contains(out.String()+errb.String(), tc.want) {
			t.Errorf("%s: exit %d, want %d with %q; output:\n%s%s", tc.name, code, tc.code, tc.want, out.String(), errb.String())
		}
	}
}
