package allocator

import (
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// A running job that the round moves to another model restarts there, with that model's GPUs
// in NVIDIA_VISIBLE_DEVICES, and the ledger counts the switch. Each model is two hosts of 2
// GPUs and each job comes twice, so both movers must find a V100 host of their own.
func TestAllocatorMigrates(t *testing.T) {
	st := startStack(t, []testenv.FakeGPUClient{
		{Name: "v100-1", Model: modelV100, Count: 2, Extra: `memory_mib = 16384`},
		{Name: "v100-2", Model: modelV100, Count: 2, Extra: `memory_mib = 16384`},
		{Name: "a100-1", Model: modelA100, Count: 2},
		{Name: "a100-2", Model: modelA100, Count: 2},
	})
	c, cs := st.Cluster, st.consul
	devices := map[string]map[string]bool{} // by node ID
	model := map[string]string{}            // by node ID
	for name, id := range c.NodeIDs {
		node, _, err := c.API.Nodes().Info(id, nil)
		if err != nil {
			t.Fatal(err)
		}
		devices[id] = map[string]bool{}
		for _, d := range node.NodeResources.Devices {
			model[id] = d.Name
			for _, inst := range d.Instances {
				devices[id][inst.ID] = true
			}
		}
		if model[id] == "" {
			t.Fatalf("client %s has no GPUs", name)
		}
	}
	proc := st.allocator(t, "fft-allocator",
		"-round", "2s", "-http-addr", "", "-log-level", "debug")
	jobspec := trainJobspec(t)
	pair := []string{"-1", "-2"}

	// mover runs well on both models and starts on the A100 (volume 2*100/4 = 50 there,
	// 2*100/3 = 67 on the V100).
	first := map[string]*api.Allocation{}
	for _, n := range pair {
		register(t, c.API, parseJob(t, c.API, jobspec, "mover"+n, `work = "100"
seconds = 600
throughput = "NVIDIA A100-SXM4-40GB=4,Tesla V100-SXM2-16GB=3"`))
	}
	for _, n := range pair {
		first[n] = waitAlloc(t, c.API, proc, "mover"+n, "running", "")
		if model[first[n].NodeID] != modelA100 {
			t.Fatalf("mover%s started on node %s, want an A100 client", n, first[n].NodeID)
		}
	}
	// picky crawls on the V100 (2*40/0.5 = 160 there, 20 on the A100): both jobs running with
	// mover on the V100 costs about 67 + 30 (switching) + 20, less than 50 + 160.
	for _, n := range pair {
		register(t, c.API, parseJob(t, c.API, jobspec, "picky"+n, `work = "40"
seconds = 600
throughput = "NVIDIA A100-SXM4-40GB=4,Tesla V100-SXM2-16GB=0.5"`))
	}
	for _, n := range pair {
		moved := waitAlloc(t, c.API, proc, "mover"+n, "running", first[n].ID)
		if model[moved.NodeID] != modelV100 {
			t.Errorf("mover%s restarted on node %s, want a V100 client", n, moved.NodeID)
		}
		for _, id := range testenv.VisibleDevices(t, c.API, taskName, moved) {
			if !devices[moved.NodeID][id] {
				t.Errorf("after the move NVIDIA_VISIBLE_DEVICES of mover%s holds %q, not a GPU of the V100 client it runs on", n, id)
			}
		}
		picky := waitAlloc(t, c.API, proc, "picky"+n, "running", "")
		if model[picky.NodeID] != modelA100 {
			t.Errorf("picky%s runs on node %s, want an A100 client", n, picky.NodeID)
		}
		var rec struct {
			Switches  int    `json:"switches"`
			LastModel string `json:"last_model"`
		}
		testenv.Eventually(t, 20*time.Second, 500*time.Millisecond, "the ledger counts mover"+n+"'s switch", func() error {
			readJob(t, cs, "default/mover"+n, &rec)
			if rec.Switches != 1 || rec.LastModel != modelV100 {
				return errorf("record %+v", rec)
			}
			return nil
		})
	}
}
