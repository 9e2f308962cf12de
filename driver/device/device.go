package device

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/device"
	"github.com/hashicorp/nomad/plugins/shared/hclspec"

	"github.com/nomad-fft/nomad-fft/devices"
)

const (
	// PluginName is the plugin's name, and the file name of its executable in the agent's
	// plugin_dir (the label of the agent's `plugin` block).
	PluginName = "nomad-device-fft"
	// Vendor and DeviceType make Nomad's device id "nvidia/gpu/<model>".
	Vendor     = "nvidia"
	DeviceType = device.DeviceTypeGPU
	// VisibleDevicesEnv is the variable Reserve sets for the NVIDIA container runtime and CUDA.
	VisibleDevicesEnv = "NVIDIA_VISIBLE_DEVICES"
	// ModelEnv names the reserved GPUs' model for the fft task driver, which gets the
	// reservation's environment but not the allocated devices' names.
	ModelEnv = "FFT_GPU_MODEL"
)

// PluginVersion is the plugin's version, overridable with
// -ldflags "-X github.com/nomad-fft/nomad-fft/driver/device.PluginVersion=…".
var PluginVersion = "0.1.0"

// configSpec is the agent-side schema; its defaults are those of DefaultConfig.
var configSpec = hclspec.NewObject(map[string]*hclspec.Spec{
	"enabled": hclspec.NewDefault(
		hclspec.NewAttr("enabled", "bool", false),
		hclspec.NewLiteral("true"),
	),
	"ignored_gpu_ids": hclspec.NewDefault(
		hclspec.NewAttr("ignored_gpu_ids", "list(string)", false),
		hclspec.NewLiteral("[]"),
	),
	"fingerprint_period": hclspec.NewDefault(
		hclspec.NewAttr("fingerprint_period", "string", false),
		hclspec.NewLiteral(`"1m"`),
	),
	"fake": hclspec.NewBlock("fake", false, hclspec.NewObject(map[string]*hclspec.Spec{
		"health_file": hclspec.NewAttr("health_file", "string", false),
		"uuid_seed":   hclspec.NewAttr("uuid_seed", "string", false),
		"gpu": hclspec.NewBlockList("gpu", hclspec.NewObject(map[string]*hclspec.Spec{
			"model": hclspec.NewAttr("model", "string", true),
			"count": hclspec.NewDefault(
				hclspec.NewAttr("count", "number", false),
				hclspec.NewLiteral("1"),
			),
			"memory_mib":         hclspec.NewAttr("memory_mib", "number", false),
			"compute_capability": hclspec.NewAttr("compute_capability", "string", false),
		})),
	})),
})

// OpenFunc opens the device source for a configuration.
type OpenFunc func(cfg Config, logger hclog.Logger) (devices.Source, error)

// OpenSource is the default OpenFunc: the fake NVML when cfg.Fake is set, else the machine's.
func OpenSource(cfg Config, logger hclog.Logger) (devices.Source, error) {
	if len(cfg.Fake) > 0 && cfg.FakeHealthFile != "" {
		src, _, err := devices.NewFakeSourceWithHealthFile(cfg.Fake, cfg.FakeHealthFile, logger.Named("fake_nvml"))
		return src, err
	}
	if len(cfg.Fake) > 0 {
		src, _, err := devices.NewFakeSource(cfg.Fake, logger.Named("fake_nvml"))
		return src, err
	}
	return devices.OpenSystem(logger.Named("nvml")), nil
}

// Option configures a Plugin.
type Option func(*options)

type options struct {
	open OpenFunc
	now  func() time.Time
}

func defaultOptions() options {
	return options{open: OpenSource, now: time.Now}
}

// WithOpen replaces how the device source is opened (tests use an in-process source).
func WithOpen(open OpenFunc) Option { return func(o *options) { o.open = open } }

// WithClock replaces the clock that stamps statistics.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// Plugin is the nomad-device-fft device plugin.
type Plugin struct {
	logger hclog.Logger
	opts   options

	mu      sync.Mutex
	cfg     Config
	src     devices.Source
	ignored map[string]bool
	// known maps the UUIDs last fingerprinted to their devices, for Reserve and Stats.
	known map[string]devices.GPU
}

var _ device.DevicePlugin = (*Plugin)(nil)

// New returns an unconfigured plugin; Nomad calls SetConfig before anything else.
func New(logger hclog.Logger, opts ...Option) *Plugin {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	return &Plugin{
		logger: logger.Named(PluginName),
		opts:   o,
		cfg:    DefaultConfig(),
		known:  map[string]devices.GPU{},
	}
}

// PluginInfo implements base.BasePlugin.
func (p *Plugin) PluginInfo() (*base.PluginInfoResponse, error) {
	return &base.PluginInfoResponse{
		Type:              base.PluginTypeDevice,
		PluginApiVersions: []string{device.ApiVersion010},
		PluginVersion:     PluginVersion,
		Name:              PluginName,
	}, nil
}

// ConfigSchema implements base.BasePlugin.
func (p *Plugin) ConfigSchema() (*hclspec.Spec, error) { return configSpec, nil }

// SetConfig implements base.BasePlugin: it validates the config (see ParseConfig) and opens
// the device source. A refused config leaves the previous one in place.
func (p *Plugin) SetConfig(c *base.Config) error {
	var raw []byte
	if c != nil {
		raw = c.PluginConfig
	}
	cfg, err := ParseConfig(raw)
	if err != nil {
		p.logger.Error("refusing plugin config", "error", err)
		return err
	}
	var src devices.Source
	if cfg.Enabled {
		if src, err = p.opts.open(cfg, p.logger); err != nil {
			return fmt.Errorf("opening GPU source: %w", err)
		}
	}
	ignored := make(map[string]bool, len(cfg.IgnoredGPUIDs))
	for _, id := range cfg.IgnoredGPUIDs {
		ignored[id] = true
	}

	p.mu.Lock()
	old := p.src
	p.cfg, p.src, p.ignored = cfg, src, ignored
	p.known = map[string]devices.GPU{}
	p.mu.Unlock()
	if old != nil {
		if err := old.Close(); err != nil {
			p.logger.Warn("closing previous GPU source", "error", err)
		}
	}
	p.logger.Info("configured", "enabled", cfg.Enabled, "fingerprint_period", cfg.FingerprintPeriod,
		"ignored_gpu_ids", len(cfg.IgnoredGPUIDs), "fake_models", len(cfg.Fake), "fake_health_file", cfg.FakeHealthFile)
	return nil
}

// ErrNotConfigured is returned by the streams when SetConfig has not succeeded.
var ErrNotConfigured = errors.New("nomad-device-fft: plugin is not configured")

// source returns the configured source, or the error the streams should return.
func (p *Plugin) source() (devices.Source, Config, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cfg.Enabled {
		return nil, p.cfg, device.ErrPluginDisabled
	}
	if p.src == nil {
		return nil, p.cfg, ErrNotConfigured
	}
	return p.src, p.cfg, nil
}

// ReservationError says which requested devices the plugin does not offer.
type ReservationError struct {
	Unknown   []string
	Duplicate []string
}

func (e *ReservationError) Error() string {
	var parts []string
	if len(e.Unknown) > 0 {
		parts = append(parts, fmt.Sprintf("unknown device ids %q", e.Unknown))
	}
	if len(e.Duplicate) > 0 {
		parts = append(parts, fmt.Sprintf("device ids requested twice %q", e.Duplicate))
	}
	return "nomad-device-fft: cannot reserve: " + strings.Join(parts, "; ")
}

// Reserve implements device.DevicePlugin: the devices must be among those last
// fingerprinted. The task gets NVIDIA_VISIBLE_DEVICES with the UUIDs in the order given.
func (p *Plugin) Reserve(ids []string) (*device.ContainerReservation, error) {
	if len(ids) == 0 {
		return &device.ContainerReservation{}, nil
	}
	p.mu.Lock()
	rerr := &ReservationError{}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			rerr.Duplicate = append(rerr.Duplicate, id)
		}
		seen[id] = true
		if _, ok := p.known[id]; !ok {
			rerr.Unknown = append(rerr.Unknown, id)
		}
	}
	var models []string
	for _, id := range ids {
		if g, ok := p.known[id]; ok && !slices.Contains(models, g.Model) {
			models = append(models, g.Model)
		}
	}
	p.mu.Unlock()
	if len(rerr.Unknown) > 0 || len(rerr.Duplicate) > 0 {
		sort.Strings(rerr.Unknown)
		sort.Strings(rerr.Duplicate)
		return nil, rerr
	}
	return &device.ContainerReservation{
		Envs: map[string]string{VisibleDevicesEnv: strings.Join(ids, ","), ModelEnv: strings.Join(models, ",")},
	}, nil
}

// setKnown records the devices of the latest fingerprint.
func (p *Plugin) setKnown(gpus []devices.GPU) {
	known := make(map[string]devices.GPU, len(gpus))
	for _, g := range gpus {
		known[g.UUID] = g
	}
	p.mu.Lock()
	p.known = known
	p.mu.Unlock()
}

// model returns the model of a fingerprinted device.
func (p *Plugin) model(uuid string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	g, ok := p.known[uuid]
	return g.Model, ok
}

// filterIgnored drops the GPUs listed in ignored_gpu_ids (and the instances of an ignored
// partitioned GPU).
func (p *Plugin) filterIgnored(gpus []devices.GPU) []devices.GPU {
	p.mu.Lock()
	ignored := p.ignored
	p.mu.Unlock()
	if len(ignored) == 0 {
		return gpus
	}
	out := gpus[:0:0]
	for _, g := range gpus {
		if ignored[g.UUID] || (g.ParentUUID != "" && ignored[g.ParentUUID]) {
			continue
		}
		out = append(out, g)
	}
	return out
}

// send delivers v on out unless ctx ends first.
func send[T any](ctx context.Context, out chan<- T, v T) bool {
	select {
	case out <- v:
		return true
	case <-ctx.Done():
		return false
	}
}
