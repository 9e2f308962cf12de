package device

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/plugins/base"

	"github.com/nomad-fft/nomad-fft/devices"
)

func encode(t testing.TB, v any) []byte {
	t.Helper()
	var b []byte
	if err := base.MsgPackEncode(&b, v); err != nil {
		t.Fatalf("encoding %v: %v", v, err)
	}
	return b
}

// v100 is a fake block as the agent sends it (defaults applied by the schema).
func v100(count any) map[string]any {
	return map[string]any{"gpu": []any{map[string]any{"model": "Tesla V100-SXM2-16GB", "count": count, "memory_mib": 16384}}}
}

func TestParseConfig(t *testing.T) {
	cases := []struct {
		name string
		in   any // nil: empty MessagePack
		want Config
	}{
		{"no config", nil, DefaultConfig()},
		{"empty object", map[string]any{}, DefaultConfig()},
		{
			name: "as the agent sends defaults",
			in:   map[string]any{"enabled": true, "ignored_gpu_ids": []any{}, "fingerprint_period": "1m", "fake": nil},
			want: Config{Enabled: true, IgnoredGPUIDs: []string{}, FingerprintPeriod: time.Minute},
		},
		{
			name: "everything",
			in: map[string]any{
				"enabled": false, "ignored_gpu_ids": []any{"GPU-a", "GPU-b"}, "fingerprint_period": "15s",
				"fake": map[string]any{"gpu": []any{
					map[string]any{"model": "Tesla V100-SXM2-16GB", "count": 2, "memory_mib": 16384, "compute_capability": "7.0"},
					map[string]any{"model": "NVIDIA A100-SXM4-40GB", "count": 1.0},
				}},
			},
			want: Config{
				Enabled: false, IgnoredGPUIDs: []string{"GPU-a", "GPU-b"}, FingerprintPeriod: 15 * time.Second,
				Fake: []devices.FakeGPU{
					{Model: "Tesla V100-SXM2-16GB", Count: 2, MemoryMiB: 16384, ComputeCapability: "7.0"},
					{Model: "NVIDIA A100-SXM4-40GB", Count: 1},
				},
			},
		},
		{
			name: "fake health file",
			in:   map[string]any{"fake": map[string]any{"health_file": "/run/fft/unhealthy", "gpu": []any{map[string]any{"model": "NVIDIA H100 80GB HBM3"}}}},
			want: Config{Enabled: true, FingerprintPeriod: time.Minute, Fake: []devices.FakeGPU{{Model: "NVIDIA H100 80GB HBM3", Count: 1}}, FakeHealthFile: "/run/fft/unhealthy"},
		},
		{
			name: "fake uuid seed",
			in:   map[string]any{"fake": map[string]any{"uuid_seed": "gpu-host-7", "gpu": []any{map[string]any{"model": "NVIDIA H100 80GB HBM3"}, map[string]any{"model": "NVIDIA A30-PCIE-24GB"}}}},
			want: Config{Enabled: true, FingerprintPeriod: time.Minute, Fake: []devices.FakeGPU{
				{Model: "NVIDIA H100 80GB HBM3", Count: 1, UUIDSeed: "gpu-host-7"}, {Model: "NVIDIA A30-PCIE-24GB", Count: 1, UUIDSeed: "gpu-host-7"},
			}},
		},
		{
			name: "count defaults to 1",
			in:   map[string]any{"fake": map[string]any{"gpu": []any{map[string]any{"model": "NVIDIA H100 80GB HBM3"}}}},
			want: Config{Enabled: true, FingerprintPeriod: time.Minute, Fake: []devices.FakeGPU{{Model: "NVIDIA H100 80GB HBM3", Count: 1}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var raw []byte
			if tc.in != nil {
				raw = encode(t, tc.in)
			}
			got, err := ParseConfig(raw)
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("config (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestParseConfigRefuses(t *testing.T) {
	cases := []struct {
		name string
		in   map[string]any
		// fields are the FieldError fields expected, in order; msg is a substring of the error.
		fields []string
		msg    string
	}{
		{"unknown key", map[string]any{"colour": "green"}, []string{"colour"}, `colour: unknown key`},
		{"unknown key in gpu", map[string]any{"fake": map[string]any{"gpu": []any{map[string]any{"model": "NVIDIA A30-PCIE-24GB", "shade": 1}}}}, []string{"fake.gpu[0].shade"}, "fake.gpu[0].shade: unknown key"},
		{"negative count", map[string]any{"fake": v100(-2)}, []string{"fake.gpu[0].count"}, "fake.gpu[0].count: must be between 1 and 1024, got -2"},
		{"zero count", map[string]any{"fake": v100(0)}, []string{"fake.gpu[0].count"}, "got 0"},
		{"fractional count", map[string]any{"fake": v100(1.5)}, []string{"fake.gpu[0].count"}, "must be a whole number"},
		{"count as string", map[string]any{"fake": v100("two")}, []string{"fake.gpu[0].count"}, "must be a whole number, got a string"},
		{"bad duration", map[string]any{"fingerprint_period": "soon"}, []string{"fingerprint_period"}, `fingerprint_period: invalid duration "soon"`},
		{"too short period", map[string]any{"fingerprint_period": "10ms"}, []string{"fingerprint_period"}, "must be at least 1s"},
		{"empty model", map[string]any{"fake": map[string]any{"gpu": []any{map[string]any{"model": "", "count": 1}}}}, []string{"fake.gpu[0].model"}, "fake.gpu[0].model: must not be empty"},
		{"missing model", map[string]any{"fake": map[string]any{"gpu": []any{map[string]any{"count": 1}}}}, []string{"fake.gpu[0].model"}, "must not be empty"},
		{"unknown model without memory", map[string]any{"fake": map[string]any{"gpu": []any{map[string]any{"model": "Tesla T4"}}}}, []string{"fake.gpu[0]"}, `memory_mib must be set for model "Tesla T4"`},
		{"negative memory", map[string]any{"fake": map[string]any{"gpu": []any{map[string]any{"model": "Tesla T4", "memory_mib": -1}}}}, []string{"fake.gpu[0].memory_mib"}, "must not be negative"},
		{"bad compute capability", map[string]any{"fake": map[string]any{"gpu": []any{map[string]any{"model": "Tesla T4", "memory_mib": 15360, "compute_capability": "seven"}}}}, []string{"fake.gpu[0].compute_capability"}, `"seven" is not of the form`},
		{"empty fake", map[string]any{"fake": map[string]any{"gpu": []any{}}}, []string{"fake.gpu"}, "at least one gpu block"},
		{"relative health file", map[string]any{"fake": map[string]any{"health_file": "unhealthy", "gpu": []any{map[string]any{"model": "NVIDIA A30-PCIE-24GB"}}}}, []string{"fake.health_file"}, `fake.health_file: must be an absolute, clean path`},
		{"unclean health file", map[string]any{"fake": map[string]any{"health_file": "/run/../x", "gpu": []any{map[string]any{"model": "NVIDIA A30-PCIE-24GB"}}}}, []string{"fake.health_file"}, `got "/run/../x"`},
		{"uuid seed not string", map[string]any{"fake": map[string]any{"uuid_seed": 7, "gpu": []any{map[string]any{"model": "NVIDIA A30-PCIE-24GB"}}}}, []string{"fake.uuid_seed"}, "must be a string"},
		{"health file not string", map[string]any{"fake": map[string]any{"health_file": 1, "gpu": []any{map[string]any{"model": "NVIDIA A30-PCIE-24GB"}}}}, []string{"fake.health_file"}, "must be a string"},
		{"enabled not bool", map[string]any{"enabled": "yes"}, []string{"enabled"}, "enabled: must be a bool, got a string"},
		{"ignored ids not list", map[string]any{"ignored_gpu_ids": "GPU-a"}, []string{"ignored_gpu_ids"}, "must be a list of strings"},
		{"empty ignored id", map[string]any{"ignored_gpu_ids": []any{"GPU-a", ""}}, []string{"ignored_gpu_ids[1]"}, "ignored_gpu_ids[1]: must not be empty"},
		{
			name:   "several problems, sorted by field",
			in:     map[string]any{"fingerprint_period": "x", "fake": v100(-1), "bogus": true},
			fields: []string{"bogus", "fake.gpu[0].count", "fingerprint_period"},
			msg:    "invalid nomad-device-fft config: bogus: unknown key",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig(encode(t, tc.in))
			if err == nil {
				t.Fatal("ParseConfig accepted a bad config")
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %v does not wrap ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not contain %q", err, tc.msg)
			}
			var fields []string
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var fe *FieldError
				if errors.As(e, &fe) {
					fields = append(fields, fe.Field)
				}
			}
			if diff := cmp.Diff(tc.fields, fields); diff != "" {
				t.Errorf("fields (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestParseConfigNotMsgpack(t *testing.T) {
	for _, raw := range [][]byte{{0xc1}, {0x81}, []byte("enabled = true")} {
		if _, err := ParseConfig(raw); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("ParseConfig(%q) error = %v, want ErrInvalidConfig", raw, err)
		}
	}
}

// FuzzParseConfig checks that no input panics, and that an accepted config is valid: the
// seeds run under plain `go test`.
func FuzzParseConfig(f *testing.F) {
	seeds := []any{
		map[string]any{},
		map[string]any{"enabled": true, "ignored_gpu_ids": []any{"GPU-a"}, "fingerprint_period": "30s"},
		map[string]any{"fake": v100(2)},
		map[string]any{"fake": v100(-1)},
		map[string]any{"fake": map[string]any{"health_file": "/x/../y", "gpu": []any{map[string]any{"model": "NVIDIA A30-PCIE-24GB"}}}},
		map[string]any{"fake": map[string]any{"gpu": []any{map[string]any{"model": "NVIDIA H100 80GB HBM3", "count": 8}}}},
		map[string]any{"fingerprint_period": "soon", "x": []any{1, "a", nil}},
		[]any{"not", "an", "object"},
		"just a string",
	}
	for _, s := range seeds {
		f.Add(encode(f, s))
	}
	f.Add([]byte{})
	f.Add([]byte{0xc1})
	f.Fuzz(func(t *testing.T, raw []byte) {
		cfg, err := ParseConfig(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
			return
		}
		if cfg.FingerprintPeriod < MinFingerprintPeriod {
			t.Fatalf("accepted fingerprint_period %s", cfg.FingerprintPeriod)
		}
		if h := cfg.FakeHealthFile; h != "" && (!filepath.IsAbs(h) || filepath.Clean(h) != h) {
			t.Fatalf("accepted health_file %q", h)
		}
		for i, g := range cfg.Fake {
			if err := g.Validate(); err != nil {
				t.Fatalf("accepted fake gpu %d that devices refuses: %v", i, err)
			}
			if g.Count > maxFakeCount {
				t.Fatalf("accepted count %d", g.Count)
			}
		}
		for _, id := range cfg.IgnoredGPUIDs {
			if strings.TrimSpace(id) == "" {
				t.Fatal("accepted an empty ignored id")
			}
		}
	})
}
