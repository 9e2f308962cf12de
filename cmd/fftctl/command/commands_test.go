package command

import (
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
		c := &DevCommand{round: tc.round, rounds: tc.rounds}
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
}
