package nomadapi

import (
	"context"
	"testing"

	"github.com/hashicorp/nomad/api"
)

func onGPUs(id, node, status string, gpuIDs ...string) *api.AllocationListStub {
	return &api.AllocationListStub{ID: id, JobID: "train", Namespace: "default", NodeID: node, DesiredStatus: "run", ClientStatus: status,
		AllocatedResources: &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{"t": {
			Devices: []*api.AllocatedDeviceResource{{Vendor: "nvidia", Type: "gpu", Name: "A100", DeviceIDs: gpuIDs}},
		}}}}
}

// Observe counts only healthy GPUs and marks a job whose live allocation holds an unhealthy
// one, on that node (fake GPUs share IDs across nodes).
func TestObserveUnhealthyGPU(t *testing.T) {
	for _, tc := range []struct {
		name  string
		alloc *api.AllocationListStub
		want  bool
	}{
		{"on the unhealthy GPU", onGPUs("a1", "n1", "running", "A100a", "A100c"), true},
		{"pending on it", onGPUs("a1", "n1", "pending", "A100c"), true},
		{"on healthy GPUs", onGPUs("a1", "n1", "running", "A100a", "A100b"), false},
		{"same ID on a healthy node", onGPUs("a1", "n2", "running", "A100c"), false},
		{"finished on it", onGPUs("a1", "n1", "complete", "A100c"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFake(t)
			f.allocs = []*api.AllocationListStub{tc.alloc}
			snap, err := c.Observe(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Jobs) != 1 || snap.Jobs[0].UnhealthyGPU != tc.want {
				t.Errorf("jobs %+v, want UnhealthyGPU %v", snap.Jobs, tc.want)
			}
			if snap.Models[0].Name != "A100" || snap.Models[0].GPUs != 4 {
				t.Errorf("models %+v, want the 4 healthy A100s", snap.Models)
			}
		})
	}
}
