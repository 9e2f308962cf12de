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

// A GPU a job runs on turns unhealthy in the device plugin (its fake health_file): Nomad
// reports the instance unhealthy, the allocator counts one A100 fewer, parks the job (audit
// reason UnhealthyGPU; the task gets its stop signal and checkpoints) and a later round starts
// it again, which Nomad places on the healthy GPU. Unlisted, the GPU is healthy again.
func TestUnhealthyGPUMovesTheJob(t *testing.T) {
	root := testenv.TempDir(t)
	health := filepath.Join(root, "unhealthy")
	st := startStack(t, []testenv.FakeGPUClient{{Name: "a100", Model: modelA100, Count: 2, HealthFile: health}})
	c, cs := st.Cluster, st.consul
	proc := st.allocator(t, "fft-allocator", "-round", "2s", "-http-addr", "", "-log-level", "debug")
	register(t, c.API, parseJob(t, c.API, trainJobspec(t), "train", `work = "100"
seconds = 600
gpu_count = 1`))
	first := waitAlloc(t, c.API, proc, "train", "running", "")
	bad := gpuOf(t, first)

	if err := os.WriteFile(health, []byte(bad+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	node := first.NodeID
	testenv.Eventually(t, 30*time.Second, 250*time.Millisecond, "Nomad reports "+bad+" unhealthy", func() error {
		if healthy(t, c.API, node, bad) {
			return fmt.Errorf("still healthy")
		}
		return nil
	})
	second := waitAllocWithin(t, 30*time.Second, c.API, proc, "train", "running", first.ID)
	if got := gpuOf(t, second); got == bad {
		t.Errorf("the job runs again on the unhealthy GPU %s", bad)
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

// gpuOf is the one GPU instance an allocation holds.
func gpuOf(t *testing.T, a *api.Allocation) string {
	t.Helper()
	for _, tr := range a.AllocatedResources.Tasks {
		for _, d := range tr.Devices {
			if len(d.DeviceIDs) == 1 {
				return d.DeviceIDs[0]
			}
		}
	}
	t.Fatalf("allocation %s holds no single GPU: %+v", a.ID, a.AllocatedResources)
	return ""
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
