package command

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/placement"
	"github.com/nomad-fft/nomad-fft/allocator/profile"
	"github.com/nomad-fft/nomad-fft/fairness"
)

func ledgerOf(round int, recs map[string]loop.JobRecord) *loop.Ledger {
	return &loop.Ledger{Round: round, Jobs: recs}
}

func rec(status string, rho, done, work float64, last string) loop.JobRecord {
	return loop.JobRecord{JobState: fairness.JobState{Work: work, Rho: rho}, Done: done, Status: status, LastModel: last}
}

func TestBuildStatus(t *testing.T) {
	last := newRound(4).Model(a100, 2).Model(v100, 4).
		Run("default/b", a100, 2, 0.3).Action(loop.ActionKeep).
		Wait("default/a", 2, 0.5, 0.7).
		NoFit("default/big", `device "nvidia/gpu" count = 8: more GPUs than any model`).
		Invalid("default/bad", "job meta \"fft.work\" = \"-5\": expected a number > 0\njob meta \"fft.x\" = \"1\": expected one of ...").Obj()
	l := ledgerOf(5, map[string]loop.JobRecord{
		"default/a":    rec(loop.StatusWaiting, 0.7, 3, 10, ""),
		"default/b":    rec(loop.StatusRunning, 0, 40, 100, a100),
		"default/big":  rec(loop.StatusNoFit, 0, 0, 10, ""),
		"default/done": rec(loop.StatusFinished, 0, 10, 10, v100),
	})
	v := buildStatus(l, last, "replica-1")
	var order []string
	for _, j := range v.Jobs {
		order = append(order, j.ID)
	}
	if diff := cmp.Diff([]string{"default/b", "default/a", "default/big", "default/done"}, order); diff != "" {
		t.Errorf("job order: running, waiting, no-fit, finished (-want,+got):\n%s", diff)
	}
	byID := map[string]jobStatus{}
	for _, j := range v.Jobs {
		byID[j.ID] = j
	}
	for _, tc := range []struct {
		id, model, reason string
		gpus              int
	}{
		{"default/b", a100, "", 2},
		{"default/a", "", "not selected", 2},
		{"default/big", "", "more GPUs than any model", 0},
		{"default/done", v100, "", 0}, // finished: the model it last ran on
	} {
		j := byID[tc.id]
		if j.Model != tc.model || j.GPUs != tc.gpus || !strings.Contains(j.Reason, tc.reason) || (tc.reason == "" && j.Reason != "") {
			t.Errorf("%s: model %q, GPUs %d, reason %q; want %q, %d, %q", tc.id, j.Model, j.GPUs, j.Reason, tc.model, tc.gpus, tc.reason)
		}
	}
	if diff := cmp.Diff([]modelUsage{{a100, 2, 2}, {v100, 4, 0}}, v.Models); diff != "" {
		t.Errorf("models (-want,+got):\n%s", diff)
	}
	if v.NextRound != 5 || v.LastRound.Round != 4 || v.Leader != "replica-1" || len(v.Invalid) != 1 {
		t.Errorf("header: next %d, last %+v, leader %q, %d invalid", v.NextRound, v.LastRound, v.Leader, len(v.Invalid))
	}

	text := formatStatus(v)
	for _, w := range []string{
		"Next round  = 5", "Last round  = 4, started 2026-11-30T10:00:00Z", "Leader      = replica-1",
		"default/b", "40/100 (40%)", "0.700", "default/bad", `"fft.work" = "-5": expected a number > 0; job meta "fft.x"`,
	} {
		if !strings.Contains(text, w) {
			t.Errorf("status text lacks %q:\n%s", w, text)
		}
	}
	// Columns line up: each row of the jobs table starts its second column
	// where the header does.
	block := text[strings.Index(text, "\nJobs\n")+6:]
	block = block[:strings.Index(block, "\n\n")]
	rows := strings.Split(block, "\n")
	for _, row := range rows[1:] {
		if got, want := secondColumn(row), secondColumn(rows[0]); got != want {
			t.Errorf("row %q: second column at %d, header's at %d", row, got, want)
		}
	}

	// JSON keeps every field, including an empty invalid list.
	empty := buildStatus(ledgerOf(0, nil), nil, "")
	b, _ := json.Marshal(empty)
	if !strings.Contains(string(b), `"jobs":[]`) || !strings.Contains(string(b), `"invalid":[]`) || strings.Contains(string(b), "last_round") {
		t.Errorf("empty status JSON %s", b)
	}
	if text := formatStatus(empty); !strings.Contains(text, "(no FFT-managed jobs)") || !strings.Contains(text, "none (no fft-allocator holds the lock)") {
		t.Errorf("empty status text:\n%s", text)
	}
}

func TestExplainJob(t *testing.T) {
	r := newRound(7).Model(a100, 2).Model(v100, 4).
		Run("default/run", v100, 4, 0.25).Action(loop.ActionMigrate).
		Wait("default/wait", 2, 0.5, 0.75).
		NoFit("default/nofit", "fft.throughput names no GPU model of the cluster").
		Invalid("default/bad", "job meta \"fft.work\" = \"x\": expected a number > 0").Obj()
	for _, tc := range []struct {
		id   string
		want []string
	}{
		{"default/run", []string{"Round      = 7", "Decision   = runs on " + v100 + " (migrate)", "GPUs       = 4", "Rho        = 0.25 before the round, 0 after"}},
		{"default/wait", []string{"Decision   = not scheduled (keep): not selected", "Rho        = 0.5 before the round, 0.75 after"}},
		{"default/nofit", []string{"not scheduled (keep): fft.throughput names no GPU model", "No model was priced"}},
		{"default/bad", []string{"rejected: the job's fft. meta breaks the contract", `  job meta "fft.work" = "x"`}},
	} {
		if !mentions(r, tc.id) {
			t.Errorf("the round does not mention %s", tc.id)
		}
		e := explainJob(r, tc.id)
		text := formatExplain(e)
		for _, w := range tc.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: explanation lacks %q:\n%s", tc.id, w, text)
			}
		}
		// Options come cheapest first, and the chosen one is marked.
		for k := 1; k < len(e.Options); k++ {
			if e.Options[k].Cost < e.Options[k-1].Cost {
				t.Errorf("%s: options not sorted by cost: %+v", tc.id, e.Options)
			}
		}
		if e.Model != "" && !strings.Contains(text, "yes") {
			t.Errorf("%s: the chosen option is not marked:\n%s", tc.id, text)
		}
	}
	if mentions(r, "default/other") {
		t.Error("the round mentions a job it does not hold")
	}
	// The options as recorded are left in place (explain only reads).
	if got := r.Jobs[0].Options[0].Model; got != a100 {
		t.Errorf("explainJob reordered the record's options: first is %s", got)
	}
}

func TestAuditRows(t *testing.T) {
	recs := []*loop.RoundRecord{
		newRound(0).Invalid("default/j", "job meta \"fft.work\" = \"0\": expected a number > 0").Obj(),
		newRound(1).Model(a100, 2).Run("default/j", a100, 2, 0).Obj(),
		newRound(2).Model(a100, 2).Run("default/other", a100, 2, 0).Obj(),
		newRound(3).Model(a100, 2).Run("default/other", a100, 2, 0).Wait("default/j", 2, 0, 0.4).Action(loop.ActionPark).Obj(),
	}
	rows := auditRows(recs, "default/j")
	var rounds []int
	for _, r := range rows {
		rounds = append(rounds, r.Round)
	}
	if diff := cmp.Diff([]int{0, 1, 3}, rounds); diff != "" {
		t.Fatalf("rounds that mention the job (-want,+got):\n%s", diff)
	}
	if !strings.HasPrefix(rows[0].Reason, "rejected: job meta \"fft.work\"") || rows[0].Cost != nil {
		t.Errorf("round 0 row %+v", rows[0])
	}
	if rows[1].Action != loop.ActionStart || rows[1].Model != a100 || rows[1].Cost == nil || *rows[1].Cost != recs[1].Jobs[0].Chosen.Cost {
		t.Errorf("round 1 row %+v, want start on %s at the chosen cost", rows[1], a100)
	}
	if rows[2].Action != loop.ActionPark || rows[2].RhoAfter != 0.4 || rows[2].Cost != nil {
		t.Errorf("round 3 row %+v", rows[2])
	}
	text := formatAudit("default/j", rows)
	for _, w := range []string{"Job default/j", "Rho Before", "park", "2026-11-30T10:00:00Z"} {
		if !strings.Contains(text, w) {
			t.Errorf("audit table lacks %q:\n%s", w, text)
		}
	}
	if got := len(strings.Split(text, "\n")); got != 2+len(rows) {
		t.Errorf("audit table has %d lines, want a title, a header and %d rows:\n%s", got, len(rows), text)
	}
	if b, _ := json.Marshal(auditRows(nil, "default/j")); string(b) != "[]" {
		t.Errorf("no rows encode as %s, want []", b)
	}
}

func TestFormatRound(t *testing.T) {
	r := newRound(3).Model(v100, 4).Model(a100, 2).
		Run("default/a", a100, 2, 0).
		Run("team/b", v100, 2, 0).Action(loop.ActionMigrate).
		Wait("default/c", 2, 0, 0.3).Action(loop.ActionPark).
		Wait("default/d", 1, 0, 0.1).
		NoFit("default/e", "too big").
		Invalid("default/f", "bad").Obj()
	got := formatRound(r, nil, time.UTC)
	for _, w := range []string{
		"Round 3 at 10:00:00: 2 running, 2 waiting, 1 fit no model, 1 rejected (bad fft. meta); 4 of 6 GPUs busy",
		"GPUs: " + a100 + " 2/2, " + v100 + " 2/4",
		"start    a on " + a100, "migrate  team/b on " + v100, "park     c",
		// Why each change was worth it, from the recorded terms.
		"start    a on " + a100 + ": cost 5, of which its restart 0", "park     c: kept on " + a100 + " (cost 20), the round would total",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("round block lacks %q:\n%s", w, got)
		}
	}
	if strings.Contains(got, "no changes") || strings.Contains(got, " d") {
		t.Errorf("a job kept waiting shows as a change:\n%s", got)
	}
	quiet := newRound(4).Model(a100, 2).Run("default/a", a100, 2, 0).Action(loop.ActionKeep).Obj()
	quiet.Trigger = loop.TriggerSchedule
	if got := formatRound(quiet, nil, time.UTC); !strings.Contains(got, "Round 4 at 10:00:00: 1 running") || !strings.Contains(got, "; no changes") || strings.Count(got, "\n") != 1 {
		t.Errorf("a scheduled round without changes:\n%s", got)
	}
	quiet.Trigger = loop.TriggerFinish
	if got := formatRound(quiet, nil, time.UTC); !strings.Contains(got, "Round 4 at 10:00:00 (early: finish): 1 running") {
		t.Errorf("an early round does not say why it ran:\n%s", got)
	}
}

// secondColumn is where a table row's second column starts: the first
// character after a run of two or more spaces.
func secondColumn(row string) int {
	k := strings.Index(row, "  ")
	if k < 0 {
		return -1
	}
	return k + len(row[k:]) - len(strings.TrimLeft(row[k:], " "))
}

// With tenant shares, status lists each tenant's share, its GPUs and its jobs' rho.
func TestBuildStatusTenants(t *testing.T) {
	last := newRound(2).Model(a100, 4).Run("ml/a", a100, 2, 0.1).Run("ml/b", a100, 2, 0).Wait("cv/c", 2, 0.5, 0.9).Obj()
	tenants := map[string]string{"ml/a": "ml", "ml/b": "ml", "cv/c": "cv"}
	for k := range last.Jobs {
		last.Jobs[k].Tenant = tenants[last.Jobs[k].ID]
	}
	last.Tenants = []loop.TenantAudit{{Tenant: "cv", Share: 1, Fraction: 0.5, Jobs: 1}, {Tenant: "ml", Share: 1, Fraction: 0.5, Jobs: 2}}
	l := ledgerOf(3, map[string]loop.JobRecord{
		"ml/a": rec(loop.StatusRunning, 0.1, 1, 10, a100), "ml/b": rec(loop.StatusRunning, 0, 1, 10, a100), "cv/c": rec(loop.StatusWaiting, 0.9, 0, 10, ""),
	})
	v := buildStatus(l, last, "")
	want := []tenantStatus{{TenantAudit: last.Tenants[0], Used: 0, Rho: 0.9}, {TenantAudit: last.Tenants[1], Used: 4, Rho: 0.1}}
	if d := cmp.Diff(want, v.Tenants); d != "" {
		t.Errorf("tenants (-want,+got):\n%s", d)
	}
	if out := formatStatus(v); !strings.Contains(out, "Tenants (the operator's shares") || !strings.Contains(out, "0.900") {
		t.Errorf("status text has no tenant table:\n%s", out)
	}
}

// explain prints each option's throughput source and error, says when a job
// runs to be measured, and shows declared-versus-measured warnings; status
// marks estimated throughputs.
func TestThroughputSources(t *testing.T) {
	r := newRound(9).Model(a100, 2).Model(v100, 4).
		Run("default/learned", a100, 2, 0.1).Action(loop.ActionKeep).
		Run("default/new", v100, 1, 0).Action(loop.ActionStart).Obj()
	tp := map[string]profile.Throughput{
		a100: {UnitsPerRound: 30, LogSD: 0.1, Source: profile.SourceMeasured, Measurements: 3},
		v100: {UnitsPerRound: 12.5, LogSD: 0.87, Source: profile.SourceEstimated, Measurements: 40},
	}
	mm := profile.Mismatch{Job: "default/learned", Model: a100, DeclaredUnitsPerRound: 10, MeasuredUnitsPerRound: 30, Measurements: 3}
	for k := range r.Jobs {
		switch r.Jobs[k].ID {
		case "default/learned":
			r.Jobs[k].Throughput, r.Jobs[k].Mismatches = tp, []profile.Mismatch{mm}
		case "default/new":
			r.Jobs[k].Options, r.Jobs[k].Learn = nil, &profile.Choice{Model: v100, FreeGPUs: 4, Reason: profile.ReasonFastest}
			r.Jobs[k].Distrusted = "held GPUs for 2 rounds claiming to finish within each"
			r.Jobs[k].Restart = &loop.RestartPrice{Seconds: 30, SecondsSource: loop.SourceConfigured, ClaimedSeconds: 90, CheckpointSource: loop.SourceDeclared}
		}
	}
	tests := []struct {
		id   string
		want []string
	}{
		{"default/learned", []string{"Source", "Log SD", "measured   0.10", "estimated  0.87", "Warning    = job \"default/learned\" on \"" + a100 + "\": declared fft.throughput 10"}},
		{"default/new", []string{"runs on " + v100 + " (start) to be measured", profile.ReasonFastest, "outside the policy until one round on a model measures it",
			"Distrusted = held GPUs for 2 rounds", "Claimed    = restart 90 s"}},
	}
	for _, tc := range tests {
		text := formatExplain(explainJob(r, tc.id))
		for _, w := range tc.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: explanation lacks %q:\n%s", tc.id, w, text)
			}
		}
	}
	learned := rec(loop.StatusRunning, 0.1, 5, 100, a100)
	learned.Throughput = tp
	onEstimate := rec(loop.StatusRunning, 0, 1, 100, v100)
	onEstimate.Throughput = tp
	last := newRound(9).Model(a100, 2).Model(v100, 4).Run("default/learned", a100, 2, 0.1).Run("default/est", v100, 1, 0).Obj()
	text := formatStatus(buildStatus(ledgerOf(10, map[string]loop.JobRecord{"default/learned": learned, "default/est": onEstimate}), last, ""))
	for _, w := range []string{"Throughput", "30 (measured)", "12.5*", "(* estimated: the job has not been measured on that model yet"} {
		if !strings.Contains(text, w) {
			t.Errorf("status lacks %q:\n%s", w, text)
		}
	}
}

// Status and explain show the hosts: each node's GPUs and the jobs the round placed on it,
// and a job's nodes and move.
func TestHostsInStatusAndExplain(t *testing.T) {
	last := newRound(3).Model(v100, 4).Run("default/a", v100, 1, 0).Run("default/g", v100, 2, 0).Obj()
	last.Hosts = []placement.Host{{ID: "n1", Name: "v100-a", Model: v100, GPUs: 2}, {ID: "n2", Name: "v100-b", Model: v100, GPUs: 2}}
	for k := range last.Jobs {
		switch last.Jobs[k].ID {
		case "default/a":
			last.Jobs[k].Hosts = []placement.Slot{{Host: "n2", GPUs: 1}}
		case "default/g":
			last.Jobs[k].Hosts = []placement.Slot{{Host: "n1", GPUs: 2}}
		}
	}
	last.Moves = []placement.Move{{Job: "default/a", From: []placement.Slot{{Host: "n1", GPUs: 1}}, To: []placement.Slot{{Host: "n2", GPUs: 1}}, Price: 0.1, For: "default/g"}}
	l := ledgerOf(4, map[string]loop.JobRecord{"default/a": rec(loop.StatusRunning, 0, 1, 10, v100), "default/g": rec(loop.StatusRunning, 0, 1, 10, v100)})
	v := buildStatus(l, last, "")
	want := []hostUsage{
		{Node: "v100-a", ID: "n1", Model: v100, GPUs: 2, Used: 2, Jobs: []string{"default/g"}},
		{Node: "v100-b", ID: "n2", Model: v100, GPUs: 2, Used: 1, Jobs: []string{"default/a"}},
	}
	if d := cmp.Diff(want, v.Hosts); d != "" {
		t.Errorf("hosts (-want,+got):\n%s", d)
	}
	if out := formatStatus(v); !strings.Contains(out, "Hosts") || !strings.Contains(out, "v100-b") {
		t.Errorf("status text has no hosts table:\n%s", out)
	}
	e := explainJob(last, "default/a")
	out := formatExplain(e)
	if !strings.Contains(out, "Hosts      = v100-b (1 GPUs)") || !strings.Contains(out, "to make room for default/g") {
		t.Errorf("explain does not name the host and the move:\n%s", out)
	}
}
