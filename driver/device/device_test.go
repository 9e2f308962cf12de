package device

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/device"
	"github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/nomad-fft/nomad-fft/devices"
)

const (
	modelV100 = "Tesla V100-SXM2-16GB"
	modelA100 = "NVIDIA A100-SXM4-40GB"
)

// fakeConfig is a plugin config presenting 2 V100 and 1 A100 through the fake NVML.
func fakeConfig(extra map[string]any) map[string]any {
	cfg := map[string]any{
		"fingerprint_period": "1s",
		"fake": map[string]any{"gpu": []any{
			map[string]any{"model": modelV100, "count": 2, "memory_mib": 16384, "compute_capability": "7.0"},
			map[string]any{"model": modelA100, "count": 1},
		}},
	}
	for k, v := range extra {
		cfg[k] = v
	}
	return cfg
}

// newPlugin configures a plugin over the fake NVML and keeps a handle on the fake.
func newPlugin(t *testing.T, cfg map[string]any) (*Plugin, *devices.Fake) {
	t.Helper()
	var (
		mu   sync.Mutex
		fake *devices.Fake
	)
	open := func(c Config, logger hclog.Logger) (devices.Source, error) {
		src, f, err := devices.NewFakeSource(c.Fake, logger)
		mu.Lock()
		fake = f
		mu.Unlock()
		return src, err
	}
	p := New(hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Warn}), WithOpen(open),
		WithClock(func() time.Time { return time.Unix(1700000000, 0) }))
	if err := p.SetConfig(&base.Config{PluginConfig: encode(t, cfg)}); err != nil {
		t.Fatalf("SetConfig: %v", err)
	}
	t.Cleanup(func() {
		if p.src != nil {
			_ = p.src.Close()
		}
	})
	mu.Lock()
	defer mu.Unlock()
	return p, fake
}

func TestPluginInfo(t *testing.T) {
	p := New(hclog.NewNullLogger())
	info, err := p.PluginInfo()
	if err != nil {
		t.Fatalf("PluginInfo: %v", err)
	}
	want := &base.PluginInfoResponse{Type: base.PluginTypeDevice, PluginApiVersions: []string{device.ApiVersion010}, PluginVersion: PluginVersion, Name: PluginName}
	if diff := cmp.Diff(want, info); diff != "" {
		t.Errorf("PluginInfo (-want,+got):\n%s", diff)
	}
	spec, err := p.ConfigSchema()
	if err != nil || spec == nil {
		t.Fatalf("ConfigSchema = %v, %v", spec, err)
	}
	for _, key := range []string{"enabled", "ignored_gpu_ids", "fingerprint_period", "fake"} {
		if _, ok := spec.GetObject().GetAttributes()[key]; !ok {
			t.Errorf("schema lacks %q", key)
		}
	}
}

func TestSetConfigRefusalKeepsPrevious(t *testing.T) {
	p, _ := newPlugin(t, fakeConfig(nil))
	err := p.SetConfig(&base.Config{PluginConfig: encode(t, map[string]any{"fingerprint_period": "soon"})})
	if err == nil || !strings.Contains(err.Error(), "fingerprint_period") {
		t.Fatalf("SetConfig error = %v, want one naming fingerprint_period", err)
	}
	if p.cfg.FingerprintPeriod != time.Second || len(p.cfg.Fake) != 2 {
		t.Errorf("refused config replaced the previous one: %+v", p.cfg)
	}
}

// firstFingerprint reads the first fingerprint of a fresh stream.
func firstFingerprint(t *testing.T, ctx context.Context, p *Plugin) (<-chan *device.FingerprintResponse, []*device.DeviceGroup) {
	t.Helper()
	ch, err := p.Fingerprint(ctx)
	if err != nil {
		t.Fatalf("Fingerprint: %v", err)
	}
	return ch, next(t, ch).Devices
}

func next(t *testing.T, ch <-chan *device.FingerprintResponse) *device.FingerprintResponse {
	t.Helper()
	select {
	case r, ok := <-ch:
		if !ok {
			t.Fatal("fingerprint stream closed")
		}
		if r.Error != nil {
			t.Fatalf("fingerprint error: %v", r.Error)
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no fingerprint within 10s")
	}
	return nil
}

func TestFingerprintGroupsFakeModels(t *testing.T) {
	p, _ := newPlugin(t, fakeConfig(nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, groups := firstFingerprint(t, ctx, p)
	if len(groups) != 2 {
		t.Fatalf("got %d groups, want 2", len(groups))
	}
	// Sorted by model: "NVIDIA A100…" before "Tesla V100…".
	a100, v100 := groups[0], groups[1]
	if a100.Name != modelA100 || v100.Name != modelV100 {
		t.Fatalf("group names = %q, %q", a100.Name, v100.Name)
	}
	for _, g := range groups {
		if g.Vendor != "nvidia" || g.Type != "gpu" {
			t.Errorf("group %q is %s/%s, want nvidia/gpu", g.Name, g.Vendor, g.Type)
		}
		if err := g.Validate(); err != nil {
			t.Errorf("group %q invalid: %v", g.Name, err)
		}
		for _, d := range g.Devices {
			if !d.Healthy || d.HealthDesc != devices.HealthDescOK || d.HwLocality == nil || d.HwLocality.PciBusID == "" {
				t.Errorf("device %+v: want healthy with a PCI bus id", d)
			}
		}
	}
	if len(v100.Devices) != 2 || len(a100.Devices) != 1 {
		t.Errorf("device counts = %d V100, %d A100", len(v100.Devices), len(a100.Devices))
	}
	want := map[string]*structs.Attribute{
		AttrMemory:            structs.NewIntAttribute(16384, structs.UnitMiB),
		AttrComputeCapability: structs.NewStringAttribute("7.0"),
		AttrPowerLimit:        structs.NewIntAttribute(devices.FakePowerLimitW, structs.UnitW),
		AttrCoresClock:        structs.NewIntAttribute(devices.FakeSMClockMHz, structs.UnitMHz),
		AttrMemoryClock:       structs.NewIntAttribute(devices.FakeMemoryClockMHz, structs.UnitMHz),
		AttrPCIeGen:           structs.NewIntAttribute(devices.FakePCIeGen, ""),
		AttrPCIeWidth:         structs.NewIntAttribute(devices.FakePCIeWidth, ""),
		AttrMIGMode:           structs.NewStringAttribute("unsupported"),
		AttrDriverVersion:     structs.NewStringAttribute(devices.FakeDriverVersion),
	}
	if diff := cmp.Diff(want, v100.Attributes); diff != "" {
		t.Errorf("V100 attributes (-want,+got):\n%s", diff)
	}
	if got := a100.Attributes[AttrMIGMode].GoString(); got != "disabled" {
		t.Errorf("A100 mig_mode = %s, want disabled", got)
	}
}

func TestFingerprintResendsOnHealthChange(t *testing.T) {
	p, fake := newPlugin(t, fakeConfig(map[string]any{"fingerprint_period": "1h"}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, groups := firstFingerprint(t, ctx, p)
	victim := groups[1].Devices[0].ID
	if err := fake.InjectEvent(victim, nvml.EventTypeXidCriticalError, 79); err != nil {
		t.Fatalf("InjectEvent: %v", err)
	}
	// The period is an hour: only the health event can trigger this fingerprint.
	groups = next(t, ch).Devices
	for _, d := range groups[1].Devices {
		if d.ID == victim {
			if d.Healthy || !strings.Contains(d.HealthDesc, "XID 79") {
				t.Errorf("device after XID 79 = %+v, want unhealthy naming the XID", d)
			}
			return
		}
	}
	t.Fatalf("device %s missing after the event", victim)
}

func TestFingerprintSendsOnlyChanges(t *testing.T) {
	p, _ := newPlugin(t, fakeConfig(nil)) // period 1s
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, _ := firstFingerprint(t, ctx, p)
	select {
	case r := <-ch:
		t.Fatalf("fingerprint resent without a change: %+v", r)
	case <-time.After(2500 * time.Millisecond):
	}
	cancel()
	select {
	case _, ok := <-ch:
		if ok {
			t.Fatal("stream not closed after cancel")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("stream not closed after cancel")
	}
}

func TestFingerprintIgnoredGPUs(t *testing.T) {
	p, _ := newPlugin(t, fakeConfig(nil))
	ctx, cancel := context.WithCancel(context.Background())
	_, groups := firstFingerprint(t, ctx, p)
	cancel()
	ignored := groups[1].Devices[0].ID

	p2, _ := newPlugin(t, fakeConfig(map[string]any{"ignored_gpu_ids": []any{ignored}}))
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	_, groups = firstFingerprint(t, ctx2, p2)
	for _, g := range groups {
		for _, d := range g.Devices {
			if d.ID == ignored {
				t.Errorf("ignored GPU %s fingerprinted", ignored)
			}
		}
	}
	if _, err := p2.Reserve([]string{ignored}); err == nil {
		t.Errorf("ignored GPU %s reserved", ignored)
	}
}

func TestDisabled(t *testing.T) {
	p, _ := newPlugin(t, fakeConfig(map[string]any{"enabled": false}))
	if _, err := p.Fingerprint(context.Background()); !errors.Is(err, device.ErrPluginDisabled) {
		t.Errorf("Fingerprint error = %v, want ErrPluginDisabled", err)
	}
	if _, err := p.Stats(context.Background(), time.Second); !errors.Is(err, device.ErrPluginDisabled) {
		t.Errorf("Stats error = %v, want ErrPluginDisabled", err)
	}
}

func TestNotConfigured(t *testing.T) {
	p := New(hclog.NewNullLogger())
	if _, err := p.Fingerprint(context.Background()); !errors.Is(err, ErrNotConfigured) {
		t.Errorf("Fingerprint error = %v, want ErrNotConfigured", err)
	}
}

func TestReserve(t *testing.T) {
	p, _ := newPlugin(t, fakeConfig(nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, groups := firstFingerprint(t, ctx, p)
	a, b := groups[1].Devices[0].ID, groups[1].Devices[1].ID

	cases := []struct {
		name    string
		ids     []string
		wantEnv string
		wantErr *ReservationError
	}{
		{name: "nothing", ids: nil},
		{name: "two in order given", ids: []string{b, a}, wantEnv: b + "," + a},
		{name: "unknown id", ids: []string{a, "GPU-nope"}, wantErr: &ReservationError{Unknown: []string{"GPU-nope"}}},
		{name: "duplicate id", ids: []string{a, a}, wantErr: &ReservationError{Duplicate: []string{a}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := p.Reserve(tc.ids)
			if tc.wantErr != nil {
				var rerr *ReservationError
				if !errors.As(err, &rerr) {
					t.Fatalf("Reserve error = %v, want a *ReservationError", err)
				}
				if diff := cmp.Diff(tc.wantErr, rerr); diff != "" {
					t.Errorf("error (-want,+got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("Reserve: %v", err)
			}
			if got := res.Envs[VisibleDevicesEnv]; got != tc.wantEnv {
				t.Errorf("%s = %q, want %q", VisibleDevicesEnv, got, tc.wantEnv)
			}
			if got := res.Envs[ModelEnv]; tc.wantEnv != "" && got != groups[1].Name {
				t.Errorf("%s = %q, want %q", ModelEnv, got, groups[1].Name)
			}
		})
	}
}

func TestStatsStream(t *testing.T) {
	p, _ := newPlugin(t, fakeConfig(nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, groups := firstFingerprint(t, ctx, p)
	ch, err := p.Stats(ctx, 100*time.Millisecond)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	var resp *device.StatsResponse
	select {
	case resp = <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no stats within 10s")
	}
	if resp.Error != nil || len(resp.Groups) != 2 {
		t.Fatalf("stats = %+v, want 2 groups", resp)
	}
	v100 := resp.Groups[1]
	if v100.Name != modelV100 || len(v100.InstanceStats) != 2 {
		t.Fatalf("V100 stats = %+v", v100)
	}
	st := v100.InstanceStats[groups[1].Devices[0].ID]
	if st == nil || st.Summary == nil || *st.Summary.IntDenominatorVal != 16384 || !st.Timestamp.Equal(time.Unix(1700000000, 0)) {
		t.Fatalf("device stats = %+v", st)
	}
	for _, name := range []string{StatGPUUtilization, StatMemoryUsed, StatPower, StatTemperature, StatECCCorrected, StatECCUncorrected} {
		if st.Stats.Attributes[name] == nil {
			t.Errorf("stat %q missing", name)
		}
	}
}
