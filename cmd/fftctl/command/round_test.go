package command

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/cli"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/cmd/internal/version"
)

func TestRoundCommand(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"round": 1, "models": [{"name": "V100", "gpus": 4}],
		"jobs": [{"id": "x", "gpus": 0, "work": 1, "throughput": {"V100": 1}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// The two cases of issue 13, as a new user typed them.
	rho := filepath.Join(dir, "rho.json")
	if err := os.WriteFile(rho, []byte(`{"round": 4, "models": [{"name": "A", "gpus": 1}],
		"jobs": [{"id": "x", "arrival": 2, "gpus": 1, "work": 10, "throughput": {"A": 1}}],
		"fairness": {"jobs": {"x": {"arrival": 2, "work": 10, "tau": 1, "rho": -1e300}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.json")
	if err := os.WriteFile(huge, []byte(`{"round": 1, "models": [{"name": "A", "gpus": 1}],
		"jobs": [{"id": "x", "gpus": 1, "work": 1e308, "throughput": {"A": 1e-308}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, allocator.ExampleRound(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		out, err string
	}{
		{"built-in example", nil, 0, "K(t)          = 12 GPUs", ""},
		{"file as table", []string{good}, 0, "resnet50-a", ""},
		{"print example", []string{"-example"}, 0, `"round": 12`, ""},
		{"bad field named", []string{bad}, 1, "", `job "x": field "gpus" = 0`},
		{"negative rho", []string{rho}, 1, "", `job "x": field "fairness.jobs.rho" = -1e+300: must be a number in [0, 1e+100]`},
		{"overflowing work, -json", []string{"-json", huge}, 1, "", `job "x": field "work" = 1e+308: must be a finite number > 0 and at most 1e+15`},
		{"missing file", []string{filepath.Join(dir, "nope.json")}, 1, "", "no such file"},
		{"two files", []string{good, good}, 1, "", "at most one argument"},
		{"bad flag", []string{"-nope"}, 1, "", "flag provided but not defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ui := cli.NewMockUi()
			cmd := &RoundCommand{Meta: Meta{Ui: ui}}
			if code := cmd.Run(tc.args); code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, ui.ErrorWriter.String())
			}
			if !strings.Contains(ui.OutputWriter.String(), tc.out) || !strings.Contains(ui.ErrorWriter.String(), tc.err) {
				t.Fatalf("stdout:\n%s\nstderr:\n%s\nwant stdout containing %q and stderr containing %q",
					ui.OutputWriter.String(), ui.ErrorWriter.String(), tc.out, tc.err)
			}
		})
	}
}

func TestRoundCommandJSONFromStdin(t *testing.T) {
	ui := cli.NewMockUi()
	cmd := &RoundCommand{Meta: Meta{Ui: ui}, stdin: bytes.NewReader(allocator.ExampleRound())}
	if code := cmd.Run([]string{"-json", "-"}); code != 0 {
		t.Fatalf("exit %d: %s", code, ui.ErrorWriter.String())
	}
	var d allocator.Decision
	if err := json.Unmarshal(ui.OutputWriter.Bytes(), &d); err != nil {
		t.Fatalf("output is not a decision: %v\n%s", err, ui.OutputWriter.String())
	}
	if d.Round != 12 || len(d.Jobs) != 8 || d.MaxUsage != 12 {
		t.Fatalf("decision: round %d, %d jobs, K %d", d.Round, len(d.Jobs), d.MaxUsage)
	}
	for _, j := range d.Jobs {
		if len(j.Options()) == 0 || (j.Model == "" && j.Reason.Code == "") {
			t.Fatalf("job %s lacks options or a reason: %+v", j.ID, j)
		}
	}
}

func TestRunWithVersion(t *testing.T) {
	var out, errb bytes.Buffer
	want := "fftctl " + version.Get().String() + "\n"
	if code := RunWith([]string{"version"}, nil, &out, &errb); code != 0 || out.String() != want {
		t.Fatalf("exit %d, stdout %q (want %q), stderr %q", code, out.String(), want, errb.String())
	}
}

func TestSimulateCommandIsWired(t *testing.T) {
	var out, errb bytes.Buffer
	code := RunWith([]string{"simulate", "-no-such-flag"}, nil, &out, &errb)
	if code == 0 || !strings.Contains(errb.String()+out.String(), "no-such-flag") {
		t.Fatalf("exit %d, stdout %q, stderr %q: want a usage error naming the flag", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := RunWith([]string{"simulate", "-h"}, nil, &out, &errb); !strings.Contains(out.String()+errb.String(), "simulate") {
		t.Fatalf("help: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}
