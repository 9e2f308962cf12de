package allocator

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// hostLine is one GPU node as a round record lists it.
type hostLine struct {
	ID    string         `json:"id"`
	Model string         `json:"model"`
	GPUs  int            `json:"gpus"`
	Jobs  map[string]int `json:"jobs"`
}

// slotLine is one allocation of a job on a host, as a job line of a round record lists it.
type slotLine struct {
	Host string `json:"host"`
	GPUs int    `json:"gpus"`
}

// hostsRec is the part of a round record the hosts tests read.
type hostsRec struct {
	Round int        `json:"round"`
	Hosts []hostLine `json:"hosts"`
	Moves []struct {
		Job   string  `json:"job"`
		For   string  `json:"for"`
		Price float64 `json:"price_gpu_rounds"`
	} `json:"moves"`
	Jobs []struct {
		ID         string     `json:"id"`
		Model      string     `json:"model"`
		Action     string     `json:"action"`
		ReasonCode string     `json:"reason_code"`
		Reason     string     `json:"reason"`
		Refused    string     `json:"refused"`
		GPUs       int        `json:"gpus"`
		Hosts      []slotLine `json:"hosts"`
	} `json:"jobs"`
}

func readHostRounds(t *testing.T, cs *testenv.Consul) []hostsRec {
	t.Helper()
	var out []hostsRec
	for _, raw := range readRoundsRaw(t, cs) {
		var r hostsRec
		decodeRecord(t, raw, &r)
		out = append(out, r)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Round < out[b].Round })
	return out
}

// twoV100Hosts is the cluster: one model on two clients of 2 GPUs each.
func twoV100Hosts() []testenv.FakeGPUClient {
	return []testenv.FakeGPUClient{
		{Name: "v100-a", Model: modelV100, Count: 2, Extra: `memory_mib = 16384`},
		{Name: "v100-b", Model: modelV100, Count: 2, Extra: `memory_mib = 16384`},
	}
}

// A 4-GPU job and a 1-GPU job on two V100 hosts of 2 GPUs: the model has 4 GPUs, but no
// host does. The 1-GPU job runs within 2 rounds, on the node its record names; the 4-GPU job
// is never started (held as no-fit, its reason names the hosts); and no round leaves a job
// that fits a host waiting beside idle GPUs there.
func TestHostsGangLargerThanEveryHost(t *testing.T) {
	st := startStack(t, twoV100Hosts())
	c, cs := st.Cluster, st.consul
	proc := st.allocator(t, "fft-allocator", "-round", "2s", "-http-addr", "", "-log-level", "debug")
	vars := func(gpus int) string {
		return fmt.Sprintf("work = \"100\"\nseconds = 600\ngpu_count = %d\nthroughput = \"%s=1\"", gpus, modelV100)
	}
	register(t, c.API, parseJob(t, c.API, trainJobspec(t), "big", vars(4)))
	register(t, c.API, parseJob(t, c.API, trainJobspec(t), "small", vars(1)))

	small := waitAllocWithin(t, 60*time.Second, c.API, proc, "small", "running", "")
	testenv.Eventually(t, 30*time.Second, 500*time.Millisecond, "5 rounds recorded", func() error {
		if n := len(readHostRounds(t, cs)); n < 5 {
			return fmt.Errorf("%d rounds", n)
		}
		return nil
	})
	rounds := readHostRounds(t, cs)
	first := -1
	for _, r := range rounds {
		if len(r.Hosts) != 2 {
			t.Fatalf("round %d observed hosts %+v, want the two V100 clients", r.Round, r.Hosts)
		}
		for _, l := range r.Jobs {
			switch l.ID {
			case "default/small":
				if l.Model != "" && first < 0 {
					first = r.Round
					if len(l.Hosts) != 1 || l.Hosts[0].Host != small.NodeID {
						t.Errorf("round %d placed small on %+v; Nomad runs it on node %s", r.Round, l.Hosts, small.NodeID)
					}
				}
			case "default/big":
				if l.Model != "" || l.ReasonCode != "NoFit" {
					t.Errorf("round %d: big %+v, want held as no-fit", r.Round, l)
				}
			}
		}
		checkNoPlaceableWait(t, r)
	}
	if first < 0 || first-rounds[0].Round > 1 {
		t.Errorf("small first ran in round %d (first round %d), want within 2 rounds", first, rounds[0].Round)
	}
	if n := len(allocsOf(t, c.API, "big")); n != 0 {
		t.Errorf("big has %d allocations, want none", n)
	}
}

// checkNoPlaceableWait fails if a waiting job that is not held as no-fit fits the free GPUs
// of one host of the round (as observed, less what the round placed).
func checkNoPlaceableWait(t *testing.T, r hostsRec) {
	t.Helper()
	free := map[string]int{}
	for _, h := range r.Hosts {
		free[h.ID] = h.GPUs
	}
	for _, l := range r.Jobs {
		for _, s := range l.Hosts {
			free[s.Host] -= s.GPUs
		}
	}
	for _, l := range r.Jobs {
		if l.Model != "" || l.GPUs == 0 || l.ReasonCode == "NoFit" || l.ReasonCode == "Done" {
			continue
		}
		for h, f := range free {
			if f >= l.GPUs {
				t.Errorf("round %d: %s (%d GPUs, %s) waits beside %d free GPUs on %s", r.Round, l.ID, l.GPUs, l.ReasonCode, f, h)
			}
		}
	}
}

// Three 1-GPU jobs fill one V100 host and half of the other; one of the two on the full host
// finishes, leaving 1 free GPU on each host; a 2-GPU job arrives. The round moves one small
// job next to the other (its price in the record), the gang gets a whole host, and Nomad runs
// every job on the node the record names.
//
// The rounds last 2 s here, so the default 30 s restart would price a move at 15 GPU-rounds,
// more than the gang's 2 GPUs gain: the stage would rightly decide the round again instead.
// The engine is told a 0.2 s restart, a tenth of a round, as 30 s is of the default 300 s.
func TestHostsConsolidation(t *testing.T) {
	st := startStack(t, twoV100Hosts())
	c, cs := st.Cluster, st.consul
	cfg := filepath.Join(st.root, "consolidate.hcl")
	if err := os.WriteFile(cfg, []byte("engine {\n  restart_seconds = 0.2\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	proc := st.allocator(t, "fft-allocator", "-round", "2s", "-http-addr", "", "-log-level", "debug", "-config", cfg)
	vars := func(gpus, seconds int, work string) string {
		return fmt.Sprintf("work = %q\nseconds = %d\ngpu_count = %d\nthroughput = \"%s=1\"", work, seconds, gpus, modelV100)
	}
	for _, id := range []string{"x", "y", "z"} {
		seconds := 600
		if id == "y" {
			seconds = 1 // y finishes almost at once
		}
		register(t, c.API, parseJob(t, c.API, trainJobspec(t), id, vars(1, seconds, "1000")))
	}
	for _, id := range []string{"x", "z"} {
		waitAlloc(t, c.API, proc, id, "running", "")
	}
	testenv.Eventually(t, 60*time.Second, 250*time.Millisecond, "y completes", func() error {
		for _, s := range allocsOf(t, c.API, "y") {
			if s.ClientStatus == "complete" {
				return nil
			}
		}
		return fmt.Errorf("not yet")
	})
	// x and z now hold one GPU on each host, or both on one host (then no move is needed).
	nodes := map[string]bool{}
	for _, id := range []string{"x", "z"} {
		for _, s := range allocsOf(t, c.API, id) {
			if s.ClientStatus == "running" {
				nodes[s.NodeID] = true
			}
		}
	}
	if len(nodes) != 2 {
		t.Skipf("x and z share a host (%v): the placement left no fragmentation to consolidate", nodes)
	}
	register(t, c.API, parseJob(t, c.API, trainJobspec(t), "gang", vars(2, 600, "1000")))
	gang := waitAllocWithin(t, 90*time.Second, c.API, proc, "gang", "running", "")

	var moved string
	for _, r := range readHostRounds(t, cs) {
		for _, m := range r.Moves {
			if m.For == "default/gang" {
				moved = m.Job
				if !(m.Price > 0) {
					t.Errorf("round %d: move %+v has no price", r.Round, m)
				}
			}
		}
	}
	if moved == "" {
		t.Fatal("no round recorded a move for the gang")
	}
	// Nomad agrees: the gang's host holds only the gang, the moved job runs beside the other.
	running := map[string]string{}
	testenv.Eventually(t, 60*time.Second, 500*time.Millisecond, "x and z run on one host", func() error {
		running = map[string]string{}
		for _, id := range []string{"x", "z"} {
			for _, s := range allocsOf(t, c.API, id) {
				if s.ClientStatus == "running" && s.DesiredStatus == api.AllocDesiredStatusRun {
					running[id] = s.NodeID
				}
			}
		}
		if len(running) != 2 || running["x"] != running["z"] {
			return fmt.Errorf("x and z on %v", running)
		}
		return nil
	})
	if running["x"] == gang.NodeID {
		t.Errorf("the gang shares node %s with x and z", gang.NodeID)
	}
}

// A placement Nomad refuses: the job's own constraint (a node name) rules out the host the
// stage packs it onto. One V100 host already runs a 1-GPU job, so best-fit puts the new
// 1-GPU job beside it; the job may only run on the other host. Nomad fails the pinned
// evaluation; the next round records Nomad's reason, pins the job to the other host, and
// Nomad runs it there. Then a job whose constraint no node meets waits, once refused on
// every host.
func TestHostsNomadRefusal(t *testing.T) {
	st := startStack(t, twoV100Hosts())
	c, cs := st.Cluster, st.consul
	proc := st.allocator(t, "fft-allocator", "-round", "2s", "-http-addr", "", "-log-level", "debug")
	vars := fmt.Sprintf("work = \"1000\"\nseconds = 600\ngpu_count = 1\nthroughput = \"%s=1\"", modelV100)
	register(t, c.API, parseJob(t, c.API, trainJobspec(t), "anchor", vars))
	anchor := waitAlloc(t, c.API, proc, "anchor", "running", "")
	var other *api.Node
	for _, id := range c.NodeIDs {
		if id != anchor.NodeID {
			n, _, err := c.API.Nodes().Info(id, nil)
			if err != nil {
				t.Fatalf("reading node %s: %v", id, err)
			}
			other = n
		}
	}
	picky := parseJob(t, c.API, trainJobspec(t), "picky", vars)
	picky.Constraints = append(picky.Constraints, &api.Constraint{LTarget: "${node.unique.name}", RTarget: other.Name, Operand: "="})
	register(t, c.API, picky)
	runs := waitAlloc(t, c.API, proc, "picky", "running", "")
	if runs.NodeID != other.ID {
		t.Fatalf("picky runs on node %s, want %s (%s), the only node its constraint allows", runs.NodeID, other.ID, other.Name)
	}

	start, refused := -1, -1
	var reason string
	for _, r := range readHostRounds(t, cs) {
		for _, l := range r.Jobs {
			if l.ID != "default/picky" {
				continue
			}
			if start < 0 && len(l.Hosts) > 0 {
				start = r.Round
				if l.Hosts[0].Host != anchor.NodeID {
					t.Fatalf("round %d placed picky on %+v, not beside anchor on %s: the test needs the refused host first", r.Round, l.Hosts, anchor.NodeID)
				}
			}
			if refused < 0 && l.Refused != "" {
				refused, reason = r.Round, l.Refused
				if len(l.Hosts) != 1 || l.Hosts[0].Host != other.ID {
					t.Errorf("round %d: refused picky placed on %+v, want %s", r.Round, l.Hosts, other.ID)
				}
			}
		}
	}
	if start < 0 || refused < 0 {
		t.Fatalf("picky started in round %d, refusal recorded in round %d: want both", start, refused)
	}
	if refused != start+1 {
		t.Errorf("Nomad's refusal of round %d's placement recorded in round %d, want the next round", start, refused)
	}
	if !strings.Contains(reason, "node.unique.name") || !strings.Contains(reason, "filtered") {
		t.Errorf("recorded reason %q does not name the constraint that filtered the node", reason)
	}

	// A job no node admits is tried on each host once, then waits as unplaceable with
	// Nomad's reason instead of being started on another host every round.
	nowhere := parseJob(t, c.API, trainJobspec(t), "nowhere", vars)
	nowhere.Constraints = append(nowhere.Constraints, &api.Constraint{LTarget: "${node.unique.name}", RTarget: "no-such-node", Operand: "="})
	register(t, c.API, nowhere)
	var starts, waits int
	testenv.Eventually(t, 60*time.Second, time.Second, "nowhere waits as unplaceable for 3 rounds", func() error {
		starts, waits = 0, 0
		for _, r := range readHostRounds(t, cs) {
			for _, l := range r.Jobs {
				switch {
				case l.ID != "default/nowhere":
				case l.Model != "":
					starts++
				case l.ReasonCode == "Unplaceable" && strings.Contains(l.Reason, "Nomad refused"):
					waits++
				}
			}
		}
		if waits < 3 {
			return fmt.Errorf("%d rounds placed it, %d waited", starts, waits)
		}
		return nil
	})
	if starts > 2 {
		t.Errorf("nowhere was placed in %d rounds, want at most one per host (2)", starts)
	}
	if n := len(allocsOf(t, c.API, "nowhere")); n != 0 {
		t.Errorf("nowhere has %d allocations, want none", n)
	}
}
