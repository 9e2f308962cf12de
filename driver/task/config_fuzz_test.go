package task

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/nomad-fft/nomad-fft/driver/progress"
)

// FuzzTaskConfig: any task config that passes Nomad's schema is either refused with an
// error naming a field, or taken with every value in its documented range.
func FuzzTaskConfig(f *testing.F) {
	f.Add("python3", "train.py", "step (?P<done>[0-9]+)", 2, "SIGUSR1", "5m")
	f.Add(" ", "", "", -1, "SIGFOO", "soon")
	f.Add("sh", "-c", "step ([0-9]+)", 1001, "sigterm", "-1s")
	f.Add("x", "", "(?P<done>", 0, "SIGKILL", "0s")
	f.Fuzz(func(t *testing.T, command, arg, pattern string, warmup int, signal, timeout string) {
		raw := rawTaskConfig{Command: command, Args: []string{arg}}
		raw.Progress = &struct {
			Pattern      string `codec:"pattern"`
			WarmupPoints *int   `codec:"warmup_points"`
		}{Pattern: pattern, WarmupPoints: &warmup}
		raw.Checkpoint = &struct {
			Signal  string `codec:"signal"`
			Timeout string `codec:"timeout"`
		}{Signal: signal, Timeout: timeout}
		// Through MessagePack, as the client sends it.
		dtc := &drivers.TaskConfig{}
		if err := dtc.EncodeConcreteDriverConfig(&raw); err != nil {
			t.Skip()
		}
		tc, err := ParseTaskConfig(dtc)
		if err != nil {
			if !strings.HasPrefix(err.Error(), ErrInvalidTaskConfig.Error()+": ") {
				t.Fatalf("error %q does not start with %q", err, ErrInvalidTaskConfig)
			}
			return
		}
		if strings.TrimSpace(tc.Command) == "" || tc.WarmupPoints < 0 || tc.WarmupPoints > 1000 || tc.CheckpointTimeout <= 0 {
			t.Fatalf("took %+v", tc)
		}
		if _, err := lookupSignal(tc.CheckpointSignal); err != nil {
			t.Fatalf("took signal %q: %v", tc.CheckpointSignal, err)
		}
		if tc.ProgressPattern != "" {
			if _, err := progress.CompilePattern(tc.ProgressPattern); err != nil {
				t.Fatalf("took pattern %q: %v", tc.ProgressPattern, err)
			}
		}
	})
}

// FuzzPluginConfig: any plugin config bytes (MessagePack from the agent) are refused with an
// error that says so, or taken with an http(s) address or none, a period of at least the
// minimum and an absolute, clean checkpoint root or none.
func FuzzPluginConfig(f *testing.F) {
	for _, m := range []map[string]any{
		{"allocator_address": "http://127.0.0.1:4650/", "report_period": "2s", "checkpoint_root": "/mnt/shared/ckpt/"},
		{"allocator_address": "127.0.0.1:4650"},
		{"report_period": "1ms"},
		{"checkpoint_root": "ckpt/../x"},
		{"allocator_address": "https://a:1", "allocator_ca_file": "/nonexistent.pem"},
	} {
		var b []byte
		if err := base.MsgPackEncode(&b, m); err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0xc1})
	f.Fuzz(func(t *testing.T, msgpack []byte) {
		cfg, err := ParseConfig(msgpack)
		if err != nil {
			if !strings.HasPrefix(err.Error(), ErrInvalidConfig.Error()+": ") {
				t.Fatalf("error %q does not start with %q", err, ErrInvalidConfig)
			}
			return
		}
		if cfg.AllocatorAddress != "" && !strings.HasPrefix(cfg.AllocatorAddress, "http://") && !strings.HasPrefix(cfg.AllocatorAddress, "https://") {
			t.Fatalf("took address %q", cfg.AllocatorAddress)
		}
		if cfg.ReportPeriod < MinReportPeriod {
			t.Fatalf("took period %s", cfg.ReportPeriod)
		}
		if cfg.CheckpointRoot != "" && (!filepath.IsAbs(cfg.CheckpointRoot) || filepath.Clean(cfg.CheckpointRoot) != cfg.CheckpointRoot) {
			t.Fatalf("took checkpoint root %q", cfg.CheckpointRoot)
		}
	})
}
