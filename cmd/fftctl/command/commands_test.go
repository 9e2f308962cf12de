package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/cli"
)

// Every command follows Nomad's conventions: a short synopsis, a help that
// starts with its usage line and fits 80 columns.
func TestCommandsConventions(t *testing.T) {
	for name, factory := range Commands(Meta{Ui: cli.NewMockUi()}) {
		c, err := factory()
		if err != nil {
			t.Fatal(err)
		}
		if s := c.Synopsis(); s == "" || len(s) >= 50 {
			t.Errorf("%s: synopsis %q: want 1 to 49 characters", name, s)
		}
		help := c.Help()
		if !strings.HasPrefix(help, "Usage: fftctl "+name) {
			t.Errorf("%s: help starts %q", name, help[:min(len(help), 40)])
		}
		for _, line := range strings.Split(help, "\n") {
			if len(line) > 80 {
				t.Errorf("%s: help line over 80 columns: %q", name, line)
			}
		}
	}
}

func TestDevCommandChecks(t *testing.T) {
	for _, tc := range []struct {
		round  time.Duration
		rounds int
		err    string
	}{
		{10 * time.Second, 0, ""},
		{time.Second, 3, ""},
		{500 * time.Millisecond, 0, "-round = 500ms: expected at least 1s"},
		{10 * time.Second, -1, "-rounds = -1"},
	} {
		c := &DevCommand{round: tc.round, rounds: tc.rounds, workload: workloadSample}
		err := c.check()
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("check(round %s, rounds %d) = %v, want %q", tc.round, tc.rounds, err, tc.err)
		}
	}
	for _, args := range [][]string{{"extra"}, {"-nope"}} {
		ui := cli.NewMockUi()
		if code := (&DevCommand{Meta: Meta{Ui: ui}}).Run(args); code != 1 || ui.OutputWriter.String() != "" {
			t.Errorf("dev %v: exit %d, stdout %q; want 1 and nothing started", args, code, ui.OutputWriter.String())
		}
	}
	// A bad flag value stops the command before anything starts.
	ui := cli.NewMockUi()
	if code := (&DevCommand{Meta: Meta{Ui: ui}}).Run([]string{"-round", "10ms"}); code != 1 || !strings.Contains(ui.ErrorWriter.String(), "-round = 10ms") {
		t.Errorf("dev -round 10ms: exit %d, stderr %q", code, ui.ErrorWriter.String())
	}
	if strings.Contains(ui.OutputWriter.String(), "Starting") {
		t.Errorf("dev started with a bad flag: %q", ui.OutputWriter.String())
	}
	if err := (&DevCommand{round: time.Second, workload: "jax"}).check(); err == nil || !strings.Contains(err.Error(), `-workload = "jax": expected "sample" or "torch"`) {
		t.Errorf("check(-workload jax) = %v", err)
	}
}

// Without PyTorch, -workload torch says so, and how to install it, before it starts anything.
func TestDevTorchWorkloadWithoutPyTorch(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "python3")
	// A python3 that has no torch: it fails the import as CPython does.
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FFT_PYTHON", fake)
	ui := cli.NewMockUi()
	code := (&DevCommand{Meta: Meta{Ui: ui}}).Run([]string{"-workload", "torch"})
	stderr := ui.ErrorWriter.String()
	for _, want := range []string{"-workload torch runs PyTorch jobs: PyTorch is missing", fake + ": ModuleNotFoundError: No module named 'torch'", "apt-get install python3-torch", "FFT_PYTHON"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q: want %q", stderr, want)
		}
	}
	if code != 1 || strings.Contains(ui.OutputWriter.String(), "Starting") {
		t.Errorf("exit %d, stdout %q: want 1 and nothing started", code, ui.OutputWriter.String())
	}
}
