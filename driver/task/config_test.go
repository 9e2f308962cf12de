package task

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/helper/pluginutils/hclspecutils"
	"github.com/hashicorp/nomad/helper/pluginutils/hclutils"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/hashicorp/nomad/plugins/shared/hclspec"
)

// parseThroughNomad decodes a `config { … }` block with spec the way the client does
// (Nomad's HCL spec, then MessagePack), returning the schema's errors as one.
func parseThroughNomad(t *testing.T, spec *hclspec.Spec, text string) (*drivers.TaskConfig, error) {
	t.Helper()
	dec, diags := hclspecutils.Convert(spec)
	if diags.HasErrors() {
		t.Fatalf("converting the spec: %v", diags)
	}
	val, diags, errs := hclutils.ParseHclInterface(hclutils.HclConfigToInterface(t, text), dec, nil)
	if diags.HasErrors() {
		return nil, diags
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	dtc := &drivers.TaskConfig{}
	if err := dtc.EncodeDriverConfig(val); err != nil {
		t.Fatalf("encoding: %v", err)
	}
	return dtc, nil
}

func TestTaskConfig(t *testing.T) {
	for _, tc := range []struct {
		name, hcl string
		want      TaskConfig
		wantErr   string
	}{
		{name: "minimal", hcl: `config { command = "python3" }`, want: TaskConfig{
			Command: "python3", WarmupPoints: 2, CheckpointSignal: "SIGUSR1", CheckpointTimeout: 5 * time.Minute}},
		{name: "everything", hcl: `config {
			command = "python3"
			args = ["train.py", "--epochs", "3"]
			progress {
				pattern = "step (?P<done>[0-9]+)"
				warmup_points = 0
			}
			checkpoint {
				signal = "SIGUSR2"
				timeout = "90s"
			}
		}`, want: TaskConfig{Command: "python3", Args: []string{"train.py", "--epochs", "3"}, ProgressPattern: "step (?P<done>[0-9]+)",
			WarmupPoints: 0, CheckpointSignal: "SIGUSR2", CheckpointTimeout: 90 * time.Second}},
		{name: "no command", hcl: `config { args = ["x"] }`, wantErr: `"command" is required`},
		{name: "unknown key", hcl: `config {
			command = "x"
			comand = "y"
		}`, wantErr: `No argument or block type is named "comand"`},
		{name: "empty command", hcl: `config { command = " " }`, wantErr: "command: must not be empty"},
		{name: "pattern without done", hcl: `config {
			command = "x"
			progress { pattern = "step ([0-9]+)" }
		}`, wantErr: `progress.pattern: pattern "step ([0-9]+)" has no named group "done"`},
		{name: "negative warm-up", hcl: `config {
			command = "x"
			progress { warmup_points = -1 }
		}`, wantErr: "progress.warmup_points: must be between 0 and 1000, got -1"},
		{name: "unknown signal", hcl: `config {
			command = "x"
			checkpoint { signal = "SIGFOO" }
		}`, wantErr: `checkpoint.signal: unknown signal "SIGFOO"`},
		{name: "bad timeout and signal, sorted", hcl: `config {
			command = "x"
			checkpoint {
				timeout = "soon"
				signal = "NOPE"
			}
		}`, wantErr: `checkpoint.signal: unknown signal "NOPE": use a name such as "SIGUSR1" or "SIGTERM"; checkpoint.timeout: want a positive duration such as "5m", got "soon"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dtc, err := parseThroughNomad(t, taskConfigSpec, tc.hcl)
			var got TaskConfig
			if err == nil {
				got, err = ParseTaskConfig(dtc)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("task config (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestPluginConfig(t *testing.T) {
	for _, tc := range []struct {
		name, hcl string
		want      Config
		wantErr   string
	}{
		{name: "defaults", hcl: `config {}`, want: Config{DefaultUser: DefaultTaskUser, ReportPeriod: 10 * time.Second}},
		{name: "everything", hcl: `config {
			allocator_address = "http://127.0.0.1:4650/"
			report_period = "2s"
			checkpoint_root = "/mnt/shared/ckpt/"
		}`, want: Config{DefaultUser: DefaultTaskUser, AllocatorAddress: "http://127.0.0.1:4650", ReportPeriod: 2 * time.Second, CheckpointRoot: "/mnt/shared/ckpt"}},
		{name: "unknown key", hcl: `config { allocator = "x" }`, wantErr: `No argument or block type is named "allocator"`},
		// Reports carry each task's own workload identity; a shared static token is gone.
		{name: "allocator_token removed", hcl: `config { allocator_token = "s3cret" }`, wantErr: `No argument or block type is named "allocator_token"`},
		{name: "address without scheme", hcl: `config { allocator_address = "127.0.0.1:4650" }`,
			wantErr: `invalid nomad-driver-fft config: allocator_address: want an http(s) URL such as "http://127.0.0.1:4650", got "127.0.0.1:4650"`},
		{name: "bad period", hcl: `config { report_period = "soon" }`, wantErr: `report_period: invalid duration "soon"`},
		{name: "period too short", hcl: `config { report_period = "1ms" }`, wantErr: "report_period: 1ms is below the minimum 100ms"},
		{name: "users", hcl: `config {
			default_user  = "daemon"
			allowed_users = ["daemon", "nobody"]
			denied_users  = ["bin"]
		}`, want: Config{ReportPeriod: 10 * time.Second, DefaultUser: "daemon", AllowedUsers: []string{"daemon", "nobody"}, DeniedUsers: []string{"bin"}}},
		{name: "root by default needs allow_root", hcl: `config { default_user = "root" }`,
			wantErr: `default_user: user "root" is root (uid 0): a task runs as root only with allow_root = true`},
		{name: "root allowed", hcl: `config {
			default_user = "root"
			allow_root   = true
		}`, want: Config{ReportPeriod: 10 * time.Second, DefaultUser: "root", AllowRoot: true}},
		{name: "default user denied", hcl: `config {
			denied_users = ["nobody"]
		}`, wantErr: `default_user: user "nobody" is in the plugin's denied_users`},
		{name: "unknown default user", hcl: `config { default_user = "no-such-user-fft" }`, wantErr: `default_user: user "no-such-user-fft"`},
		{name: "relative root", hcl: `config { checkpoint_root = "ckpt" }`, wantErr: `checkpoint_root: want an absolute path, got "ckpt"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dtc, err := parseThroughNomad(t, configSpec, tc.hcl)
			var got Config
			if err == nil {
				// The agent sends the plugin config as MessagePack, as the task's.
				var raw map[string]any
				if err := dtc.DecodeDriverConfig(&raw); err != nil {
					t.Fatal(err)
				}
				var b []byte
				if err := base.MsgPackEncode(&b, raw); err != nil {
					t.Fatal(err)
				}
				got, err = ParseConfig(b)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("config (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestREADMEExamples parses the agent and task config examples of the driver's README with
// the driver's schemas, so that the documentation keeps to the code.
func TestREADMEExamples(t *testing.T) {
	b, err := os.ReadFile("../../cmd/nomad-driver-fft/README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, ex := range []struct {
		after string
		spec  *hclspec.Spec
	}{{`plugin "nomad-driver-fft" {`, configSpec}, {`driver       = "fft"`, taskConfigSpec}} {
		i := strings.Index(readme, ex.after)
		if i < 0 {
			t.Fatalf("README.md has no example with %q", ex.after)
		}
		block := configBlock(readme[i:])
		dtc, err := parseThroughNomad(t, ex.spec, block)
		if err != nil {
			t.Fatalf("README.md's example after %q:\n%s\n%v", ex.after, block, err)
		}
		if ex.spec == taskConfigSpec {
			if _, err := ParseTaskConfig(dtc); err != nil {
				t.Errorf("README.md's task config: %v", err)
			}
			continue
		}
		var raw map[string]any
		var mp []byte
		if err := dtc.DecodeDriverConfig(&raw); err != nil {
			t.Fatal(err)
		}
		if err := base.MsgPackEncode(&mp, raw); err != nil {
			t.Fatal(err)
		}
		if _, err := ParseConfig(mp); err != nil {
			t.Errorf("README.md's plugin config: %v", err)
		}
	}
}

// configBlock is the first `config { … }` block of text, braces matched.
func configBlock(text string) string {
	start := strings.Index(text, "config {")
	depth := 0
	for i := start; i < len(text); i++ {
		switch text[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return text[start : i+1]
			}
		}
	}
	return text[start:]
}
