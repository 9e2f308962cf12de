package deviceplugin

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

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	modelV100 = "Tesla V100-SXM2-16GB"
	modelA100 = "NVIDIA A100-SXM4-40GB"
	modelH100 = "NVIDIA H100 80GB HBM3" // on no client
	taskName  = "show-gpus"
	groupName = "main"
)

func TestDevicePluginEndToEnd(t *testing.T) {
	clients := []testenv.FakeGPUClient{
		{Name: "v100", Model: modelV100, Count: 2, Extra: `memory_mib = 16384
        compute_capability = "7.0"`},
		{Name: "a100", Model: modelA100, Count: 4},
	}
	nomad := testenv.RequireNomad(t)
	t.Logf("Nomad agent: %s", nomad)
	c := testenv.StartCluster(t, nomad, testenv.TempDir(t), clients)

	// The API shows each client's fake model, with the plugin's attributes.
	devicesOf := map[string]*api.NodeDeviceResource{}
	for _, fc := range clients {
		node, _, err := c.API.Nodes().Info(c.NodeIDs[fc.Name], nil)
		if err != nil {
			t.Fatalf("node %s: %v", fc.Name, err)
		}
		if len(node.NodeResources.Devices) != 1 {
			t.Fatalf("node %s has %d device groups, want 1: %+v", fc.Name, len(node.NodeResources.Devices), node.NodeResources.Devices)
		}
		d := node.NodeResources.Devices[0]
		devicesOf[fc.Name] = d
		if d.Vendor != "nvidia" || d.Type != "gpu" || d.Name != fc.Model {
			t.Errorf("node %s device = %s/%s/%s, want nvidia/gpu/%s", fc.Name, d.Vendor, d.Type, d.Name, fc.Model)
		}
		if len(d.Instances) != fc.Count {
			t.Errorf("node %s has %d %s, want %d", fc.Name, len(d.Instances), fc.Model, fc.Count)
		}
		for _, inst := range d.Instances {
			if !inst.Healthy {
				t.Errorf("node %s device %s unhealthy: %s", fc.Name, inst.ID, inst.HealthDescription)
			}
		}
	}
	wantAttrs := map[string]string{
		"memory": "16384 MiB", "compute_capability": "7.0", "power_limit": "300 W",
		"cores_clock": "1410 MHz", "memory_clock": "1215 MHz", "pcie_gen": "4", "pcie_width": "16",
		"mig_mode": "unsupported", "driver_version": "550.54.15",
	}
	for name, want := range wantAttrs {
		attr := devicesOf["v100"].Attributes[name]
		if attr == nil || attr.String() != want {
			t.Errorf("V100 attribute %q = %v, want %q", name, attr, want)
		}
	}
	if got := devicesOf["a100"].Attributes["memory"]; got == nil || got.String() != "40960 MiB" {
		t.Errorf("A100 memory = %v, want 40960 MiB", got)
	}

	// The client reports the plugin's statistics for every GPU (Stats RPC in a real agent).
	testenv.Eventually(t, 30*time.Second, 500*time.Millisecond, "device statistics of the V100 client", func() error {
		hs, err := c.API.Nodes().Stats(c.NodeIDs["v100"], nil)
		if err != nil {
			return err
		}
		for _, g := range hs.DeviceStats {
			if g.Name != modelV100 || len(g.InstanceStats) != 2 {
				continue
			}
			for id, st := range g.InstanceStats {
				if st.Summary == nil || st.Stats == nil || st.Stats.Attributes["memory_used"] == nil {
					return fmt.Errorf("statistics of %s incomplete: %+v", id, st)
				}
			}
			return nil
		}
		return fmt.Errorf("no statistics for the 2 V100 yet: %+v", hs.DeviceStats)
	})

	jobspec, err := os.ReadFile(filepath.Join(repoRoot(t), "jobspecs", "gpu-model.nomad.hcl"))
	if err != nil {
		t.Fatalf("reading the jobspec: %v", err)
	}

	t.Run("placed on the matching model", func(t *testing.T) {
		for _, tc := range []struct {
			client string
			model  string
			count  int
		}{
			{"v100", modelV100, 2},
			{"a100", modelA100, 2},
		} {
			t.Run(tc.client, func(t *testing.T) {
				job := parseJob(t, c.API, string(jobspec), "gpu-model-"+tc.client, tc.model, tc.count)
				registerJob(t, c.API, job)
				alloc := waitAllocDone(t, c.API, *job.ID)
				if alloc.NodeID != c.NodeIDs[tc.client] {
					t.Errorf("placed on node %s, want the %s client %s", alloc.NodeID, tc.client, c.NodeIDs[tc.client])
				}
				got := testenv.VisibleDevices(t, c.API, taskName, alloc)
				if len(got) != tc.count {
					t.Fatalf("NVIDIA_VISIBLE_DEVICES has %d ids %q, want %d", len(got), got, tc.count)
				}
				offered := map[string]bool{}
				for _, inst := range devicesOf[tc.client].Instances {
					offered[inst.ID] = true
				}
				seen := map[string]bool{}
				for _, id := range got {
					if !offered[id] || seen[id] {
						t.Errorf("NVIDIA_VISIBLE_DEVICES id %q: not one of the %s client's GPUs, or repeated (%q)", id, tc.model, got)
					}
					seen[id] = true
				}
				// Nomad's own record of the allocation's devices matches what the task saw.
				var allocated []string
				for _, d := range alloc.AllocatedResources.Tasks[taskName].Devices {
					if d.Name != tc.model {
						t.Errorf("allocated device group %q, want %q", d.Name, tc.model)
					}
					allocated = append(allocated, d.DeviceIDs...)
				}
				sort.Strings(allocated)
				sorted := append([]string(nil), got...)
				sort.Strings(sorted)
				if strings.Join(allocated, ",") != strings.Join(sorted, ",") {
					t.Errorf("allocated devices %q, task saw %q", allocated, got)
				}
			})
		}
	})

	t.Run("missing model stays pending", func(t *testing.T) {
		job := parseJob(t, c.API, string(jobspec), "gpu-model-missing", modelH100, 1)
		evalID := registerJob(t, c.API, job)
		var eval *api.Evaluation
		testenv.Eventually(t, 60*time.Second, 250*time.Millisecond, "evaluation completes", func() error {
			e, _, err := c.API.Evaluations().Info(evalID, nil)
			if err != nil {
				return err
			}
			if e.Status != "complete" {
				return fmt.Errorf("evaluation %s", e.Status)
			}
			eval = e
			return nil
		})
		failed := eval.FailedTGAllocs[groupName]
		if failed == nil {
			t.Fatalf("evaluation has no placement failure for group %q: %+v", groupName, eval)
		}
		// Nomad's scheduler reason for nodes without the requested device.
		if n := failed.ConstraintFiltered["missing devices"]; n != 2 {
			t.Errorf(`ConstraintFiltered["missing devices"] = %d, want 2 (both clients); metrics: %+v`, n, failed)
		}
		if eval.BlockedEval == "" {
			t.Errorf("no blocked evaluation: the job is not waiting for capacity")
		}
		time.Sleep(2 * time.Second)
		j, _, err := c.API.Jobs().Info(*job.ID, nil)
		if err != nil {
			t.Fatalf("job info: %v", err)
		}
		if *j.Status != "pending" {
			t.Errorf("job status %q, want pending", *j.Status)
		}
		allocs, _, err := c.API.Jobs().Allocations(*job.ID, false, nil)
		if err != nil || len(allocs) != 0 {
			t.Errorf("job has allocations %v (%v), want none", allocs, err)
		}
	})
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// parseJob has the server parse the jobspec with the given variables, then renames the job.
func parseJob(t *testing.T, c *api.Client, jobspec, id, model string, count int) *api.Job {
	t.Helper()
	job, err := c.Jobs().ParseHCLOpts(&api.JobsParseRequest{
		JobHCL:       jobspec,
		Variables:    fmt.Sprintf("gpu_model = %q\ngpu_count = %d\n", model, count),
		Canonicalize: true,
	})
	if err != nil {
		t.Fatalf("parsing the jobspec: %v", err)
	}
	job.ID, job.Name = &id, &id
	return job
}

func registerJob(t *testing.T, c *api.Client, job *api.Job) string {
	t.Helper()
	resp, _, err := c.Jobs().Register(job, nil)
	if err != nil {
		t.Fatalf("registering %s: %v", *job.ID, err)
	}
	t.Cleanup(func() { _, _, _ = c.Jobs().Deregister(*job.ID, true, nil) })
	return resp.EvalID
}

// waitAllocDone waits for the job's single allocation to finish and requires success.
func waitAllocDone(t *testing.T, c *api.Client, jobID string) *api.Allocation {
	t.Helper()
	var alloc *api.Allocation
	testenv.Eventually(t, 90*time.Second, 500*time.Millisecond, "allocation of "+jobID+" completes", func() error {
		stubs, _, err := c.Jobs().Allocations(jobID, false, nil)
		if err != nil {
			return err
		}
		if len(stubs) != 1 {
			return fmt.Errorf("%d allocations", len(stubs))
		}
		a, _, err := c.Allocations().Info(stubs[0].ID, nil)
		if err != nil {
			return err
		}
		switch a.ClientStatus {
		case "complete":
			alloc = a
			return nil
		case "failed", "lost":
			t.Fatalf("allocation %s %s: task states %s", a.ID, a.ClientStatus, taskEvents(a))
		}
		return fmt.Errorf("allocation %s is %s", a.ID, a.ClientStatus)
	})
	return alloc
}

func taskEvents(a *api.Allocation) string {
	var b strings.Builder
	for task, st := range a.TaskStates {
		for _, e := range st.Events {
			fmt.Fprintf(&b, "\n  %s: %s: %s", task, e.Type, e.DisplayMessage)
		}
	}
	return b.String()
}
