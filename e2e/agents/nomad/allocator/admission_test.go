package allocator

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// A plain jobspec, without the gate constraint, submitted as `nomad job run` does, gets no
// allocation before the round that selects it, although a V100 sits idle the whole time:
// its node pool ("default"; the clients are in "gpu") holds it, with Nomad's own placement
// failure. The first round that leaves it out holds it in the pool behind the gate (one write;
// later ones cost none); the selecting round lifts the gate and it runs on the chosen model.
func TestPlainJobHeldUntilSelected(t *testing.T) {
	// Two A100 hosts: plain has to wait for GPUs, not for a host big enough.
	st := startStack(t, []testenv.FakeGPUClient{
		{Name: "v100", Model: modelV100, Count: 2, Extra: `memory_mib = 16384`},
		{Name: "a100-1", Model: modelA100, Count: 2},
		{Name: "a100-2", Model: modelA100, Count: 2},
	})
	c, cs := st.Cluster, st.consul
	proc := st.allocator(t, "fft-allocator", "-round", "2s", "-http-addr", "", "-log-level", "debug")
	jobspec := trainJobspec(t)

	// first-1 and first-2 take both A100 hosts (2 GPUs each); plain runs on the A100 only, and
	// costs more (volume 2*400/4 = 200 against 50 each), so the rounds keep it waiting until
	// one of them is done.
	for _, id := range []string{"first-1", "first-2"} {
		register(t, c.API, parseJob(t, c.API, jobspec, id, `work = "100"
seconds = 20
throughput = "NVIDIA A100-SXM4-40GB=4"`))
		waitAlloc(t, c.API, proc, id, "running", "")
	}
	plain := parseJob(t, c.API, jobspec, "plain", `work = "400"
seconds = 3
throughput = "NVIDIA A100-SXM4-40GB=4"`)
	if len(plain.Constraints) != 0 || plain.NodePool != nil && *plain.NodePool != "" && *plain.NodePool != api.NodePoolDefault {
		t.Fatalf("the example jobspec is not plain: constraints %v, node pool %v", plain.Constraints, plain.NodePool)
	}
	evalID := register(t, c.API, plain)

	// Nomad's own reason: no node in the job's pool.
	testenv.Eventually(t, 60*time.Second, 250*time.Millisecond, "plain's evaluation records its placement failure", func() error {
		e, _, err := c.API.Evaluations().Info(evalID, nil)
		if err != nil {
			return err
		}
		failed := e.FailedTGAllocs["main"]
		if e.Status != "complete" || failed == nil {
			return fmt.Errorf("evaluation %s, failures %v", e.Status, e.FailedTGAllocs)
		}
		if failed.NodesEvaluated != 0 || failed.NodesInPool != 0 {
			t.Fatalf("plain's placement failure evaluated %d nodes (%d in its pool), want none: %+v", failed.NodesEvaluated, failed.NodesInPool, failed)
		}
		return nil
	})

	done := waitAlloc(t, c.API, proc, "plain", "complete", "")
	if a100 := []string{c.NodeIDs["a100-1"], c.NodeIDs["a100-2"]}; !slices.Contains(a100, done.NodeID) {
		t.Errorf("plain ran on node %s, want an A100 client %v", done.NodeID, a100)
	}
	job, _, err := c.API.Jobs().Info("plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The only constraint a start adds is the pin to the node the round placed it on.
	if *job.NodePool != gpuPool || len(job.Constraints) != 1 || job.Constraints[0].LTarget != "${node.unique.id}" ||
		job.Constraints[0].RTarget != done.NodeID {
		t.Errorf("plain after its start: node pool %q, constraints %v; want %q and the pin to node %s", *job.NodePool, job.Constraints, gpuPool, done.NodeID)
	}

	// The audit log: the first round that assigns plain started it, every earlier round that
	// saw it left it waiting (action keep), and all its allocations came after that round
	// started.
	var sel *roundRec
	waited := 0
	for _, r := range readRounds(t, cs) {
		for _, l := range r.Jobs {
			if l.ID != "default/plain" || sel != nil {
				continue
			}
			if l.Model == "" {
				waited++
				if l.Action != "keep" {
					t.Errorf("round %d: plain waited with action %q, want keep (no write)", r.Round, l.Action)
				}
				continue
			}
			if l.Action != "start" || l.Model != modelA100 {
				t.Errorf("round %d selected plain with action %q on %q, want start on %q", r.Round, l.Action, l.Model, modelA100)
			}
			sel = &r
		}
	}
	if sel == nil || waited == 0 {
		t.Fatalf("audit log: selecting round %v after %d waiting rounds; want plain to wait, then start", sel, waited)
	}
	selStart, err := time.Parse(time.RFC3339Nano, sel.Start)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range allocsOf(t, c.API, "plain") {
		if created := time.Unix(0, a.CreateTime); created.Before(selStart) {
			t.Errorf("allocation %s of plain was created at %s, before round %d (which selected it) started at %s",
				a.ID, created.UTC().Format(time.RFC3339Nano), sel.Round, sel.Start)
		}
	}
}

// A user's concurrent update of a managed job is not overwritten: nomadapi's
// TestAgentConcurrentUpdate (in the main module, which this module cannot import) runs the
// allocator's Nomad client against this cluster: observe, the user's update, apply (a conflict,
// the user's change intact), then observe and apply again (a start that keeps the change).
func TestConcurrentUpdateNotOverwritten(t *testing.T) {
	c := testenv.StartCluster(t, testenv.RequireNomad(t), testenv.TempDir(t),
		[]testenv.FakeGPUClient{{Name: "a100", Model: modelA100, Count: 2, NodePool: gpuPool}})
	out := testenv.RunMainTest(t, "allocator/nomadapi", "TestAgentConcurrentUpdate", "FFT_NOMAD_AGENT="+c.Server.HTTP)
	t.Logf("%s", out)
}
