package telemetry

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

func TestAuditOneJSONLinePerRound(t *testing.T) {
	var buf bytes.Buffer
	a := NewAudit(hclog.New(&hclog.LoggerOptions{Name: "fft-allocator", JSONFormat: true, Output: &buf}))
	a.ObserveRound(&loop.RoundRecord{
		Round: 4, Start: "2026-12-01T10:00:00Z", Trigger: loop.TriggerArrival, TriggerJobs: []string{"default/b"},
		Jobs: []loop.JobAudit{
			{ID: "default/b", Action: loop.ActionStart, Model: "A100"},
			{ID: "default/a", Action: loop.ActionPark},
			{ID: "default/c", Action: loop.ActionKeep, Model: "V100"},
		},
		Usage:  map[string]int{"A100": 2, "V100": 4},
		Phases: map[string]float64{"observe": 0.25, "solve": 0.5},
		Apply:  loop.ApplyResult{Calls: 2, Conflicts: []string{"default/a"}},
	}, nil)
	a.ObserveRound(nil, &loop.PhaseError{Round: 5, Phase: "observe", Err: errors.New("nomad down")})

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want one per round:\n%s", len(lines), buf.String())
	}
	var ok, failed map[string]any
	for i, dst := range []*map[string]any{&ok, &failed} {
		if err := json.Unmarshal([]byte(lines[i]), dst); err != nil {
			t.Fatalf("line %d is not one JSON object: %v\n%s", i+1, err, lines[i])
		}
	}
	pick := func(m map[string]any, keys ...string) map[string]any {
		out := map[string]any{}
		for _, k := range keys {
			out[k] = m[k]
		}
		return out
	}
	want := map[string]any{
		"@message": AuditMessage, "@module": "fft-allocator.audit", "@level": "info", "outcome": "recorded",
		"round": 4.0, "trigger": "arrival", "jobs": 3.0, "duration_seconds": 0.75, "api_calls": 2.0,
		"changes":   map[string]any{"start": []any{"default/b"}, "park": []any{"default/a"}},
		"usage":     map[string]any{"A100": 2.0, "V100": 4.0},
		"conflicts": []any{"default/a"},
	}
	keys := []string{"@message", "@module", "@level", "outcome", "round", "trigger", "jobs", "duration_seconds", "api_calls", "changes", "usage", "conflicts"}
	if diff := cmp.Diff(want, pick(ok, keys...)); diff != "" {
		t.Errorf("recorded round's event (-want,+got):\n%s", diff)
	}
	wantFailed := map[string]any{"@message": AuditMessage, "@level": "error", "outcome": "failed", "phase": "observe"}
	if diff := cmp.Diff(wantFailed, pick(failed, "@message", "@level", "outcome", "phase")); diff != "" {
		t.Errorf("failed round's event (-want,+got):\n%s", diff)
	}
}
