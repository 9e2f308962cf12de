package allocator

import (
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// An operator's overrides against real agents: `fftctl park` stops a running job and no later
// round starts it, `fftctl resume` gives it back to the rounds, and `fftctl pin` keeps a job on
// the model named, although it runs faster elsewhere. Every round's audit line says so. Two
// hosts of each model: a pin names a model, and the round places it on either host.
func TestOperatorOverrides(t *testing.T) {
	st := startStack(t, []testenv.FakeGPUClient{
		{Name: "v100-1", Model: modelV100, Count: 2, Extra: `memory_mib = 16384`},
		{Name: "v100-2", Model: modelV100, Count: 2, Extra: `memory_mib = 16384`},
		{Name: "a100-1", Model: modelA100, Count: 2},
		{Name: "a100-2", Model: modelA100, Count: 2},
	})
	c, cs := st.Cluster, st.consul
	proc := st.allocator(t, "fft-allocator", "-round", "2s", "-http-addr", "", "-log-level", "debug")
	fftctl := testenv.MainBinary(t, "fftctl")
	ctl := func(args ...string) string {
		t.Helper()
		full := append([]string{args[0], "-consul-addr", st.consul.HTTP, "-consul-prefix", prefix}, args[1:]...)
		out, err := exec.Command(fftctl, full...).CombinedOutput()
		if err != nil {
			t.Fatalf("fftctl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	jobspec := trainJobspec(t)
	register(t, c.API, parseJob(t, c.API, jobspec, "held", "seconds = 600"))
	first := waitAlloc(t, c.API, proc, "held", "running", "")

	// Park it: its allocation stops and stays stopped across rounds.
	ctl("park", "-by", "e2e", "held")
	testenv.Eventually(t, 60*time.Second, 250*time.Millisecond, "the parked job stops", func() error {
		for _, s := range allocsOf(t, c.API, "held") {
			if s.ClientStatus == "running" || s.ClientStatus == "pending" {
				return fmt.Errorf("allocation %s is %s", s.ID, s.ClientStatus)
			}
		}
		return nil
	})
	var rec struct {
		Round int `json:"round"`
	}
	readKV(t, cs, prefix+"/ledger", &rec)
	parkedAt := rec.Round
	// Three more rounds: still parked, each saying why.
	testenv.Eventually(t, 60*time.Second, 500*time.Millisecond, "three rounds after the park", func() error {
		readKV(t, cs, prefix+"/ledger", &rec)
		if rec.Round < parkedAt+3 {
			return fmt.Errorf("at round %d", rec.Round)
		}
		return nil
	})
	for _, s := range allocsOf(t, c.API, "held") {
		if s.ClientStatus == "running" || s.ClientStatus == "pending" {
			t.Fatalf("the parked job runs again: allocation %s is %s", s.ID, s.ClientStatus)
		}
	}
	var last struct {
		Jobs []struct {
			ID, Model, Override string
			ReasonCode          string `json:"reason_code"`
		} `json:"jobs"`
	}
	readKV(t, cs, fmt.Sprintf("%s/rounds/%012d", prefix, rec.Round-1), &last)
	if len(last.Jobs) != 1 || last.Jobs[0].ReasonCode != "ParkedByOperator" || last.Jobs[0].Override != "park by e2e" {
		t.Errorf("audit line of a parked job: %+v", last.Jobs)
	}

	// Resume: a round starts it again.
	ctl("resume", "held")
	waitAlloc(t, c.API, proc, "held", "running", first.ID)

	// Pin a job that runs 4x faster on the A100 to the V100: it runs there.
	ctl("pin", "pinned", modelV100)
	register(t, c.API, parseJob(t, c.API, jobspec, "pinned", `seconds = 600
throughput = "NVIDIA A100-SXM4-40GB=4,Tesla V100-SXM2-16GB=1"`))
	alloc := waitAlloc(t, c.API, proc, "pinned", "running", "")
	if v100 := []string{c.NodeIDs["v100-1"], c.NodeIDs["v100-2"]}; !slices.Contains(v100, alloc.NodeID) {
		t.Errorf("the pinned job runs on node %s, want a V100 client %v", alloc.NodeID, v100)
	}
}
