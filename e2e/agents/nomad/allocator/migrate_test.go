package allocator

import (
	"testing"
	"time"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// A running job that the round moves to another model restarts there, with that model's GPUs
// in NVIDIA_VISIBLE_DEVICES, and the ledger counts the switch.
func TestAllocatorMigrates(t *testing.T) {
	st := startStack(t, []testenv.FakeGPUClient{
		{Name: "v100", Model: modelV100, Count: 2, Extra: `memory_mib = 16384`},
		{Name: "a100", Model: modelA100, Count: 2},
	})
	c, cs := st.Cluster, st.consul
	devices := map[string]map[string]bool{}
	for name, id := range c.NodeIDs {
		node, _, err := c.API.Nodes().Info(id, nil)
		if err != nil {
			t.Fatal(err)
		}
		devices[name] = map[string]bool{}
		for _, d := range node.NodeResources.Devices {
			for _, inst := range d.Instances {
				devices[name][inst.ID] = true
			}
		}
	}
	proc := st.allocator(t, "fft-allocator",
		"-round", "2s", "-http-addr", "", "-log-level", "debug")
	jobspec := trainJobspec(t)

	// mover runs well on both models and starts on the A100 (volume 2*100/4 = 50 there,
	// 2*100/3 = 67 on the V100).
	register(t, c.API, parseJob(t, c.API, jobspec, "mover", `work = "100"
seconds = 600
throughput = "NVIDIA A100-SXM4-40GB=4,Tesla V100-SXM2-16GB=3"`))
	first := waitAlloc(t, c.API, proc, "mover", "running", "")
	if first.NodeID != c.NodeIDs["a100"] {
		t.Fatalf("mover started on node %s, want the A100 client", first.NodeID)
	}
	// picky crawls on the V100 (2*40/0.5 = 160 there, 20 on the A100): both jobs running with
	// mover on the V100 costs about 67 + 30 (switching) + 20, less than 50 + 160.
	register(t, c.API, parseJob(t, c.API, jobspec, "picky", `work = "40"
seconds = 600
throughput = "NVIDIA A100-SXM4-40GB=4,Tesla V100-SXM2-16GB=0.5"`))

	moved := waitAlloc(t, c.API, proc, "mover", "running", first.ID)
	if moved.NodeID != c.NodeIDs["v100"] {
		t.Errorf("mover restarted on node %s, want the V100 client %s", moved.NodeID, c.NodeIDs["v100"])
	}
	for _, id := range testenv.VisibleDevices(t, c.API, taskName, moved) {
		if !devices["v100"][id] {
			t.Errorf("after the move NVIDIA_VISIBLE_DEVICES holds %q, not a V100 of the V100 client", id)
		}
	}
	picky := waitAlloc(t, c.API, proc, "picky", "running", "")
	if picky.NodeID != c.NodeIDs["a100"] {
		t.Errorf("picky runs on node %s, want the A100 client", picky.NodeID)
	}
	var rec struct {
		Switches  int    `json:"switches"`
		LastModel string `json:"last_model"`
	}
	testenv.Eventually(t, 20*time.Second, 500*time.Millisecond, "the ledger counts mover's switch", func() error {
		readJob(t, cs, "default/mover", &rec)
		if rec.Switches != 1 || rec.LastModel != modelV100 {
			return errorf("record %+v", rec)
		}
		return nil
	})
}
