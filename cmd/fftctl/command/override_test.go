package command

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/cli"

	"github.com/nomad-fft/nomad-fft/allocator/consulstore"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/e2e/consultest"
)

// park, pin and resume write and lift the overrides every round reads, against a real agent.
func TestOverrideCommands(t *testing.T) {
	addr, client := consultest.Start(t)
	const prefix = "test/override/v1"
	store := consulstore.New(client, prefix)
	at := []string{"-consul-addr", addr, "-consul-prefix", prefix}
	run := func(c cli.Command, ui *cli.MockUi, args ...string) (int, string, string) {
		code := c.Run(append(append([]string{}, at...), args...))
		return code, ui.OutputWriter.String(), ui.ErrorWriter.String()
	}
	cmd := func(name string) (cli.Command, *cli.MockUi) {
		ui := cli.NewMockUi()
		f := overrideFlags{Meta: Meta{Ui: ui}}
		switch name {
		case "park":
			return &ParkCommand{f}, ui
		case "pin":
			return &PinCommand{f}, ui
		}
		return &ResumeCommand{f}, ui
	}
	overrides := func() map[string]loop.Override {
		t.Helper()
		o, err := store.Overrides(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
		check    func(map[string]loop.Override) bool
	}{
		{"park", []string{"-by", "ops", "-note", "node repair", "train"}, 0, "default/train: park by ops",
			func(o map[string]loop.Override) bool {
				return o["default/train"].Action == loop.OverridePark && o["default/train"].Note == "node repair"
			}},
		{"pin", []string{"ml/bert", a100}, 0, "ml/bert: pin on " + a100,
			func(o map[string]loop.Override) bool { return o["ml/bert"].Model == a100 }},
		{"pin", []string{"ml/bert", " "}, 1, "MODEL is empty", nil},
		{"resume", []string{"train"}, 0, "Lifted default/train (park by ops)",
			func(o map[string]loop.Override) bool { _, ok := o["default/train"]; return !ok && len(o) == 1 }},
		{"resume", []string{"train"}, 1, "default/train has no override to lift", nil},
		{"park", []string{}, 1, "This command takes one argument: JOB", nil},
	} {
		c, ui := cmd(tc.name)
		code, out, errs := run(c, ui, tc.args...)
		if code != tc.wantCode || !strings.Contains(out+errs, tc.wantOut) {
			t.Errorf("%s %q: exit %d, out %q, err %q; want %d and %q", tc.name, tc.args, code, out, errs, tc.wantCode, tc.wantOut)
		}
		if tc.check != nil && !tc.check(overrides()) {
			t.Errorf("%s %q: overrides now %+v", tc.name, tc.args, overrides())
		}
	}
}
