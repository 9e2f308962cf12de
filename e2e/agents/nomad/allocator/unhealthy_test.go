package allocator

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// A GPU a job runs on turns unhealthy in the device plugin (its host's fake health_file):
// Nomad reports the instance unhealthy, the allocator counts one A100 fewer on that host,
// parks the job (audit reason UnhealthyGPU; the task gets its stop signal and checkpoints) and
// a later round starts it again on the other A100 host, the only one with two healthy GPUs
// left for its gang. Unlisted, the GPU is healthy again.
func TestUnhealthyGPUMovesTheJob(t *testing.T) {
	root := testenv.TempDir(t)
	healthFile := map[string]string{} // by client name
	var clients []testenv.FakeGPUClient
	for _, name := range []string{"a100-1", "a100-2"} {
		healthFile[name] = filepath.Join(root, "unhealthy-"+name)
		clients = append(clients, testenv.FakeGPUClient{Name: name, Model: modelA100, Count: 2, HealthFile: healthFile[name]})
	}
	st := startStack(t, clients)
	c, cs := st.Cluster, st.consul
	proc := st.allocator(t, "fft-allocator", "-round", "2s", "-http-addr", "", "-log-level", "debug")
	register(t, c.API, parseJob(t, c.API, trainJobspec(t), "train", `work = "100"
seconds = 600
gpu_count = 2`))
	first := waitAlloc(t, c.API, proc, "train", "running", "")
	node := first.NodeID
	var health string
	for name, id := range c.NodeIDs {
		if id == node {
			health = healthFile[name]
		}
	}
	if health == "" {
		t.Fatalf("the job runs on node %s, not an A100 client (%v)", node, c.NodeIDs)
	}
	held := gpusOf(first)
	if len(held) != 2 {
		t.Fatalf("the first allocation holds GPUs %q, want 2", held)
	}
	bad := held[0]

	if err := os.WriteFile(health, []byte(bad+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, 250*time.Millisecond, "Nomad reports "+bad+" unhealthy", func() error {
		if healthy(t, c.API, node, bad) {
			return fmt.Errorf("still healthy")
		}
		return nil
	})
	second := waitAllocWithin(t, 30*time.Second, c.API, proc, "train", "running", first.ID)
	if second.NodeID == node {
		t.Errorf("the job runs again on node %s, whose GPU %s is unhealthy; want the other A100 host", node, bad)
	}
	a, _, err := c.API.Allocations().Info(first.ID, nil)
	if err != nil || a.DesiredStatus != "stop" {
		t.Errorf("the allocation on the unhealthy GPU: %+v (%v), want stopped", a, err)
	}
	parked := false
	for _, r := range readRounds(t, cs) {
		for _, l := range r.Jobs {
			parked = parked || (l.ID == "default/train" && l.ReasonCode == "UnhealthyGPU" && l.Action == "park")
		}
	}
	if !parked {
		t.Error("no round parked the job with reason UnhealthyGPU")
	}

	if err := os.Remove(health); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, 250*time.Millisecond, "Nomad reports "+bad+" healthy again", func() error {
		if !healthy(t, c.API, node, bad) {
			return fmt.Errorf("still unhealthy")
		}
		return nil
	})
}

// gpusOf are the GPU instances an allocation holds.
func gpusOf(a *api.Allocation) []string {
	var ids []string
	for _, tr := range a.AllocatedResources.Tasks {
		for _, d := range tr.Devices {
			ids = append(ids, d.DeviceIDs...)
		}
	}
	return ids
}

func healthy(t *testing.T, c *api.Client, node, gpu string) bool {
	t.Helper()
	n, _, err := c.Nodes().Info(node, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range n.NodeResources.Devices {
		for _, inst := range d.Instances {
			if inst.ID == gpu {
				return inst.Healthy
			}
		}
	}
	t.Fatalf("node %s has no GPU %s", node, gpu)
	return false
}
