package chaos

import (
	"strings"
	"testing"
	"time"
)

// The invariant checks find what they are for: each case breaks one invariant of an otherwise
// clean run and expects a violation naming it (and a clean run has none).
func TestInvariantsCatchViolations(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	const a100 = modelA100
	const denied = `claiming the round: Unexpected response code: 403 (ACL not found)`
	clean := func() *evidence {
		r0 := &roundRec{Round: 0, start: at(0), Assignment: map[string]string{"default/j": a100}, Usage: map[string]int{a100: 2}}
		r0.Models = append(r0.Models, struct {
			Name string `json:"name"`
			GPUs int    `json:"gpus"`
		}{a100, 2})
		r0.Jobs = append(r0.Jobs, jobLine{ID: "default/j", Model: a100, RhoBefore: 0, RhoAfter: 0.5})
		r1 := &roundRec{Round: 1, start: at(2), Assignment: map[string]string{}, Models: r0.Models}
		return &evidence{
			work: map[string]float64{"default/j": 10},
			allocs: []allocRec{{ID: "0123456789", Job: "default/j", Model: a100, GPUs: 2, Created: at(0.1), Started: at(0.5), Done: at(11),
				Desired: "run", Client: "complete", Node: "n1", DeviceIDs: []string{"GPU-x", "GPU-y"}}},
			rounds:       []*roundRec{r0, r1},
			ledger:       map[string]jobRec{"default/j": {Rho: 0.5, RoundsRun: 1, Status: "finished"}},
			next:         2,
			samples:      map[string][]sample{"default/j": {{at(3), 2, -1}, {at(6), 5, 4}, {at(7), 4.5, 4}, {at(11), 10, 4}}},
			applies:      map[int]int{0: 1, 1: 1},
			capacity:     map[string]int{a100: 2},
			hostCapacity: map[string]int{"n1": 2},
			// Flipped after the job ended, with no round in the window.
			flips: []flip{{Node: "n1", Client: "c", Model: a100, GPU: "GPU-x", From: at(20), Unlisted: at(30)}},
		}
	}
	if v, _ := clean().check(); len(v) != 0 {
		t.Fatalf("a clean run has violations: %v", v)
	}
	// A round that starts within a second of the token's restore may reach Consul after it.
	restored := clean()
	restored.revocations, restored.deniedFailures = []revocation{{From: at(0.5), To: at(2.5), RoundBefore: 1, RoundDuring: 1, Failures: 2, LastError: denied}}, 2
	if v, _ := restored.check(); len(v) != 0 {
		t.Fatalf("a round started 0.5 s before the token's restore counts as a violation: %v", v)
	}
	for _, tc := range []struct {
		name   string
		mutate func(e *evidence)
		want   string
	}{
		{"short of work", func(e *evidence) { e.samples["default/j"][3].done = 9 }, "completed with 9 of 10"},
		{"still running", func(e *evidence) { e.allocs[0].Client = "running" }, "neither finished nor waiting"},
		{"failed", func(e *evidence) {
			e.allocs[0].Client = "failed"
			e.ledger["default/j"] = jobRec{Rho: 0.5, RoundsRun: 1, Status: "failed"}
		}, `the ledger says "failed"`},
		{"not selected", func(e *evidence) { e.allocs[0].Created = at(2.5) }, "neither that round nor the next assigned it"},
		{"too many GPUs", func(e *evidence) {
			e.allocs = append(e.allocs, allocRec{ID: "abcdefghij", Job: "default/j", Model: a100, GPUs: 1, Created: at(0.2), Started: at(1), Desired: "stop", Client: "complete", Done: at(3)})
		}, "3 GPUs of"},
		{"host over its GPUs", func(e *evidence) {
			e.capacity[a100], e.hostCapacity["n2"] = 4, 2
			e.allocs = append(e.allocs, allocRec{ID: "abcdefghij", Job: "default/j", Model: a100, GPUs: 1, Node: "n1", Created: at(0.2), Started: at(1), Desired: "stop", Client: "complete", Done: at(3)})
		}, "3 GPUs on node n1 in use"},
		{"round missing", func(e *evidence) { e.next = 3 }, "round 2 is missing"},
		{"applied twice", func(e *evidence) { e.applies[1] = 2 }, "round 1 was applied 2 times"},
		{"honest job distrusted", func(e *evidence) { e.rounds[0].Jobs[0].Distrusted = "held GPUs for 2 rounds" }, "round 0 distrusts default/j"},
		{"ledger differs", func(e *evidence) { e.ledger["default/j"] = jobRec{Rho: 0.7, RoundsRun: 1, Status: "finished"} }, "ledger rho 0.7"},
		{"capacity kept while a GPU was unhealthy", func(e *evidence) { e.flips[0].From, e.flips[0].Unlisted = at(1), at(3) }, "round 1 saw 2 GPUs"},
		{"job left on an unhealthy GPU", func(e *evidence) {
			e.flips[0].From, e.flips[0].Unlisted, e.allocs[0].Done = at(0.6), at(1), time.Time{}
		}, "was not moved within"},
		{"job started on an unhealthy GPU", func(e *evidence) { e.flips[0].From, e.flips[0].Unlisted = at(-2), at(1) }, "started on unhealthy GPU-x"},
		{"recorded while the token was revoked", func(e *evidence) {
			e.revocations, e.deniedFailures = []revocation{{From: at(0.5), To: at(4), RoundBefore: 1, RoundDuring: 1, Failures: 2, LastError: denied}}, 2
		}, "round 1 started at"},
		{"ledger advanced while revoked", func(e *evidence) {
			e.revocations, e.deniedFailures = []revocation{{From: at(20), To: at(30), RoundBefore: 2, RoundDuring: 4, Failures: 2, LastError: denied}}, 2
		}, "from round 2 to 4"},
		{"no refusal logged", func(e *evidence) {
			e.revocations = []revocation{{From: at(20), To: at(30), RoundBefore: 2, RoundDuring: 2, Failures: 2, LastError: denied}}
		}, "no replica logged"},
		{"no failed round counted", func(e *evidence) {
			e.revocations, e.deniedFailures = []revocation{{From: at(20), To: at(30), RoundBefore: 2, RoundDuring: 2, LastError: denied}}, 2
		}, "counted 0 failed rounds"},
		{"progress below checkpoint", func(e *evidence) { e.samples["default/j"][2].done = 3 }, "progress went from 5 to 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := clean()
			tc.mutate(e)
			v, _ := e.check()
			if len(v) == 0 || !strings.Contains(strings.Join(v, "\n"), tc.want) {
				t.Errorf("violations %q, want one containing %q", v, tc.want)
			}
		})
	}
}
