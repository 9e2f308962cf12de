package device

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/device"
	"github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/nomad-fft/nomad-fft/devices"
)

// stubSource is a devices.Source whose answers the test changes.
type stubSource struct {
	mu   sync.Mutex
	gpus []devices.GPU
	err  error
}

func (s *stubSource) set(gpus []devices.GPU, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gpus, s.err = gpus, err
}

func (s *stubSource) GPUs(context.Context) ([]devices.GPU, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]devices.GPU(nil), s.gpus...), s.err
}

func (s *stubSource) Stats(context.Context) ([]devices.Stats, error) { return nil, nil }
func (s *stubSource) Close() error                                   { return nil }

func gpu(uuid, model string) devices.GPU {
	return devices.GPU{UUID: uuid, Model: model, MemoryMiB: 16384, Health: devices.Health{Healthy: true, Known: true, Description: devices.HealthDescOK}}
}

func stubPlugin(t *testing.T, src *stubSource) *Plugin {
	t.Helper()
	p := New(hclog.NewNullLogger(), WithOpen(func(Config, hclog.Logger) (devices.Source, error) { return src, nil }))
	if err := p.SetConfig(&base.Config{PluginConfig: encode(t, map[string]any{"fingerprint_period": "1s"})}); err != nil {
		t.Fatalf("SetConfig: %v", err)
	}
	return p
}

func ids(groups []*device.DeviceGroup) map[string][]string {
	out := map[string][]string{}
	for _, g := range groups {
		for _, d := range g.Devices {
			out[g.Name] = append(out[g.Name], d.ID)
		}
	}
	return out
}

func TestFingerprintResendsOnSetChange(t *testing.T) {
	src := &stubSource{}
	// NVML failing before the first fingerprint: an empty one is sent, so the agent does not wait.
	src.set(nil, errors.New("nvml: driver not loaded"))
	p := stubPlugin(t, src)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, groups := firstFingerprint(t, ctx, p)
	if len(groups) != 0 {
		t.Fatalf("first fingerprint = %v, want empty", ids(groups))
	}

	src.set([]devices.GPU{gpu("GPU-b", modelV100), gpu("GPU-a", modelV100)}, nil)
	if diff := cmp.Diff(map[string][]string{modelV100: {"GPU-a", "GPU-b"}}, ids(next(t, ch).Devices)); diff != "" {
		t.Errorf("after GPUs appeared (-want,+got):\n%s", diff)
	}

	// A failure after a fingerprint keeps it: nothing is sent.
	src.set(nil, errors.New("nvml: unknown error"))
	select {
	case r := <-ch:
		t.Fatalf("fingerprint sent on a source error: %v", ids(r.Devices))
	case <-time.After(1500 * time.Millisecond):
	}

	src.set([]devices.GPU{gpu("GPU-a", modelV100)}, nil)
	if diff := cmp.Diff(map[string][]string{modelV100: {"GPU-a"}}, ids(next(t, ch).Devices)); diff != "" {
		t.Errorf("after a GPU vanished (-want,+got):\n%s", diff)
	}
	if _, err := p.Reserve([]string{"GPU-b"}); err == nil {
		t.Errorf("vanished GPU-b still reservable")
	}
}

func TestGroups(t *testing.T) {
	lowPower := gpu("GPU-2", modelV100)
	lowPower.PowerLimitW, lowPower.DriverVersion, lowPower.ComputeCapability = 250, "550.54.15", "7.0"
	other := gpu("GPU-1", modelV100)
	other.PowerLimitW, other.DriverVersion, other.ComputeCapability = 300, "535.0", "7.0"
	other.PCIBusID = "00000000:3B:00.0"
	sick := gpu("GPU-3", modelA100)
	sick.Health = devices.Health{Healthy: false, Known: true, Description: "unhealthy: critical XID 79 reported by NVML"}
	mig := gpu("MIG-1", modelA100+" MIG 1g.5gb")
	mig.MIG, mig.ParentUUID, mig.MemoryMiB = devices.MIGInstance, "GPU-9", 4864

	got := Groups([]devices.GPU{lowPower, sick, other, mig})
	want := []*device.DeviceGroup{
		{
			Vendor: "nvidia", Type: "gpu", Name: modelA100,
			Devices:    []*device.Device{{ID: "GPU-3", Healthy: false, HealthDesc: "unhealthy: critical XID 79 reported by NVML"}},
			Attributes: map[string]*structs.Attribute{AttrMemory: structs.NewIntAttribute(16384, structs.UnitMiB), AttrMIGMode: structs.NewStringAttribute("unsupported")},
		},
		{
			Vendor: "nvidia", Type: "gpu", Name: modelA100 + " MIG 1g.5gb",
			Devices:    []*device.Device{{ID: "MIG-1", Healthy: true, HealthDesc: devices.HealthDescOK}},
			Attributes: map[string]*structs.Attribute{AttrMemory: structs.NewIntAttribute(4864, structs.UnitMiB), AttrMIGMode: structs.NewStringAttribute("instance")},
		},
		{
			Vendor: "nvidia", Type: "gpu", Name: modelV100,
			Devices: []*device.Device{
				{ID: "GPU-1", Healthy: true, HealthDesc: devices.HealthDescOK, HwLocality: &device.DeviceLocality{PciBusID: "00000000:3B:00.0"}},
				{ID: "GPU-2", Healthy: true, HealthDesc: devices.HealthDescOK},
			},
			// Power: the smaller limit; driver versions differ, so no driver_version.
			Attributes: map[string]*structs.Attribute{
				AttrMemory:            structs.NewIntAttribute(16384, structs.UnitMiB),
				AttrPowerLimit:        structs.NewIntAttribute(250, structs.UnitW),
				AttrComputeCapability: structs.NewStringAttribute("7.0"),
				AttrMIGMode:           structs.NewStringAttribute("unsupported"),
			},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Groups (-want,+got):\n%s", diff)
	}
	if len(Groups(nil)) != 0 {
		t.Errorf("Groups(nil) not empty")
	}
}
