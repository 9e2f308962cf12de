package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/cli"

	"github.com/nomad-fft/nomad-fft/allocator/consulstore"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/e2e/consultest"
)

// The commands that read and write Consul, against a real agent holding two
// rounds recorded as the allocator records them.
func TestCommandsAgainstConsul(t *testing.T) {
	addr, client := consultest.Start(t)
	const prefix = "test/fftctl/v1"
	store := consulstore.New(client, prefix)
	ctx := context.Background()
	rounds := []*loop.RoundRecord{
		newRound(0).Model(a100, 2).Run("default/a", a100, 2, 0).Wait("default/b", 2, 0, 0.5).Invalid("default/bad", `job meta "fft.work" = "-1": expected a number > 0`).Obj(),
		newRound(1).Model(a100, 2).Run("default/b", a100, 2, 0.5).Wait("default/a", 2, 0, 0.25).Action(loop.ActionPark).Obj(),
	}
	ledgers := []map[string]loop.JobRecord{
		{"default/a": rec(loop.StatusRunning, 0, 4, 10, a100), "default/b": rec(loop.StatusWaiting, 0.5, 0, 10, "")},
		{"default/a": rec(loop.StatusWaiting, 0.25, 4, 10, a100), "default/b": rec(loop.StatusRunning, 0, 4, 10, a100)},
	}
	for k, r := range rounds {
		prev, err := store.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Record(ctx, prev, ledgerOf(k+1, ledgers[k]), r); err != nil {
			t.Fatal(err)
		}
	}
	at := []string{"-consul-addr", addr, "-consul-prefix", prefix}
	run := func(c cli.Command, ui *cli.MockUi, args ...string) (int, string, string) {
		code := c.Run(append(append([]string{}, at...), args...))
		return code, ui.OutputWriter.String(), ui.ErrorWriter.String()
	}

	t.Run("status", func(t *testing.T) {
		ui := cli.NewMockUi()
		code, out, errs := run(&StatusCommand{Meta: Meta{Ui: ui}}, ui, "-json")
		var v statusView
		if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
		}
		if v.NextRound != 2 || v.LastRound.Round != 1 || len(v.Jobs) != 2 || v.Jobs[0].ID != "default/b" || v.Jobs[0].Model != a100 || len(v.Models) != 1 || v.Models[0].Used != 2 {
			t.Errorf("status %+v", v)
		}
		ui = cli.NewMockUi()
		if code, out, _ := run(&StatusCommand{Meta: Meta{Ui: ui}}, ui); code != 0 || !strings.Contains(out, "default/a") || !strings.Contains(out, "0.250") {
			t.Errorf("status text: exit %d\n%s", code, out)
		}
	})
	t.Run("explain", func(t *testing.T) {
		ui := cli.NewMockUi()
		code, out, errs := run(&ExplainCommand{Meta: Meta{Ui: ui}}, ui, "a")
		if code != 0 || !strings.Contains(out, "Round      = 1") || !strings.Contains(out, "not scheduled (park)") {
			t.Errorf("explain a: exit %d\n%s%s", code, out, errs)
		}
		// The job rejected in round 0 is explained from round 0, the latest that mentions it.
		ui = cli.NewMockUi()
		code, out, _ = run(&ExplainCommand{Meta: Meta{Ui: ui}}, ui, "-json", "default/bad")
		var e explanation
		if code != 0 || json.Unmarshal([]byte(out), &e) != nil || e.Round != 0 || !strings.Contains(e.Invalid, `"fft.work" = "-1"`) {
			t.Errorf("explain -json default/bad: exit %d, %+v\n%s", code, e, out)
		}
		ui = cli.NewMockUi()
		if code, _, errs := run(&ExplainCommand{Meta: Meta{Ui: ui}}, ui, "ghost"); code != 1 || !strings.Contains(errs, `mentions job "default/ghost"`) {
			t.Errorf("explain ghost: exit %d, stderr %q", code, errs)
		}
	})
	t.Run("audit", func(t *testing.T) {
		ui := cli.NewMockUi()
		code, out, _ := run(&AuditCommand{Meta: Meta{Ui: ui}}, ui, "-json", "default/a")
		var rows []auditRow
		if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 2 || rows[0].Action != loop.ActionStart || rows[1].Action != loop.ActionPark || rows[1].RhoAfter != 0.25 {
			t.Errorf("audit -json default/a: exit %d, %+v\n%s", code, rows, out)
		}
		ui = cli.NewMockUi()
		if code, out, _ := run(&AuditCommand{Meta: Meta{Ui: ui}}, ui, "-since", "1", "a"); code != 0 || strings.Count(strings.TrimSpace(out), "\n") != 2 {
			t.Errorf("audit -since 1 a: exit %d, want a title, a header and one row:\n%s", code, out)
		}
	})
	t.Run("report", func(t *testing.T) {
		ui := cli.NewMockUi()
		env := map[string]string{"NOMAD_NAMESPACE": "default", "NOMAD_JOB_ID": "a"}
		c := &ReportCommand{Meta: Meta{Ui: ui}, getenv: func(k string) string { return env[k] }}
		if code, out, errs := run(c, ui, "7.5"); code != 0 || !strings.Contains(out, "default/a") {
			t.Fatalf("report 7.5: exit %d, %q %q", code, out, errs)
		}
		ui = cli.NewMockUi()
		if code, _, errs := run(&ReportCommand{Meta: Meta{Ui: ui}}, ui, "-quiet", "-job", "team/x", "3"); code != 0 {
			t.Fatalf("report -job team/x 3: exit %d, %q", code, errs)
		}
		got, err := store.Progress(ctx)
		if err != nil || got["default/a"] != 7.5 || got["team/x"] != 3 {
			t.Errorf("progress in Consul = %v, %v; want default/a 7.5 and team/x 3", got, err)
		}
	})
	t.Run("followRounds", func(t *testing.T) {
		// It reads the rounds recorded so far, then waits for the next one.
		var seen []int
		stop := errors.New("enough")
		done := make(chan error, 1)
		go func() {
			done <- followRounds(ctx, store, func(r *loop.RoundRecord) error {
				seen = append(seen, r.Round)
				if len(seen) == 3 {
					return stop
				}
				return nil
			})
		}()
		prev, err := store.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Record(ctx, prev, ledgerOf(3, prev.Jobs), newRound(2).Obj()); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if !errors.Is(err, stop) || fmt.Sprint(seen) != "[0 1 2]" {
				t.Errorf("followRounds = %v after rounds %v, want rounds [0 1 2]", err, seen)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("followRounds did not see round 2 (saw %v)", seen)
		}
		// Ending its context ends it.
		cctx, cancel := context.WithCancel(ctx)
		go func() { done <- followRounds(cctx, store, func(*loop.RoundRecord) error { return nil }) }()
		cancel()
		select {
		case err := <-done:
			if err == nil {
				t.Error("followRounds returned nil when its context ended")
			}
		case <-time.After(20 * time.Second):
			t.Fatal("followRounds ignored its context's end")
		}
	})
	t.Run("errors name where they looked", func(t *testing.T) {
		ui := cli.NewMockUi()
		code, out, _ := (&StatusCommand{Meta: Meta{Ui: ui}}).Run([]string{"-consul-addr", addr, "-consul-prefix", "elsewhere/v1"}), ui.OutputWriter.String(), ""
		if code != 0 || !strings.Contains(out, "No round recorded under elsewhere/v1") {
			t.Errorf("status of an empty prefix: exit %d, %q", code, out)
		}
		ui = cli.NewMockUi()
		code = (&StatusCommand{Meta: Meta{Ui: ui}}).Run([]string{"-consul-addr", "127.0.0.1:1"})
		if code != 1 || !strings.Contains(ui.ErrorWriter.String(), "Consul at 127.0.0.1:1") {
			t.Errorf("status of a closed port: exit %d, %q", code, ui.ErrorWriter.String())
		}
	})
}
