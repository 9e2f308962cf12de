package chaos

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"time"
)

// roundRec is the part of a round record (loop.RoundRecord) the invariants read.
type roundRec struct {
	Round int    `json:"round"`
	Start string `json:"start"`
	// State is "applying" while the round's decision is being applied and its record is not
	// written yet; a round whose leader died then keeps that state (its credit is lost).
	State      string            `json:"state"`
	Assignment map[string]string `json:"assignment"`
	Usage      map[string]int    `json:"usage"`
	Models     []struct {
		Name string `json:"name"`
		GPUs int    `json:"gpus"`
	} `json:"models"`
	Jobs []jobLine `json:"jobs"`

	start time.Time
}

// jobLine is the part of a round's audit line for one job (loop.JobAudit) the invariants read.
type jobLine struct {
	ID        string  `json:"id"`
	Model     string  `json:"model"`
	RhoBefore float64 `json:"rho_before"`
	RhoAfter  float64 `json:"rho_after"`
	// Distrusted is set once the overrun rule stops believing the job's claims.
	Distrusted string `json:"distrusted"`
}

// recorded reports whether the round's record is complete (not an intent left by a leader
// that died while applying it).
func (r *roundRec) recorded() bool { return r.State == "" }

// jobRec is the part of a job's ledger record (loop.JobRecord) the invariants read.
type jobRec struct {
	Rho       float64 `json:"rho"`
	RoundsRun int     `json:"rounds_run"`
	Status    string  `json:"status"`
}

// allocRec is one Nomad allocation of a chaos job.
type allocRec struct {
	ID, Job       string // Job is "namespace/job"
	Model         string
	GPUs          int
	Node          string
	DeviceIDs     []string // the GPU instances it holds
	Created       time.Time
	Started, Done time.Time // zero when the task never started or has not ended
	Desired       string
	Client        string
}

// sample is one reading of a job's progress report and its checkpoint file.
type sample struct {
	at   time.Time
	done float64
	// ckpt is the work the checkpoint holds, -1 when there is none.
	ckpt float64
}

// evidence is what a run leaves: Nomad's allocations, the Consul audit log and ledger, the
// progress the jobs reported over time, and the apply phases in the allocators' logs.
type evidence struct {
	// work is each submitted job's fft.work.
	work    map[string]float64
	allocs  []allocRec
	rounds  []*roundRec
	ledger  map[string]jobRec
	next    int // the ledger's next round
	samples map[string][]sample
	// applies counts, per round number, the replicas' runs that finished its apply phase.
	applies map[int]int
	// capacity is each model's GPUs with every client up, hostCapacity each
	// node's (by node ID).
	capacity     map[string]int
	hostCapacity map[string]int
	// flips are the GPUs made unhealthy (gpu-unhealthy faults).
	flips []flip
	// revocations are the windows without the allocators' Consul token; deniedFailures
	// counts the allocator log lines that report Consul's ACL refusal.
	revocations    []revocation
	deniedFailures int
}

// check runs every invariant and returns the violations, one line each, and the names of the
// invariants checked.
func (e *evidence) check() (violations []string, checked []string) {
	for _, inv := range []struct {
		name string
		f    func() []string
	}{
		{"every job finished with its full work or is waiting", e.finishedOrWaiting},
		{"no job ran without a round that selected it", e.selectedBeforeRun},
		{"no model used more GPUs than it had", e.withinCapacity},
		{"no host held more GPUs than it has", e.withinHosts},
		{"every round recorded once and applied at most once", e.roundsOnce},
		{"the ledger equals the one recomputed from the audit log", e.ledgerFromAudit},
		{"no job was distrusted: every chaos job reports its true progress", e.noneDistrusted},
		{"no progress went backwards except to its last checkpoint", e.progressMonotone},
		{"an unhealthy GPU shrank its model's capacity and its jobs moved off it", e.gpuFlipsHonoured},
		{"no round was recorded while the allocators' Consul token was revoked, the replicas counted failed rounds naming Consul's refusal and logged it", e.revokedRoundsFailed},
	} {
		checked = append(checked, inv.name)
		for _, v := range inv.f() {
			violations = append(violations, inv.name+": "+v)
		}
	}
	return violations, checked
}

// finishedOrWaiting: a job finished when an allocation Nomad meant to run completed; then its
// last report is its full work and the ledger says finished. Else it must be waiting: nothing
// of it runs.
func (e *evidence) finishedOrWaiting() []string {
	var out []string
	for _, id := range sortedKeys(e.work) {
		done, running := false, false
		for _, a := range e.allocs {
			if a.Job != id {
				continue
			}
			done = done || (a.Desired == "run" && a.Client == "complete")
			running = running || (a.Desired == "run" && (a.Client == "running" || a.Client == "pending"))
		}
		s := e.samples[id]
		switch {
		case done:
			if len(s) == 0 || s[len(s)-1].done != e.work[id] {
				last := -1.0
				if len(s) > 0 {
					last = s[len(s)-1].done
				}
				out = append(out, fmt.Sprintf("%s completed with %g of %g work units reported", id, last, e.work[id]))
			}
			if st := e.ledger[id].Status; st != "finished" {
				out = append(out, fmt.Sprintf("%s completed in Nomad but the ledger says %q", id, st))
			}
		case running:
			out = append(out, fmt.Sprintf("%s neither finished nor waiting: it still runs", id))
		case e.ledger[id].Status != "waiting" && e.ledger[id].Status != "no-fit":
			// A job that failed (Nomad gave it up) lost its work to a fault.
			out = append(out, fmt.Sprintf("%s neither finished nor waiting: the ledger says %q", id, e.ledger[id].Status))
		}
	}
	return out
}

// selectedBeforeRun: every allocation was created under a round that assigned its job to its
// model: the last round recorded before it was created, or the next one (a round applies its
// decision before its record is complete).
func (e *evidence) selectedBeforeRun() []string {
	var out []string
	byNumber := map[int]*roundRec{}
	for _, r := range e.rounds {
		byNumber[r.Round] = r
	}
	for _, a := range e.allocs {
		var last *roundRec
		for _, r := range e.rounds {
			if !r.start.After(a.Created) && (last == nil || r.Round > last.Round) {
				last = r
			}
		}
		ok := false
		for _, r := range []*roundRec{last, nextOf(byNumber, last)} {
			ok = ok || (r != nil && r.Assignment[a.Job] == a.Model)
		}
		if !ok {
			at := "before round 0"
			if last != nil {
				at = fmt.Sprintf("after round %d started", last.Round)
			}
			out = append(out, fmt.Sprintf("allocation %s of %s on %q was created at %s, %s, and neither that round nor the next assigned it there",
				a.ID[:8], a.Job, a.Model, a.Created.Format(time.RFC3339Nano), at))
		}
	}
	return out
}

func nextOf(byNumber map[int]*roundRec, r *roundRec) *roundRec {
	if r == nil {
		return byNumber[0]
	}
	return byNumber[r.Round+1]
}

// withinCapacity: each round's usage fits the models it saw, and at no time did the
// allocations running on one model hold more GPUs than the model has.
func (e *evidence) withinCapacity() []string {
	var out []string
	for _, r := range e.rounds {
		have := map[string]int{}
		for _, m := range r.Models {
			have[m.Name] = m.GPUs
		}
		for m, n := range r.Usage {
			if n > have[m] {
				out = append(out, fmt.Sprintf("round %d assigned %d GPUs of %q, which had %d", r.Round, n, m, have[m]))
			}
		}
	}
	return append(out, overHeld(e.allocs, func(a allocRec) string { return a.Model }, func(m string) int { return e.capacity[m] }, "of %q")...)
}

// withinHosts: at no time did the allocations running on one node hold more GPUs than it
// has (the placement stage's pins, as Nomad carried them out).
func (e *evidence) withinHosts() []string {
	return overHeld(e.allocs, func(a allocRec) string { return a.Node }, func(n string) int { return e.hostCapacity[n] }, "on node %s")
}

// overHeld sweeps the allocations' starts and ends grouped by key (a model, a node) and
// returns the first moment each group held more GPUs than limit gives it; where names the
// group in the line ("of %q", "on node %s").
func overHeld(allocs []allocRec, key func(allocRec) string, limit func(string) int, where string) []string {
	type edge struct {
		at    time.Time
		delta int
	}
	edges := map[string][]edge{}
	for _, a := range allocs {
		if a.Started.IsZero() || a.GPUs == 0 {
			continue
		}
		k := key(a)
		edges[k] = append(edges[k], edge{a.Started, a.GPUs})
		if !a.Done.IsZero() {
			edges[k] = append(edges[k], edge{a.Done, -a.GPUs})
		}
	}
	var out []string
	for _, k := range sortedKeys(edges) {
		es := edges[k]
		// Ends before starts at the same instant: a GPU freed and taken at once is not shared.
		sort.Slice(es, func(i, j int) bool {
			if es[i].at.Equal(es[j].at) {
				return es[i].delta < es[j].delta
			}
			return es[i].at.Before(es[j].at)
		})
		inUse := 0
		for _, ed := range es {
			if inUse += ed.delta; inUse > limit(k) {
				out = append(out, fmt.Sprintf("%d GPUs "+where+" in use at %s, it has %d", inUse, k, ed.at.Format(time.RFC3339Nano), limit(k)))
				break
			}
		}
	}
	return out
}

// noneDistrusted: the chaos jobs report their true progress and rates, so the overrun rule
// (allocator/loop/claims.go) must not distrust one, whatever the faults did to its runs.
func (e *evidence) noneDistrusted() []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range e.rounds {
		for _, l := range r.Jobs {
			if l.Distrusted != "" && !seen[l.ID] {
				seen[l.ID] = true
				out = append(out, fmt.Sprintf("round %d distrusts %s: %s", r.Round, l.ID, l.Distrusted))
			}
		}
	}
	return out
}

// roundsOnce: the audit log holds rounds 0 to next-1, each once under its own number, and no
// round number's apply phase ran twice (in any replica).
func (e *evidence) roundsOnce() []string {
	var out []string
	seen := map[int]bool{}
	for _, r := range e.rounds {
		if seen[r.Round] {
			out = append(out, fmt.Sprintf("round %d recorded twice", r.Round))
		}
		seen[r.Round] = true
	}
	for n := 0; n < e.next; n++ {
		if !seen[n] {
			out = append(out, fmt.Sprintf("round %d is missing from the audit log (the ledger is at %d)", n, e.next))
		}
	}
	for _, n := range sortedKeys(e.applies) {
		if e.applies[n] > 1 {
			out = append(out, fmt.Sprintf("round %d was applied %d times", n, e.applies[n]))
		}
	}
	return out
}

// ledgerFromAudit: following the recorded rounds in order, each job's rho before a round is
// its rho after the previous round that had it (or 0, in the round that first distrusts it:
// its fairness record starts over), its ledger rho is its rho after the last round that had
// it, and its rounds run are the recorded rounds that gave it a model.
func (e *evidence) ledgerFromAudit() []string {
	var out []string
	rho := map[string]float64{}
	runs := map[string]int{}
	distrusted := map[string]bool{}
	for _, r := range e.rounds {
		if !r.recorded() {
			continue
		}
		for _, l := range r.Jobs {
			if l.Distrusted != "" && !distrusted[l.ID] {
				distrusted[l.ID], rho[l.ID] = true, 0 // noneDistrusted reports it
			}
			if prev, ok := rho[l.ID]; ok && prev != l.RhoBefore {
				out = append(out, fmt.Sprintf("%s: rho %g after its previous round, %g before round %d", l.ID, prev, l.RhoBefore, r.Round))
			}
			rho[l.ID] = l.RhoAfter
			if l.Model != "" {
				runs[l.ID]++
			}
		}
	}
	for _, id := range sortedKeys(rho) {
		got, ok := e.ledger[id]
		if !ok {
			out = append(out, fmt.Sprintf("%s is in the audit log but not in the ledger", id))
			continue
		}
		if got.Rho != rho[id] || got.RoundsRun != runs[id] {
			out = append(out, fmt.Sprintf("%s: ledger rho %g, rounds run %d; the audit log gives %g, %d", id, got.Rho, got.RoundsRun, rho[id], runs[id]))
		}
	}
	return out
}

// progressMonotone: a job's reported progress only goes down to at least the checkpoint it
// had before (a run resumes from its checkpoint).
func (e *evidence) progressMonotone() []string {
	var out []string
	for _, id := range sortedKeys(e.samples) {
		s := e.samples[id]
		for i := 1; i < len(s); i++ {
			if s[i].done >= s[i-1].done {
				continue
			}
			if s[i].done < s[i-1].ckpt {
				out = append(out, fmt.Sprintf("%s: progress went from %g to %g at %s with its checkpoint at %g",
					id, s[i-1].done, s[i].done, s[i].at.Format(time.RFC3339Nano), s[i-1].ckpt))
			}
		}
	}
	return out
}

// applyLine is the trace line that ends a round's apply phase (allocator/loop phases.run).
var applyLine = regexp.MustCompile(`phase done: round=(\d+) phase=4-apply`)

// countApplies adds the rounds whose apply phase one replica run's log shows.
func countApplies(log string, applies map[int]int) {
	for _, m := range applyLine.FindAllStringSubmatch(log, -1) {
		n, _ := strconv.Atoi(m[1])
		applies[n]++
	}
}

func sortedKeys[V any, K int | string](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
