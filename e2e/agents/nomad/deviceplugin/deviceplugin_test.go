package deviceplugin

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.CleanupPluginDir()
	os.Exit(code)
}

const (
	modelV100 = "Tesla V100-SXM2-16GB"
	modelA100 = "NVIDIA A100-SXM4-40GB"
	modelH100 = "NVIDIA H100 80GB HBM3" // on no client
	taskName  = "show-gpus"
	groupName = "main"
)

// fakeClient is one Nomad client whose plugin presents Count GPUs of Model.
type fakeClient struct {
	name  string
	model string
	count int
	extra string // more HCL in the fake gpu block
}

// cluster is one Nomad server and the clients, each on its own ports and data dir.
type cluster struct {
	server  *testenv.Agent
	api     *api.Client
	nodeIDs map[string]string // client name → node ID
}

func startCluster(t *testing.T, clients []fakeClient) *cluster {
	t.Helper()
	nomad := testenv.RequireNomad(t)
	t.Logf("Nomad agent: %s", nomad)
	pluginDir := testenv.PluginDir(t)
	root := testenv.TempDir(t)

	ports := testenv.FreePorts(t, 3*(1+len(clients)))
	at := func(i int) testenv.AgentPorts {
		return testenv.AgentPorts{HTTP: ports[3*i], RPC: ports[3*i+1], Serf: ports[3*i+2]}
	}
	common := func(name string, p testenv.AgentPorts) string {
		dataDir := filepath.Join(root, name)
		return fmt.Sprintf(`
name                 = %q
data_dir             = %q
bind_addr            = "127.0.0.1"
log_level            = "DEBUG"
disable_update_check = true
ports {
  http = %d
  rpc  = %d
  serf = %d
}
advertise {
  http = "127.0.0.1"
  rpc  = "127.0.0.1"
  serf = "127.0.0.1"
}
consul {
  auto_advertise   = false
  server_auto_join = false
  client_auto_join = false
}
`, name, dataDir, p.HTTP, p.RPC, p.Serf)
	}

	sp := at(0)
	server := testenv.StartAgent(t, nomad, "server", root, sp, common("fft-e2e-server", sp)+`
server {
  enabled          = true
  bootstrap_expect = 1
}
`)
	c := &cluster{server: server, api: server.Client(t), nodeIDs: map[string]string{}}
	testenv.Eventually(t, 60*time.Second, 250*time.Millisecond, "server elects itself", func() error {
		if server.Exited() {
			t.Fatalf("the Nomad server exited")
		}
		leader, err := c.api.Status().Leader()
		if err != nil || leader == "" {
			return fmt.Errorf("no leader yet (%v)", err)
		}
		return nil
	})

	var agents []*testenv.Agent
	for i, fc := range clients {
		p := at(i + 1)
		name := "fft-e2e-" + fc.name
		agents = append(agents, testenv.StartAgent(t, nomad, fc.name, root, p, common(name, p)+fmt.Sprintf(`
plugin_dir = %q
client {
  enabled           = true
  servers           = [%q]
  network_interface = "lo"
  cgroup_parent     = "fft-e2e-%s"
}
plugin "raw_exec" {
  config {
    enabled    = true
    no_cgroups = true
  }
}
plugin "nomad-device-fft" {
  config {
    fingerprint_period = "5s"
    fake {
      gpu {
        model = %q
        count = %d
        %s
      }
    }
  }
}
`, pluginDir, server.RPCAddr, fc.name, fc.model, fc.count, fc.extra)))
	}

	// Every client registers, ready, with the plugin's devices.
	testenv.Eventually(t, 120*time.Second, 500*time.Millisecond, "clients ready with devices", func() error {
		for _, a := range agents {
			if a.Exited() {
				t.Fatalf("the Nomad client %s exited", a.Name)
			}
		}
		nodes, _, err := c.api.Nodes().List(nil)
		if err != nil {
			return err
		}
		for _, fc := range clients {
			want := "fft-e2e-" + fc.name
			var found *api.NodeListStub
			for _, n := range nodes {
				if n.Name == want {
					found = n
				}
			}
			if found == nil || found.Status != "ready" {
				return fmt.Errorf("node %s not ready (%v)", want, found)
			}
			node, _, err := c.api.Nodes().Info(found.ID, nil)
			if err != nil {
				return err
			}
			if node.NodeResources == nil || len(node.NodeResources.Devices) == 0 {
				return fmt.Errorf("node %s has no devices yet", want)
			}
			c.nodeIDs[fc.name] = found.ID
		}
		return nil
	})
	return c
}

func TestDevicePluginEndToEnd(t *testing.T) {
	clients := []fakeClient{
		{name: "v100", model: modelV100, count: 2, extra: `memory_mib = 16384
        compute_capability = "7.0"`},
		{name: "a100", model: modelA100, count: 4},
	}
	c := startCluster(t, clients)

	// The API shows each client's fake model, with the plugin's attributes.
	devicesOf := map[string]*api.NodeDeviceResource{}
	for _, fc := range clients {
		node, _, err := c.api.Nodes().Info(c.nodeIDs[fc.name], nil)
		if err != nil {
			t.Fatalf("node %s: %v", fc.name, err)
		}
		if len(node.NodeResources.Devices) != 1 {
			t.Fatalf("node %s has %d device groups, want 1: %+v", fc.name, len(node.NodeResources.Devices), node.NodeResources.Devices)
		}
		d := node.NodeResources.Devices[0]
		devicesOf[fc.name] = d
		if d.Vendor != "nvidia" || d.Type != "gpu" || d.Name != fc.model {
			t.Errorf("node %s device = %s/%s/%s, want nvidia/gpu/%s", fc.name, d.Vendor, d.Type, d.Name, fc.model)
		}
		if len(d.Instances) != fc.count {
			t.Errorf("node %s has %d %s, want %d", fc.name, len(d.Instances), fc.model, fc.count)
		}
		for _, inst := range d.Instances {
			if !inst.Healthy {
				t.Errorf("node %s device %s unhealthy: %s", fc.name, inst.ID, inst.HealthDescription)
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
		hs, err := c.api.Nodes().Stats(c.nodeIDs["v100"], nil)
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
				job := parseJob(t, c.api, string(jobspec), "gpu-model-"+tc.client, tc.model, tc.count)
				registerJob(t, c.api, job)
				alloc := waitAllocDone(t, c.api, *job.ID)
				if alloc.NodeID != c.nodeIDs[tc.client] {
					t.Errorf("placed on node %s, want the %s client %s", alloc.NodeID, tc.client, c.nodeIDs[tc.client])
				}
				got := visibleDevices(t, c.api, alloc)
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
		job := parseJob(t, c.api, string(jobspec), "gpu-model-missing", modelH100, 1)
		evalID := registerJob(t, c.api, job)
		var eval *api.Evaluation
		testenv.Eventually(t, 60*time.Second, 250*time.Millisecond, "evaluation completes", func() error {
			e, _, err := c.api.Evaluations().Info(evalID, nil)
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
		j, _, err := c.api.Jobs().Info(*job.ID, nil)
		if err != nil {
			t.Fatalf("job info: %v", err)
		}
		if *j.Status != "pending" {
			t.Errorf("job status %q, want pending", *j.Status)
		}
		allocs, _, err := c.api.Jobs().Allocations(*job.ID, false, nil)
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

// visibleDevices reads the task's stdout and returns the UUIDs it printed.
func visibleDevices(t *testing.T, c *api.Client, alloc *api.Allocation) []string {
	t.Helper()
	var out string
	testenv.Eventually(t, 30*time.Second, 500*time.Millisecond, "task output", func() error {
		r, err := c.AllocFS().Cat(alloc, "alloc/logs/"+taskName+".stdout.0", nil)
		if err != nil {
			return err
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		out = string(b)
		if !strings.Contains(out, "NVIDIA_VISIBLE_DEVICES=") {
			return fmt.Errorf("output %q", out)
		}
		return nil
	})
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "NVIDIA_VISIBLE_DEVICES="); ok {
			if v == "" {
				return nil
			}
			return strings.Split(strings.TrimSpace(v), ",")
		}
	}
	return nil
}
