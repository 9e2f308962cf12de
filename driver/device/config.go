package device

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/nomad/plugins/base"

	"github.com/nomad-fft/nomad-fft/devices"
)

// Config is the plugin's validated configuration (the agent's `plugin "nomad-device-fft"
// { config { … } }` block).
type Config struct {
	// Enabled turns the plugin off when false; Nomad then sees no devices from it.
	Enabled bool
	// IgnoredGPUIDs are UUIDs never fingerprinted nor reserved.
	IgnoredGPUIDs []string
	// FingerprintPeriod is how often the device set and health are read again.
	FingerprintPeriod time.Duration
	// Fake, when not empty, presents these GPUs through an in-process NVML instead of the
	// machine's.
	Fake []devices.FakeGPU
	// FakeHealthFile, when not empty, is the fake's health control file: the GPUs it lists
	// report a critical XID and are unhealthy until unlisted (devices.ParseFakeHealth).
	FakeHealthFile string
}

// Defaults, also declared in the config schema (see ConfigSchema).
const (
	DefaultFingerprintPeriod = time.Minute
	// MinFingerprintPeriod keeps a typo such as "1ms" from spinning NVML.
	MinFingerprintPeriod = time.Second
)

// DefaultConfig is the configuration used before SetConfig, or when it carries no config.
func DefaultConfig() Config {
	return Config{Enabled: true, FingerprintPeriod: DefaultFingerprintPeriod}
}

// FieldError is one invalid setting; Field is its path, for example "fake.gpu[1].count".
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

// ErrInvalidConfig is wrapped by every error ParseConfig returns.
var ErrInvalidConfig = errors.New("invalid nomad-device-fft config")

// ParseConfig decodes and validates the MessagePack config Nomad sends to SetConfig. Keys
// missing from it take their defaults; unknown keys, wrong types, a negative or zero count,
// a bad duration and an empty model are refused. The error wraps ErrInvalidConfig and one
// *FieldError per problem, sorted by field.
func ParseConfig(msgpack []byte) (Config, error) {
	cfg := DefaultConfig()
	if len(msgpack) == 0 {
		return cfg, nil
	}
	var raw any
	if err := base.MsgPackDecode(msgpack, &raw); err != nil {
		return Config{}, fmt.Errorf("%w: decoding MessagePack: %w", ErrInvalidConfig, err)
	}
	if raw == nil {
		return cfg, nil
	}
	p := parser{}
	top, ok := p.object("", raw)
	if ok {
		p.unknownKeys("", top, "enabled", "ignored_gpu_ids", "fingerprint_period", "fake")
		if v, ok := top["enabled"]; ok && v != nil {
			cfg.Enabled, _ = p.bool("enabled", v)
		}
		if v, ok := top["ignored_gpu_ids"]; ok && v != nil {
			cfg.IgnoredGPUIDs = p.strings("ignored_gpu_ids", v)
		}
		if v, ok := top["fingerprint_period"]; ok && v != nil {
			cfg.FingerprintPeriod = p.duration("fingerprint_period", v)
		}
		if v, ok := top["fake"]; ok && v != nil {
			cfg.Fake = p.fake("fake", v)
			cfg.FakeHealthFile = p.healthFile("fake.health_file", v)
		}
	}
	if len(p.errs) > 0 {
		sort.SliceStable(p.errs, func(i, j int) bool { return p.errs[i].Field < p.errs[j].Field })
		errs := []error{ErrInvalidConfig}
		for _, e := range p.errs {
			errs = append(errs, e)
		}
		return Config{}, joinErrors(errs)
	}
	return cfg, nil
}

// joinErrors is errors.Join with a one-line message: "invalid …: a: …; b: …".
func joinErrors(errs []error) error {
	msgs := make([]string, 0, len(errs)-1)
	for _, e := range errs[1:] {
		msgs = append(msgs, e.Error())
	}
	return &configError{msg: errs[0].Error() + ": " + strings.Join(msgs, "; "), errs: errs}
}

type configError struct {
	msg  string
	errs []error
}

func (e *configError) Error() string   { return e.msg }
func (e *configError) Unwrap() []error { return e.errs }

// parser collects field errors while walking the decoded MessagePack.
type parser struct{ errs []*FieldError }

func (p *parser) fail(field, format string, args ...any) {
	p.errs = append(p.errs, &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
}

func (p *parser) object(field string, v any) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		name := field
		if name == "" {
			name = "config"
		}
		p.fail(name, "must be a block, got %s", typeName(v))
	}
	return m, ok
}

func (p *parser) unknownKeys(prefix string, m map[string]any, known ...string) {
	allowed := map[string]bool{}
	for _, k := range known {
		allowed[k] = true
	}
	for k := range m {
		if !allowed[k] {
			p.fail(join(prefix, k), "unknown key (allowed: %s)", strings.Join(known, ", "))
		}
	}
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

func (p *parser) bool(field string, v any) (bool, bool) {
	b, ok := v.(bool)
	if !ok {
		p.fail(field, "must be a bool, got %s", typeName(v))
	}
	return b, ok
}

func (p *parser) string(field string, v any) (string, bool) {
	s, ok := v.(string)
	if !ok {
		p.fail(field, "must be a string, got %s", typeName(v))
	}
	return s, ok
}

func (p *parser) strings(field string, v any) []string {
	list, ok := v.([]any)
	if !ok {
		p.fail(field, "must be a list of strings, got %s", typeName(v))
		return nil
	}
	out := make([]string, 0, len(list))
	for i, e := range list {
		f := fmt.Sprintf("%s[%d]", field, i)
		if s, ok := p.string(f, e); ok {
			if strings.TrimSpace(s) == "" {
				p.fail(f, "must not be empty")
				continue
			}
			out = append(out, s)
		}
	}
	return out
}

// integer accepts MessagePack integers and integral floats (HCL numbers may arrive as either).
func (p *parser) integer(field string, v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case uint64:
		if n <= math.MaxInt64 {
			return int64(n), true
		}
	case float64:
		if n == math.Trunc(n) && n >= math.MinInt64 && n < math.MaxInt64 {
			return int64(n), true
		}
		p.fail(field, "must be a whole number, got %v", n)
		return 0, false
	}
	p.fail(field, "must be a whole number, got %s", typeName(v))
	return 0, false
}

func (p *parser) duration(field string, v any) time.Duration {
	s, ok := p.string(field, v)
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		p.fail(field, "invalid duration %q (use Go syntax such as \"30s\" or \"1m\")", s)
	case d < MinFingerprintPeriod:
		p.fail(field, "must be at least %s, got %q", MinFingerprintPeriod, s)
	}
	return d
}

func (p *parser) fake(field string, v any) []devices.FakeGPU {
	m, ok := p.object(field, v)
	if !ok {
		return nil
	}
	p.unknownKeys(field, m, "gpu", "health_file", "uuid_seed")
	var seed string
	if v, ok := m["uuid_seed"]; ok && v != nil {
		seed, _ = p.string(join(field, "uuid_seed"), v)
	}
	gpuField := join(field, "gpu")
	raw, ok := m["gpu"]
	if !ok || raw == nil {
		p.fail(gpuField, "at least one gpu block is required in a fake block")
		return nil
	}
	list, ok := raw.([]any)
	if !ok {
		p.fail(gpuField, "must be a list of gpu blocks, got %s", typeName(raw))
		return nil
	}
	if len(list) == 0 {
		p.fail(gpuField, "at least one gpu block is required in a fake block")
	}
	var out []devices.FakeGPU
	for i, e := range list {
		f := fmt.Sprintf("%s[%d]", gpuField, i)
		g, ok := p.object(f, e)
		if !ok {
			continue
		}
		p.unknownKeys(f, g, "model", "count", "memory_mib", "compute_capability")
		before := len(p.errs)
		gpu := devices.FakeGPU{Count: 1, UUIDSeed: seed}
		if v, ok := g["model"]; ok && v != nil {
			if s, ok := p.string(f+".model", v); ok {
				gpu.Model = s
			}
		}
		if strings.TrimSpace(gpu.Model) == "" {
			p.fail(f+".model", "must not be empty")
		}
		if v, ok := g["count"]; ok && v != nil {
			if n, ok := p.integer(f+".count", v); ok {
				if n < 1 || n > maxFakeCount {
					p.fail(f+".count", "must be between 1 and %d, got %d", maxFakeCount, n)
				}
				gpu.Count = int(n)
			}
		}
		if v, ok := g["memory_mib"]; ok && v != nil {
			if n, ok := p.integer(f+".memory_mib", v); ok {
				if n < 0 {
					p.fail(f+".memory_mib", "must not be negative, got %d", n)
				}
				gpu.MemoryMiB = uint64(max(n, 0))
			}
		}
		if v, ok := g["compute_capability"]; ok && v != nil {
			if s, ok := p.string(f+".compute_capability", v); ok && s != "" {
				if _, _, err := devices.ParseComputeCapability(s); err != nil {
					p.fail(f+".compute_capability", "%v", err)
				}
				gpu.ComputeCapability = s
			}
		}
		if n := len(p.errs); n == before {
			// Cross-field checks, such as memory_mib for a model the catalogue lacks.
			if err := gpu.Validate(); err != nil {
				p.fail(f, "%v", err)
			}
		}
		out = append(out, gpu)
	}
	return out
}

// healthFile reads the fake block's health_file: an absolute path, or absent.
func (p *parser) healthFile(field string, fake any) string {
	m, ok := fake.(map[string]any)
	if !ok || m["health_file"] == nil {
		return ""
	}
	s, ok := p.string(field, m["health_file"])
	switch {
	case !ok || s == "":
	case !filepath.IsAbs(s) || filepath.Clean(s) != s:
		p.fail(field, "must be an absolute, clean path such as \"/run/nomad-device-fft/unhealthy\", got %q", s)
	default:
		return s
	}
	return ""
}

// maxFakeCount bounds a fake model's count: enough for any real node, small enough that a
// typo does not allocate millions of mock devices.
const maxFakeCount = 1024

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a bool"
	case string:
		return "a string"
	case int64, uint64, float64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "a block"
	default:
		return fmt.Sprintf("%T", v)
	}
}
