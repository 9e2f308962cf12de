package nomadapi

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// EnvAgent names the HTTP address of a real Nomad cluster, with GPU clients in node pool
// "gpu", for TestAgentConcurrentUpdate. Without it the test skips; the end-to-end test
// e2e/agents/nomad/allocator TestConcurrentUpdateNotOverwritten starts such a cluster and runs
// it.
const EnvAgent = "FFT_NOMAD_AGENT"

// A user's update that lands between a round's observation and its write is never
// overwritten: against a real agent, the check-and-set registration is refused and reported as
// a conflict, the job keeps the user's change, and the next round's write carries it.
func TestAgentConcurrentUpdate(t *testing.T) {
	addr := os.Getenv(EnvAgent)
	if addr == "" {
		t.Skipf("%s is unset: no Nomad agent to run against", EnvAgent)
	}
	nc, err := api.NewClient(&api.Config{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := New(nc, nil).WithNodePool("gpu")
	snap, err := c.Observe(ctx)
	if err != nil || len(snap.Models) == 0 {
		t.Fatalf("observing the cluster: %v, models %v; want GPUs in node pool gpu", err, snap)
	}
	model := snap.Models[0].Name

	// A managed job as a plain `nomad job run` submits it: default pool, no gate.
	id, ns, typ, count := "fft-cas", "default", "batch", 1
	gpus := uint64(1)
	job := &api.Job{
		ID: &id, Name: &id, Namespace: &ns, Type: &typ, Datacenters: []string{"*"},
		Meta: map[string]string{"fft.work": "10", "fft.throughput": fmt.Sprintf("%s=2", model)},
		TaskGroups: []*api.TaskGroup{{
			Name: new("main"), Count: &count,
			Tasks: []*api.Task{{
				Name: "train", Driver: "raw_exec",
				Config:    map[string]any{"command": "/bin/sh", "args": []string{"-c", "sleep 30"}},
				Env:       map[string]string{"STEP": "1"},
				Resources: &api.Resources{CPU: new(50), MemoryMB: new(32), Devices: []*api.RequestedDevice{{Name: "nvidia/gpu", Count: &gpus}}},
			}},
		}},
	}
	if _, _, err := nc.Jobs().Register(job, nil); err != nil {
		t.Fatalf("registering %s: %v", id, err)
	}
	t.Cleanup(func() { _, _, _ = nc.Jobs().Deregister(id, true, nil) })

	key := ns + "/" + id
	observed := func() *loop.Snapshot {
		t.Helper()
		s, err := c.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range s.Jobs {
			if j.ID == key {
				if !j.OffPool || j.Gated {
					t.Fatalf("observed %s as gated %v, off pool %v; want held by its pool only", key, j.Gated, j.OffPool)
				}
				return s
			}
		}
		t.Fatalf("observation lacks %s: jobs %+v, invalid %+v", key, s.Jobs, s.Invalid)
		return nil
	}
	snap = observed()

	// The user changes the job meanwhile (a task variable and the work), with a plain register.
	user, _, err := nc.Jobs().Info(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	user.TaskGroups[0].Tasks[0].Env["STEP"] = "2"
	user.Meta["fft.work"] = "20"
	if _, _, err := nc.Jobs().Register(user, nil); err != nil {
		t.Fatalf("the user's update: %v", err)
	}

	assign := map[string]string{key: model}
	res := c.Apply(ctx, loop.Diff(snap.Jobs, assign))
	if !reflect.DeepEqual(res.Conflicts, []string{key}) || len(res.Errors) != 0 || res.Calls != 1 {
		t.Fatalf("apply over the user's update = %+v; want one call, reported as a conflict on %s", res, key)
	}
	got, _, err := nc.Jobs().Info(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.TaskGroups[0].Tasks[0].Env["STEP"] != "2" || got.Meta["fft.work"] != "20" || *got.Version != 1 || deref(got.NodePool) != api.NodePoolDefault {
		t.Fatalf("after the conflict: STEP %q, fft.work %q, version %d, pool %q; want the user's version 1 untouched in the default pool",
			got.TaskGroups[0].Tasks[0].Env["STEP"], got.Meta["fft.work"], *got.Version, deref(got.NodePool))
	}

	// The next round reads the user's version and starts it, keeping the change.
	snap = observed()
	res = c.Apply(ctx, loop.Diff(snap.Jobs, assign))
	if len(res.Conflicts)+len(res.Errors) != 0 || res.Calls != 1 {
		t.Fatalf("the next round's apply = %+v; want one call, no conflict", res)
	}
	got, _, err = nc.Jobs().Info(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.TaskGroups[0].Tasks[0].Env["STEP"] != "2" || got.Meta["fft.work"] != "20" || *got.Version != 2 ||
		deref(got.NodePool) != "gpu" || Gated(got) || SteeredModel(got) != model {
		t.Fatalf("after the start: STEP %q, fft.work %q, version %d, pool %q, gated %v, model %q; want the user's change kept, version 2, pool gpu, steered to %q",
			got.TaskGroups[0].Tasks[0].Env["STEP"], got.Meta["fft.work"], *got.Version, deref(got.NodePool), Gated(got), SteeredModel(got), model)
	}
	// And Nomad places it.
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		allocs, _, err := nc.Jobs().Allocations(id, false, nil)
		if err == nil && len(allocs) > 0 && (allocs[0].ClientStatus == "running" || allocs[0].ClientStatus == "complete") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not placed after the start: allocations %v, %v", id, allocs, err)
		}
	}
}
