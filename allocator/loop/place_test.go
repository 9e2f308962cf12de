package loop

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/placement"
)

func v100Hosts(sizes ...int) []placement.Host {
	out := make([]placement.Host, len(sizes))
	for k, n := range sizes {
		out[k] = placement.Host{ID: fmt.Sprintf("node-%d", k), Model: v100, GPUs: n}
	}
	return out
}

func lineOfRec(rec *RoundRecord, id string) JobAudit {
	for _, l := range rec.Jobs {
		if l.ID == id {
			return l
		}
	}
	return JobAudit{}
}

// The cluster: two V100 hosts of 2 GPUs, a 4-GPU job and a 1-GPU job.
// The 4-GPU job fits the model's 4 GPUs but no host: it is held as no-fit with
// the reason and never started, and the 1-GPU job runs in the first round.
func TestGangLargerThanEveryHost(t *testing.T) {
	h := &Harness{
		Hosts: v100Hosts(2, 2),
		Jobs: map[string]*Job{
			"default/big":   Ptr(NewJob("big").GPUs(4).TP(v100, 1).Obj()),
			"default/small": Ptr(NewJob("small").TP(v100, 1).Obj()),
		},
	}
	l := New(h, h, NewMemStore(true))
	for r := 0; r < 3; r++ {
		rec, err := l.RunRound(context.Background(), TriggerManual, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Assignment["default/small"] != v100 {
			t.Fatalf("round %d: small not running: %v", r, rec.Assignment)
		}
		big := lineOfRec(rec, "default/big")
		if _, runs := rec.Assignment["default/big"]; runs || big.ReasonCode != "NoFit" || !strings.Contains(big.Reason, "fits no host") {
			t.Fatalf("round %d: big %+v, want held as no-fit naming the hosts", r, big)
		}
		if got := lineOfRec(rec, "default/small").Hosts; len(got) != 1 || got[0].GPUs != 1 {
			t.Fatalf("round %d: small's hosts %v", r, got)
		}
	}
	for _, a := range h.Applied {
		if strings.Contains(a, " big ") {
			t.Fatalf("big was changed: %v", h.Applied)
		}
	}
}

// Two running 1-GPU jobs sit on two 4-GPU hosts; a 4-GPU job arrives. The
// model has 6 free GPUs but no host 4: the stage moves one small job next to
// the other, and the move's price is in the record.
func TestConsolidationMakesRoom(t *testing.T) {
	h := &Harness{Hosts: v100Hosts(4, 4), Jobs: map[string]*Job{}}
	for k, name := range []string{"a", "b"} {
		j := NewJob(name).Work(1000).TP(v100, 1).Running(v100).Obj()
		j.Slots, j.Pinned = []placement.Slot{{Host: fmt.Sprintf("node-%d", k), GPUs: 1}}, []string{fmt.Sprintf("node-%d", k)}
		h.Set(j)
	}
	h.Set(NewJob("gang").GPUs(4).Work(1000).TP(v100, 4).Obj())
	l := New(h, h, NewMemStore(true))
	rec, err := l.RunRound(context.Background(), TriggerManual, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Assignment) != 3 {
		t.Fatalf("assignment %v, want all three running", rec.Assignment)
	}
	if len(rec.Moves) != 1 || rec.Moves[0].For != "default/gang" || !(rec.Moves[0].Price > 0) {
		t.Fatalf("moves %+v, want one priced move for the gang", rec.Moves)
	}
	moved := rec.Moves[0].Job
	if a := lineOfRec(rec, moved).Action; a != ActionMigrate {
		t.Fatalf("moved job %s has action %s, want migrate", moved, a)
	}
	if g := lineOfRec(rec, "default/gang").Hosts; placement.Hosts(g) != 1 {
		t.Fatalf("gang on %v, want one host", g)
	}
	checkHarnessHosts(t, h)
}

// When the only move that would make room costs more than the GPUs it frees
// (a restart of three rounds), the round is decided again without the gang's option,
// and the 1-GPU job takes a free GPU instead of the gang that cannot use it;
// the last GPU stays idle, since no waiting job fits it.
func TestRedecideWhenNothingCanBePlaced(t *testing.T) {
	h := &Harness{Hosts: v100Hosts(2, 2), Jobs: map[string]*Job{}}
	for k, name := range []string{"a", "b"} {
		j := NewJob(name).Work(1000).TP(v100, 1).Running(v100).Obj()
		j.Slots, j.Pinned = []placement.Slot{{Host: fmt.Sprintf("node-%d", k), GPUs: 1}}, []string{fmt.Sprintf("node-%d", k)}
		h.Set(j)
	}
	h.Set(NewJob("gang").GPUs(2).Work(1000).TP(v100, 2).Obj())
	h.Set(NewJob("small").Work(1000).TP(v100, 1).Obj())
	cfg := allocator.DefaultConfig()
	cfg.RestartSeconds = 3 * cfg.RoundSeconds
	l := New(h, h, NewMemStore(true), WithConfig(cfg))
	rec, err := l.RunRound(context.Background(), TriggerManual, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Redecided == 0 {
		t.Fatalf("round not decided again: %+v", rec.Assignment)
	}
	if rec.Assignment["default/small"] != v100 || rec.IdleGPUs != 1 {
		t.Fatalf("assignment %v, idle %d: want small on the free GPU", rec.Assignment, rec.IdleGPUs)
	}
	if g := lineOfRec(rec, "default/gang"); g.ReasonCode != CodeUnplaceable {
		t.Fatalf("gang %+v, want %s", g, CodeUnplaceable)
	}
	checkHarnessHosts(t, h)
}

// checkHarnessHosts: every host holds at most its GPUs.
func checkHarnessHosts(t *testing.T, h *Harness) {
	t.Helper()
	used := map[string]int{}
	for _, j := range h.Jobs {
		if len(j.Allocs) == 0 {
			continue
		}
		n := 0
		for _, s := range j.Slots {
			used[s.Host] += s.GPUs
			n += s.GPUs
		}
		if n != j.Spec.GPUs {
			t.Fatalf("job %s holds %d GPUs on %v, wants %d", j.ID, n, j.Slots, j.Spec.GPUs)
		}
	}
	for _, host := range h.Hosts {
		if used[host.ID] > host.GPUs {
			t.Fatalf("host %s: %d GPUs used of %d", host.ID, used[host.ID], host.GPUs)
		}
	}
}

// Property: over random clusters and workloads, run through the one round
// loop for several rounds, every applied decision fits each host; no GPU
// idles while a waiting job could be placed on it; and a job that stays on
// its model stays on its hosts unless the record has a move for it.
func TestPlacementProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	moves, redecided := 0, 0
	defer func() { t.Logf("150 clusters x 6 rounds: %d moves, %d decisions made again", moves, redecided) }()
	for n := 0; n < 150; n++ {
		var sizes []int
		for k := 0; k < 1+r.IntN(4); k++ {
			sizes = append(sizes, []int{2, 4, 8}[r.IntN(3)])
		}
		h := &Harness{Hosts: v100Hosts(sizes...), Jobs: map[string]*Job{}}
		for k := 0; k < 1+r.IntN(10); k++ {
			d := []int{1, 1, 1, 2, 2, 4, 8}[r.IntN(7)]
			h.Set(NewJob(fmt.Sprintf("j%d", k)).GPUs(d).Work(float64(5+r.IntN(50))).TP(v100, float64(d)*(0.5+r.Float64())).Obj())
		}
		l := New(h, h, NewMemStore(true))
		for round := 0; round < 6; round++ {
			if r.IntN(2) == 0 { // an arrival, so running jobs fragment the hosts
				d := []int{1, 2, 4}[r.IntN(3)]
				h.Set(NewJob(fmt.Sprintf("late%d", round)).GPUs(d).Work(float64(5+r.IntN(50))).TP(v100, float64(d)).Obj())
			}
			before := map[string][]placement.Slot{}
			for id, j := range h.Jobs {
				if len(j.Allocs) > 0 {
					before[id] = j.Slots
				}
			}
			rec, err := l.RunRound(context.Background(), TriggerManual, nil)
			if err != nil {
				t.Fatal(err)
			}
			checkHarnessHosts(t, h)
			moves, redecided = moves+len(rec.Moves), redecided+rec.Redecided
			moved := map[string]bool{}
			for _, m := range rec.Moves {
				moved[m.Job] = true
			}
			for id, slots := range before {
				j := h.Jobs[id]
				if len(j.Allocs) > 0 && j.RunningModel == v100 && !sameSlots(slots, j.Slots) && !moved[id] {
					t.Fatalf("case %d round %d: %s left %v for %v without a move in the record", n, round, id, slots, j.Slots)
				}
			}
			checkNoIdleBesideWaiting(t, h, rec)
		}
	}
}

// checkNoIdleBesideWaiting: no waiting job that may run on the model fits
// the free GPUs of one host.
func checkNoIdleBesideWaiting(t *testing.T, h *Harness, rec *RoundRecord) {
	t.Helper()
	free := map[string]int{}
	for _, host := range h.Hosts {
		free[host.ID] = host.GPUs
	}
	for _, j := range h.Jobs {
		if len(j.Allocs) > 0 {
			for _, s := range j.Slots {
				free[s.Host] -= s.GPUs
			}
		}
	}
	for _, line := range rec.Jobs {
		j := h.Jobs[line.ID]
		if line.Model != "" || j == nil || line.ReasonCode == "NoFit" || line.ReasonCode == "Done" {
			continue
		}
		for host, f := range free {
			if f >= j.Spec.GPUs {
				t.Fatalf("round %d: %s (%d GPUs, %s) waits beside %d free GPUs on %s", rec.Round, line.ID, j.Spec.GPUs, line.ReasonCode, f, host)
			}
		}
	}
}

// A job started and pinned to a host where Nomad refused to place it (its
// evaluation failed there) is placed on another host, and its audit line
// carries Nomad's reason.
func TestRefusedPlacementMovesElsewhere(t *testing.T) {
	h := &Harness{Hosts: v100Hosts(2, 2), Jobs: map[string]*Job{}}
	j := NewJob("a").Work(1000).TP(v100, 1).Ungated(v100).Obj()
	j.Pinned, j.Refused = []string{"node-0"}, `task group "train": memory exhausted on 1 node(s)`
	h.Set(j)
	rec, err := New(h, h, NewMemStore(true)).RunRound(context.Background(), TriggerManual, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := lineOfRec(rec, "default/a")
	if len(l.Hosts) != 1 || l.Hosts[0].Host != "node-1" || l.Refused == "" || l.Action != ActionStart {
		t.Fatalf("line %+v, want a start on node-1 with Nomad's reason", l)
	}
	if got := h.Jobs["default/a"].Pinned; len(got) != 1 || got[0] != "node-1" {
		t.Fatalf("pinned to %v, want node-1", got)
	}
}

// A job whose own constraints no host meets: Nomad refuses it on each host it
// is pinned to. The rounds try each host once, then hold the job as
// unplaceable with Nomad's reason (its GPUs go to others) until the refusals
// age out, instead of starting it on another host every round.
func TestRefusedEverywhereWaits(t *testing.T) {
	const why = `task group "train": constraint ${meta.rack} = b filtered 2 node(s)`
	h := &Harness{Hosts: v100Hosts(2, 2), Refuse: func(job, _ string) string {
		if job == "default/a" {
			return why
		}
		return ""
	}}
	h.Set(NewJob("a").Work(1000).TP(v100, 1).Obj())
	l := New(h, h, NewMemStore(true))
	tried := map[string]bool{}
	waited := 0
	for round := 0; round < 2+refusalRounds; round++ {
		rec, err := l.RunRound(context.Background(), TriggerManual, nil)
		if err != nil {
			t.Fatal(err)
		}
		line := lineOfRec(rec, "default/a")
		t.Logf("round %d: model %q hosts %+v code %s", round, line.Model, line.Hosts, line.ReasonCode)
		switch {
		case line.Model != "":
			if len(line.Hosts) != 1 || tried[line.Hosts[0].Host] && waited == 0 {
				t.Fatalf("round %d placed a on %+v again before its refusals aged out (tried %v)", round, line.Hosts, tried)
			}
			tried[line.Hosts[0].Host] = true
		case line.ReasonCode == CodeUnplaceable:
			waited++
			if !strings.Contains(line.Reason, "Nomad refused") || !strings.Contains(line.Reason, "meta.rack") {
				t.Errorf("round %d: reason %q does not give Nomad's refusal", round, line.Reason)
			}
		default:
			t.Fatalf("round %d: a waits for %s (%s), want unplaceable", round, line.ReasonCode, line.Reason)
		}
	}
	if len(tried) != 2 {
		t.Errorf("tried hosts %v, want both before waiting", tried)
	}
	if waited < refusalRounds-2 || waited > refusalRounds-1 {
		t.Errorf("a waited %d rounds, want about %d, then tried again", waited, refusalRounds)
	}
}

// A job whose allocations lie on several hosts is credited its
// fft.throughput_spread on the model (progress and rho's step); on one host,
// or without the key, its fft.throughput.
func TestSpreadJobCreditedItsSpreadRate(t *testing.T) {
	cases := []struct {
		name   string
		hosts  []placement.Host
		pieces []int
		spread float64 // 0: not declared
		want   float64
	}{
		{"two hosts, spread declared", v100Hosts(2, 2), []int{2, 2}, 1, 1},
		{"two hosts, none declared", v100Hosts(2, 2), []int{2, 2}, 0, 4},
		{"one host, spread declared", v100Hosts(4), []int{2, 2}, 1, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := &Harness{Hosts: tc.hosts, Jobs: map[string]*Job{}}
			j := NewJob("gang").GPUs(4).Work(1000).TP(v100, 4).Obj()
			j.Pieces = tc.pieces
			if tc.spread > 0 {
				j.Spec.SpreadThroughput = map[string]float64{v100: tc.spread}
			}
			h.Set(j)
			store := NewMemStore(true)
			l := New(h, h, store)
			rec, err := l.RunRound(context.Background(), TriggerManual, nil)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Assignment["default/gang"] != v100 {
				t.Fatalf("gang not running: %v", rec.Assignment)
			}
			c := store.Stored().Jobs["default/gang"].Credit
			if c == nil || c.Done != tc.want {
				t.Fatalf("credit %+v, want done %g", c, tc.want)
			}
		})
	}
}
