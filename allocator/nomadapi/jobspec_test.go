package nomadapi

import (
	"math"
	"math/big"
	"slices"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/allocator/jobmeta"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

func gpuJob(deviceName string, count uint64, groupCount int, cons ...*api.Constraint) *api.Job {
	id := "train"
	return &api.Job{
		ID:          &id,
		Constraints: []*api.Constraint{{LTarget: "${attr.kernel.name}", RTarget: "linux", Operand: "="}},
		TaskGroups: []*api.TaskGroup{{
			Count: &groupCount,
			Tasks: []*api.Task{
				{Name: "log", Resources: &api.Resources{}},
				{Name: "train", Resources: &api.Resources{Devices: []*api.RequestedDevice{
					{Name: deviceName, Count: &count, Constraints: cons},
					{Name: "intel/fpga", Count: &count},
				}}},
			},
		}},
	}
}

func TestGate(t *testing.T) {
	job := gpuJob("nvidia/gpu", 2, 1)
	if Gated(job) {
		t.Fatal("a fresh job is gated")
	}
	if !SetGate(job, true) || !Gated(job) || SetGate(job, true) {
		t.Fatalf("SetGate(true): gated %v, constraints %v", Gated(job), job.Constraints)
	}
	if len(job.Constraints) != 2 {
		t.Errorf("gating dropped or doubled constraints: %v", job.Constraints)
	}
	if !SetGate(job, false) || Gated(job) || SetGate(job, false) {
		t.Fatalf("SetGate(false): gated %v", Gated(job))
	}
	if len(job.Constraints) != 1 || job.Constraints[0].LTarget != "${attr.kernel.name}" {
		t.Errorf("lifting the gate touched other constraints: %v", job.Constraints)
	}
}

func TestNodePool(t *testing.T) {
	for _, tc := range []struct {
		name, jobPool, pool string
		in, moved           bool
	}{
		{"plain nomad job run", "default", "gpu", false, true},
		{"pool unset (no namespace default read yet)", "", "gpu", false, true},
		{"in the GPU pool", "gpu", "gpu", true, false},
		{"pool all reaches every node", "all", "gpu", true, true},
		{"no GPU pool", "default", "", true, false},
	} {
		job := gpuJob("nvidia/gpu", 1, 1)
		if tc.jobPool != "" {
			job.NodePool = &tc.jobPool
		}
		if got := InPool(job, tc.pool); got != tc.in {
			t.Errorf("%s: InPool(%q, %q) = %v, want %v", tc.name, tc.jobPool, tc.pool, got, tc.in)
		}
		if got := SetPool(job, tc.pool); got != tc.moved {
			t.Errorf("%s: SetPool changed %v, want %v", tc.name, got, tc.moved)
		}
		if tc.pool != "" && (deref(job.NodePool) != tc.pool || SetPool(job, tc.pool)) {
			t.Errorf("%s: after SetPool the job is in %q, want %q, and a second SetPool is a no-op", tc.name, deref(job.NodePool), tc.pool)
		}
	}
}

func TestGPUDemand(t *testing.T) {
	for _, tc := range []struct {
		name string
		job  *api.Job
		want int
	}{
		{"vendor/type", gpuJob("nvidia/gpu", 2, 1), 2},
		{"type only", gpuJob("gpu", 1, 1), 1},
		{"with model", gpuJob("nvidia/gpu/Tesla V100-SXM2-16GB", 4, 1), 4},
		{"group count", gpuJob("nvidia/gpu", 2, 3), 6},
		{"other vendor", gpuJob("amd/gpu", 2, 1), 0},
		// Counts that overflow an int saturate beyond jobmeta.MaxGPUs, which Parse refuses:
		// 2^64-1 plus 2 once summed to 1, a job the allocator then took.
		{"2^64-1 and 2", twoDevices(math.MaxUint64, 2), jobmeta.MaxGPUs + 1},
		{"2^63 and 2^63", twoDevices(1<<63, 1<<63), jobmeta.MaxGPUs + 1},
		{"huge group count", gpuJob("nvidia/gpu", 1<<40, math.MaxInt), jobmeta.MaxGPUs + 1},
		{"negative group count", gpuJob("nvidia/gpu", 2, -3), jobmeta.MaxGPUs + 1},
	} {
		if got := GPUDemand(tc.job); got != tc.want {
			t.Errorf("%s: GPUDemand = %d, want %d", tc.name, got, tc.want)
		}
		if tc.want > jobmeta.MaxGPUs {
			if _, err := jobmeta.Parse(map[string]string{"fft.work": "10", "fft.throughput": "A=1"}, GPUDemand(tc.job)); err == nil {
				t.Errorf("%s: jobmeta.Parse took the demand", tc.name)
			}
		}
	}
}

// twoDevices is a job with two GPU device blocks of counts a and b.
func twoDevices(a, b uint64) *api.Job {
	job := gpuJob("nvidia/gpu", a, 1)
	tk := job.TaskGroups[0].Tasks[1]
	tk.Resources.Devices = append(tk.Resources.Devices, &api.RequestedDevice{Name: "nvidia/gpu", Count: &b})
	return job
}

// FuzzGPUDemand: whatever the counts, the demand is the exact sum when it is at most
// jobmeta.MaxGPUs, and beyond MaxGPUs (so refused) otherwise or when any one count is beyond it;
// never negative or wrapped.
func FuzzGPUDemand(f *testing.F) {
	f.Add(uint64(2), uint64(1), 1, 1)
	f.Add(uint64(math.MaxUint64), uint64(2), 1, 1)
	f.Add(uint64(1<<63), uint64(1<<63), 2, 3)
	f.Add(uint64(4), uint64(0), -1, 1)
	f.Add(uint64(1), uint64(1), math.MaxInt, math.MaxInt)
	f.Fuzz(func(t *testing.T, a, b uint64, countA, countB int) {
		job := gpuJob("nvidia/gpu", a, countA)
		job.TaskGroups = append(job.TaskGroups, gpuJob("gpu", b, countB).TaskGroups[0])
		got := GPUDemand(job)
		exact := new(big.Int).Mul(new(big.Int).SetUint64(a), big.NewInt(int64(countA)))
		exact.Add(exact, new(big.Int).Mul(new(big.Int).SetUint64(b), big.NewInt(int64(countB))))
		// A device or group count beyond MaxGPUs is refused even where the product is small
		// (a group of count 0): it is no request anyone means.
		const maxGPUs = jobmeta.MaxGPUs
		absurd := countA < 0 || countB < 0 || a > maxGPUs || b > maxGPUs || countA > maxGPUs || countB > maxGPUs
		switch {
		case absurd:
			if got <= jobmeta.MaxGPUs {
				t.Fatalf("counts %d x %d and %d x %d: demand %d, want beyond %d", a, countA, b, countB, got, jobmeta.MaxGPUs)
			}
		case exact.Cmp(big.NewInt(jobmeta.MaxGPUs)) <= 0:
			if int64(got) != exact.Int64() {
				t.Fatalf("demand %d, want %s", got, exact)
			}
		default:
			if got <= jobmeta.MaxGPUs {
				t.Fatalf("demand %d for an exact %s, want beyond %d", got, exact, jobmeta.MaxGPUs)
			}
		}
	})
}

func TestSteer(t *testing.T) {
	for _, tc := range []struct {
		name, device, model string
		cons                []*api.Constraint
		wantOp              string
	}{
		{"plain", "nvidia/gpu", "NVIDIA A100-SXM4-40GB", nil, "="},
		{"replaces a model constraint", "nvidia/gpu", "Tesla V100-SXM2-16GB",
			[]*api.Constraint{{LTarget: ModelAttribute, RTarget: "NVIDIA A100-SXM4-40GB", Operand: "="}}, "="},
		{"named model", "nvidia/gpu/NVIDIA A100-SXM4-40GB", "Tesla V100-SXM2-16GB", nil, "="},
		{"numeric model", "nvidia/gpu", "1080", nil, "regexp"},
		{"numeric with dots", "nvidia/gpu", "3.5 (x)", nil, "regexp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := &api.Constraint{LTarget: "${device.attr.memory}", RTarget: "8 GiB", Operand: ">="}
			job := gpuJob(tc.device, 2, 1, append(tc.cons, other)...)
			if err := Steer(job, tc.model); err != nil {
				t.Fatal(err)
			}
			if got := SteeredModel(job); got != tc.model {
				t.Errorf("SteeredModel = %q, want %q", got, tc.model)
			}
			d := job.TaskGroups[0].Tasks[1].Resources.Devices[0]
			if d.Name != "nvidia/gpu" {
				t.Errorf("device name %q, want nvidia/gpu", d.Name)
			}
			var model []*api.Constraint
			kept := false
			for _, c := range d.Constraints {
				if c.LTarget == ModelAttribute {
					model = append(model, c)
				}
				kept = kept || c == other
			}
			if len(model) != 1 || model[0].Operand != tc.wantOp || !kept {
				t.Errorf("constraints %v: want one %q model constraint and the memory one kept", d.Constraints, tc.wantOp)
			}
			// The FPGA request is not touched.
			if fpga := job.TaskGroups[0].Tasks[1].Resources.Devices[1]; len(fpga.Constraints) != 0 {
				t.Errorf("steered a non-GPU device: %v", fpga.Constraints)
			}
		})
	}
	if err := Steer(gpuJob("amd/gpu", 1, 1), "x"); err == nil {
		t.Error("Steer of a job without a GPU request succeeded")
	}
	if got := constraintModel(&api.Constraint{LTarget: ModelAttribute, RTarget: "^A.*$", Operand: "regexp"}); got != "" {
		t.Errorf("a real regexp read as model %q", got)
	}
}

func TestObserveAllocs(t *testing.T) {
	res := func(model string) *api.AllocatedResources {
		return &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{
			"train": {Devices: []*api.AllocatedDeviceResource{{Vendor: "nvidia", Type: "gpu", Name: model}}}}}
	}
	for _, tc := range []struct {
		name      string
		allocs    []*api.AllocationListStub
		wantN     int
		wantModel string
		finished  bool
		dead      bool
		failed    bool
	}{
		{"none", nil, 0, "", false, false, false},
		{"running", []*api.AllocationListStub{{ID: "a", DesiredStatus: "run", ClientStatus: "running", AllocatedResources: res("V")}}, 1, "V", false, false, false},
		{"parked", []*api.AllocationListStub{{ID: "a", DesiredStatus: "stop", ClientStatus: "complete"}}, 0, "", false, true, false},
		{"finished", []*api.AllocationListStub{{ID: "a", DesiredStatus: "run", ClientStatus: "complete"}}, 0, "", true, true, false},
		{"failed, rescheduling", []*api.AllocationListStub{{ID: "a", DesiredStatus: "run", ClientStatus: "failed"}}, 0, "", false, false, false},
		{"failed, dead", []*api.AllocationListStub{{ID: "a", DesiredStatus: "run", ClientStatus: "failed"}}, 0, "", true, true, true},
		{"failed, replaced", []*api.AllocationListStub{
			{ID: "a", DesiredStatus: "run", ClientStatus: "failed"},
			{ID: "b", DesiredStatus: "run", ClientStatus: "running", AllocatedResources: res("V")}}, 1, "V", false, false, false},
		{"moved", []*api.AllocationListStub{
			{ID: "a", DesiredStatus: "stop", ClientStatus: "complete", AllocatedResources: res("V")},
			{ID: "b", DesiredStatus: "run", ClientStatus: "pending", AllocatedResources: res("A")}}, 1, "A", false, false, false},
	} {
		j := loop.Job{Model: "steered"}
		observeAllocs(&j, tc.allocs, tc.dead)
		if len(j.Allocs) == 0 && j.RunID != 0 {
			t.Errorf("%s: run ID %d without a live allocation", tc.name, j.RunID)
		}
		if len(j.Allocs) != tc.wantN || j.RunningModel != tc.wantModel || j.Finished != tc.finished || j.Failed != tc.failed {
			t.Errorf("%s: allocs %v model %q finished %v failed %v; want %d, %q, %v, %v",
				tc.name, j.Allocs, j.RunningModel, j.Finished, j.Failed, tc.wantN, tc.wantModel, tc.finished, tc.failed)
		}
	}
}

// A job's run ID changes when Nomad restarts a task of a live allocation or replaces one, and
// not when a stopped or finished allocation changes.
func TestObserveAllocsRunID(t *testing.T) {
	alloc := func(id string, index, restarts uint64, desired, client string) *api.AllocationListStub {
		return &api.AllocationListStub{ID: id, CreateIndex: index, DesiredStatus: desired, ClientStatus: client,
			TaskStates: map[string]*api.TaskState{"train": {Restarts: restarts}}}
	}
	runID := func(allocs ...*api.AllocationListStub) uint64 {
		var j loop.Job
		observeAllocs(&j, allocs, false)
		return j.RunID
	}
	a, c, old := alloc("a", 10, 0, "run", "running"), alloc("c", 11, 0, "run", "running"), alloc("old", 5, 0, "stop", "complete")
	base := runID(a, c, old)
	for _, tc := range []struct {
		name   string
		allocs []*api.AllocationListStub
		same   bool
	}{
		{"unchanged", []*api.AllocationListStub{a, c, old}, true},
		{"a stopped one restarted", []*api.AllocationListStub{a, c, alloc("old", 5, 3, "stop", "complete")}, true},
		{"a task restarted in place", []*api.AllocationListStub{alloc("a", 10, 1, "run", "running"), c, old}, false},
		{"one replaced", []*api.AllocationListStub{alloc("a", 10, 0, "stop", "complete"), alloc("b", 12, 0, "run", "pending"), c, old}, false},
		{"one lost", []*api.AllocationListStub{a, alloc("c", 11, 0, "run", "lost"), old}, false},
	} {
		if got := runID(tc.allocs...); (got == base) != tc.same {
			t.Errorf("%s: run ID %d, before %d; want same %v", tc.name, got, base, tc.same)
		}
	}
}

func TestGPUPieces(t *testing.T) {
	for _, tc := range []struct {
		name string
		job  *api.Job
		want []int
	}{
		{"one allocation", gpuJob("nvidia/gpu", 4, 1), []int{4}},
		{"count 2 of 8", gpuJob("nvidia/gpu", 8, 2), []int{8, 8}},
		{"no GPUs", gpuJob("amd/gpu", 2, 1), nil},
	} {
		got := GPUPieces(tc.job)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: GPUPieces = %v, want %v", tc.name, got, tc.want)
		}
		sum := 0
		for _, p := range got {
			sum += p
		}
		if sum != GPUDemand(tc.job) {
			t.Errorf("%s: pieces %v do not sum to GPUDemand %d", tc.name, got, GPUDemand(tc.job))
		}
	}
}

func TestPin(t *testing.T) {
	job := gpuJob("nvidia/gpu", 2, 1)
	if PinnedNodes(job) != nil || Pin(job, nil) {
		t.Fatal("a new job is not pinned")
	}
	if !Pin(job, []string{"n1"}) || !slices.Equal(PinnedNodes(job), []string{"n1"}) || Pin(job, []string{"n1"}) {
		t.Fatalf("pin to one node: %v", PinnedNodes(job))
	}
	if !Pin(job, []string{"n1", "n2"}) || !slices.Equal(PinnedNodes(job), []string{"n1", "n2"}) {
		t.Fatalf("pin to two nodes: %v", PinnedNodes(job))
	}
	n := 0
	for _, c := range job.Constraints {
		if c.LTarget == NodeAttribute {
			n++
			if c.Operand != "set_contains_any" {
				t.Fatalf("operand %q", c.Operand)
			}
		}
	}
	if n != 1 || len(job.Constraints) != 2 {
		t.Fatalf("constraints %v, want the kernel one and one pin", job.Constraints)
	}
	if !Pin(job, nil) || PinnedNodes(job) != nil {
		t.Fatal("unpin")
	}
}

func TestPlacementFailure(t *testing.T) {
	got := placementFailure(map[string]*api.AllocationMetric{
		"train": {NodesEvaluated: 2, ConstraintFiltered: map[string]int{"${node.unique.id} = n1": 1}, DimensionExhausted: map[string]int{"devices": 1}},
		"aux":   {NodesEvaluated: 3},
	})
	want := `task group "aux": 3 node(s) evaluated, none feasible; task group "train": constraint ${node.unique.id} = n1 filtered 1 node(s); devices exhausted on 1 node(s)`
	if got != want {
		t.Fatalf("placementFailure =\n%s\nwant\n%s", got, want)
	}
}
