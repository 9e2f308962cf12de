package conformance

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl"
	"github.com/hashicorp/nomad/helper/pluginutils/loader"
	"github.com/hashicorp/nomad/nomad/structs/config"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/device"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	modelV100 = "Tesla V100-SXM2-16GB"
	modelA100 = "NVIDIA A100-SXM4-40GB"
)

// goodConfig is an agent `plugin` block presenting 2 V100 and 3 A100 through the fake NVML.
const goodConfig = `
plugin "nomad-device-fft" {
  config {
    fingerprint_period = "2s"
    fake {
      gpu {
        model      = "Tesla V100-SXM2-16GB"
        count      = 2
        memory_mib = 16384
        compute_capability = "7.0"
      }
      gpu {
        model = "NVIDIA A100-SXM4-40GB"
        count = 3
      }
    }
  }
}
`

// parseAgentPlugins decodes `plugin` blocks the way the Nomad 1.6.1 agent reads its config
// files (command/agent/config_parse.go: hcl.Decode into []*config.PluginConfig).
func parseAgentPlugins(t *testing.T, text string) []*config.PluginConfig {
	t.Helper()
	var parsed struct {
		Plugins []*config.PluginConfig `hcl:"plugin"`
	}
	if err := hcl.Decode(&parsed, text); err != nil {
		t.Fatalf("decoding agent config: %v", err)
	}
	return parsed.Plugins
}

// newLoader runs Nomad's own plugin loader over a folder holding the built plugin: it
// launches it, performs the go-plugin handshake, negotiates the API version, parses the
// config with the plugin's schema and calls SetConfig, exactly as the agent does at start.
func newLoader(t *testing.T, agentConfig string) (*loader.PluginLoader, error) {
	t.Helper()
	logger := hclog.New(&hclog.LoggerOptions{Name: "loader", Level: hclog.Warn, Output: testWriter{t}})
	t.Cleanup(func() { testenv.ReapPlugins() })
	return loader.NewPluginLoader(&loader.PluginLoaderConfig{
		Logger:    logger,
		PluginDir: testenv.PluginDir(t),
		Configs:   parseAgentPlugins(t, agentConfig),
		SupportedVersions: map[string][]string{
			base.PluginTypeDevice: {device.ApiVersion010},
		},
	})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// dispense starts the plugin through the loader and returns it as a device plugin.
func dispense(t *testing.T, l *loader.PluginLoader) device.DevicePlugin {
	t.Helper()
	inst, err := l.Dispense(testenv.PluginName, base.PluginTypeDevice, nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatalf("Dispense: %v", err)
	}
	t.Cleanup(inst.Kill)
	dp, ok := inst.Plugin().(device.DevicePlugin)
	if !ok {
		t.Fatalf("dispensed plugin is a %T, not a device plugin", inst.Plugin())
	}
	return dp
}

func TestHandshakeAndCatalog(t *testing.T) {
	l, err := newLoader(t, goodConfig)
	if err != nil {
		t.Fatalf("NewPluginLoader: %v", err)
	}
	infos := l.Catalog()[base.PluginTypeDevice]
	if len(infos) != 1 {
		t.Fatalf("catalog has %d device plugins, want 1: %+v", len(infos), l.Catalog())
	}
	info := infos[0]
	if info.Name != testenv.PluginName || info.Type != base.PluginTypeDevice || info.PluginVersion == "" {
		t.Errorf("plugin info = %+v", info)
	}
	if len(info.PluginApiVersions) != 1 || info.PluginApiVersions[0] != device.ApiVersion010 {
		t.Errorf("API versions = %v, want [%s]", info.PluginApiVersions, device.ApiVersion010)
	}
}

func TestFingerprintReserveStats(t *testing.T) {
	l, err := newLoader(t, goodConfig)
	if err != nil {
		t.Fatalf("NewPluginLoader: %v", err)
	}
	dp := dispense(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Fingerprint: one group per fake model, sorted by model, nvidia/gpu.
	fps, err := dp.Fingerprint(ctx)
	if err != nil {
		t.Fatalf("Fingerprint: %v", err)
	}
	var fp *device.FingerprintResponse
	select {
	case fp = <-fps:
	case <-ctx.Done():
		t.Fatal("no fingerprint")
	}
	if fp == nil || fp.Error != nil {
		t.Fatalf("fingerprint = %+v", fp)
	}
	var names []string
	groups := map[string]*device.DeviceGroup{}
	for _, g := range fp.Devices {
		names = append(names, g.Name)
		groups[g.Name] = g
		if g.Vendor != "nvidia" || g.Type != "gpu" {
			t.Errorf("group %q is %s/%s, want nvidia/gpu", g.Name, g.Vendor, g.Type)
		}
		if err := g.Validate(); err != nil {
			t.Errorf("group %q: %v", g.Name, err)
		}
	}
	if want := []string{modelA100, modelV100}; strings.Join(names, "|") != strings.Join(want, "|") {
		t.Fatalf("groups = %q, want %q (sorted by model)", names, want)
	}
	v100, a100 := groups[modelV100], groups[modelA100]
	if len(v100.Devices) != 2 || len(a100.Devices) != 3 {
		t.Fatalf("devices: %d V100, %d A100; want 2 and 3", len(v100.Devices), len(a100.Devices))
	}
	for name, want := range map[string]string{
		"memory": "16384MiB", "compute_capability": "7.0", "power_limit": "300W",
		"cores_clock": "1410MHz", "memory_clock": "1215MHz", "pcie_gen": "4", "pcie_width": "16",
		"mig_mode": "unsupported", "driver_version": "550.54.15",
	} {
		attr, ok := v100.Attributes[name]
		if !ok {
			t.Errorf("V100 attribute %q missing", name)
			continue
		}
		if got := attr.GoString(); got != want {
			t.Errorf("V100 attribute %q = %q, want %q", name, got, want)
		}
	}
	if got := a100.Attributes["memory"].GoString(); got != "40960MiB" {
		t.Errorf("A100 memory = %q, want 40960MiB (go-nvml's mock catalogue)", got)
	}
	for _, d := range append(append([]*device.Device{}, v100.Devices...), a100.Devices...) {
		if !d.Healthy || !strings.HasPrefix(d.ID, "GPU-") || d.HwLocality == nil {
			t.Errorf("device %+v: want a healthy GPU- UUID with locality", d)
		}
	}

	// Reserve: NVIDIA_VISIBLE_DEVICES lists the ids; an unknown id is an error.
	ids := []string{v100.Devices[1].ID, v100.Devices[0].ID}
	res, err := dp.Reserve(ids)
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	if got, want := res.Envs["NVIDIA_VISIBLE_DEVICES"], strings.Join(ids, ","); got != want {
		t.Errorf("NVIDIA_VISIBLE_DEVICES = %q, want %q", got, want)
	}
	if _, err := dp.Reserve([]string{ids[0], "GPU-00000000-0000-0000-0000-000000000000"}); err == nil ||
		!strings.Contains(err.Error(), "GPU-00000000-0000-0000-0000-000000000000") {
		t.Errorf("Reserve of an unknown id: error = %v, want one naming the id", err)
	}

	// Stats: every fingerprinted device, grouped by model.
	stats, err := dp.Stats(ctx, 500*time.Millisecond)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	var sr *device.StatsResponse
	select {
	case sr = <-stats:
	case <-ctx.Done():
		t.Fatal("no stats")
	}
	if sr == nil || sr.Error != nil || len(sr.Groups) != 2 {
		t.Fatalf("stats = %+v, want 2 groups", sr)
	}
	var statIDs []string
	for _, g := range sr.Groups {
		for id, st := range g.InstanceStats {
			statIDs = append(statIDs, id)
			if st.Summary == nil || st.Stats == nil || st.Stats.Attributes["temperature"] == nil {
				t.Errorf("stats of %s = %+v", id, st)
			}
		}
	}
	sort.Strings(statIDs)
	if len(statIDs) != 5 {
		t.Errorf("stats for %d devices, want 5: %v", len(statIDs), statIDs)
	}
}

// TestBadConfigRefused feeds bad `config` blocks to the loader. Problems the schema catches
// (unknown key, missing model) are refused by Nomad's HCL decoding; the others reach the
// plugin's SetConfig, which refuses them naming the field. Either way the loader, and so
// the agent, does not start with the bad config.
func TestBadConfigRefused(t *testing.T) {
	cases := []struct {
		name   string
		config string
		want   []string
	}{
		{"unknown key", `colour = "green"`, []string{`"colour"`}},
		{"unknown key in gpu", `fake { gpu { model = "NVIDIA A30-PCIE-24GB" shade = 1 } }`, []string{`"shade"`}},
		{"negative count", `fake { gpu { model = "Tesla V100-SXM2-16GB" count = -2 memory_mib = 16384 } }`, []string{"fake.gpu[0].count", "got -2"}},
		{"bad duration", `fingerprint_period = "soon"`, []string{"fingerprint_period", `"soon"`}},
		{"empty model", `fake { gpu { model = "" count = 1 } }`, []string{"fake.gpu[0].model", "must not be empty"}},
		{"missing model", `fake { gpu { count = 1 } }`, []string{`"model"`}},
		{"unknown model without memory", `fake { gpu { model = "Tesla T4" } }`, []string{"fake.gpu[0]", "memory_mib"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newLoader(t, `plugin "nomad-device-fft" { config { `+tc.config+` } }`)
			if err == nil {
				t.Fatal("the loader accepted a bad config")
			}
			t.Logf("refused: %v", err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestSetConfigRefusesDirectly sends configs straight to SetConfig over gRPC, past the
// agent's schema: the plugin itself refuses unknown keys and bad values, naming the field.
func TestSetConfigRefusesDirectly(t *testing.T) {
	l, err := newLoader(t, goodConfig)
	if err != nil {
		t.Fatalf("NewPluginLoader: %v", err)
	}
	dp := dispense(t, l)
	cases := []struct {
		name string
		cfg  map[string]any
		want string
	}{
		{"unknown key", map[string]any{"colour": "green"}, "colour: unknown key"},
		{"negative count", map[string]any{"fake": map[string]any{"gpu": []any{map[string]any{"model": modelV100, "count": -1, "memory_mib": 16384}}}}, "fake.gpu[0].count"},
		{"bad duration", map[string]any{"fingerprint_period": "soon"}, "fingerprint_period"},
		{"empty model", map[string]any{"fake": map[string]any{"gpu": []any{map[string]any{"model": "", "count": 1}}}}, "fake.gpu[0].model"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var raw []byte
			if err := base.MsgPackEncode(&raw, tc.cfg); err != nil {
				t.Fatalf("encoding: %v", err)
			}
			err := dp.SetConfig(&base.Config{PluginConfig: raw, ApiVersion: device.ApiVersion010})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("SetConfig error = %v, want one containing %q", err, tc.want)
			}
		})
	}
	// The refused configs left the good one in place: the fake GPUs are still fingerprinted.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fps, err := dp.Fingerprint(ctx)
	if err != nil {
		t.Fatalf("Fingerprint after refusals: %v", err)
	}
	select {
	case fp := <-fps:
		if fp == nil || fp.Error != nil || len(fp.Devices) != 2 {
			t.Errorf("fingerprint after refusals = %+v, want the 2 fake models", fp)
		}
	case <-ctx.Done():
		t.Fatal("no fingerprint after refusals")
	}
}
