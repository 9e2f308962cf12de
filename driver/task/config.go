package task

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/consul-template/signals"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/hashicorp/nomad/plugins/shared/hclspec"

	"github.com/nomad-fft/nomad-fft/driver/progress"
)

// Defaults, also declared in the schemas.
const (
	DefaultReportPeriod      = 10 * time.Second
	MinReportPeriod          = 100 * time.Millisecond
	DefaultCheckpointSignal  = "SIGUSR1"
	DefaultCheckpointTimeout = 5 * time.Minute
)

// configSpec is the agent's `plugin "nomad-driver-fft" { config { … } }` block.
var configSpec = hclspec.NewObject(map[string]*hclspec.Spec{
	"allocator_address": hclspec.NewDefault(hclspec.NewAttr("allocator_address", "string", false), hclspec.NewLiteral(`""`)),
	// The allocator's HTTPS: its CA, and this client's certificate pair for an allocator with
	// -tls-verify-https-client (the key names of Nomad's own consul and vault blocks).
	"allocator_ca_file":   hclspec.NewDefault(hclspec.NewAttr("allocator_ca_file", "string", false), hclspec.NewLiteral(`""`)),
	"allocator_cert_file": hclspec.NewDefault(hclspec.NewAttr("allocator_cert_file", "string", false), hclspec.NewLiteral(`""`)),
	"allocator_key_file":  hclspec.NewDefault(hclspec.NewAttr("allocator_key_file", "string", false), hclspec.NewLiteral(`""`)),
	"report_period":       hclspec.NewDefault(hclspec.NewAttr("report_period", "string", false), hclspec.NewLiteral(`"10s"`)),
	"checkpoint_root":     hclspec.NewDefault(hclspec.NewAttr("checkpoint_root", "string", false), hclspec.NewLiteral(`""`)),
	// Who tasks run as (the client's own drivers' conventions): a task without `user` runs
	// as default_user; root only with allow_root; allowed_users, when set, is the only
	// users a task may name, and denied_users never.
	"default_user":  hclspec.NewDefault(hclspec.NewAttr("default_user", "string", false), hclspec.NewLiteral(`"nobody"`)),
	"allow_root":    hclspec.NewDefault(hclspec.NewAttr("allow_root", "bool", false), hclspec.NewLiteral(`false`)),
	"allowed_users": hclspec.NewAttr("allowed_users", "list(string)", false),
	"denied_users":  hclspec.NewAttr("denied_users", "list(string)", false),
})

// taskConfigSpec is a task's `config { … }` block.
var taskConfigSpec = hclspec.NewObject(map[string]*hclspec.Spec{
	"command": hclspec.NewAttr("command", "string", true),
	"args":    hclspec.NewAttr("args", "list(string)", false),
	"progress": hclspec.NewBlock("progress", false, hclspec.NewObject(map[string]*hclspec.Spec{
		"pattern":       hclspec.NewAttr("pattern", "string", false),
		"warmup_points": hclspec.NewAttr("warmup_points", "number", false),
	})),
	"checkpoint": hclspec.NewBlock("checkpoint", false, hclspec.NewObject(map[string]*hclspec.Spec{
		"signal":  hclspec.NewAttr("signal", "string", false),
		"timeout": hclspec.NewAttr("timeout", "string", false),
	})),
})

// Config is the plugin's validated configuration.
type Config struct {
	// AllocatorAddress is the fft-allocator's HTTP address; empty: nothing is published.
	AllocatorAddress string
	// AllocatorCAFile verifies an https allocator's certificate (else the system's roots
	// do); AllocatorCertFile and AllocatorKeyFile are this client's certificate, for an
	// allocator that requires one. PEM files, read at SetConfig.
	AllocatorCAFile, AllocatorCertFile, AllocatorKeyFile string
	// ReportPeriod is how often progress is read and published.
	ReportPeriod time.Duration
	// CheckpointRoot, when set, is a folder shared by the clients (NFS, a cluster file system)
	// under which each job's checkpoints live, so that a job resumes on another node.
	CheckpointRoot string
	// DefaultUser runs a task that names no user; AllowRoot lets a task run as root (uid 0);
	// AllowedUsers, when not empty, are the only users a task may run as; DeniedUsers never.
	DefaultUser               string
	AllowRoot                 bool
	AllowedUsers, DeniedUsers []string
}

type rawConfig struct {
	AllocatorAddress  string   `codec:"allocator_address"`
	AllocatorCAFile   string   `codec:"allocator_ca_file"`
	AllocatorCertFile string   `codec:"allocator_cert_file"`
	AllocatorKeyFile  string   `codec:"allocator_key_file"`
	ReportPeriod      string   `codec:"report_period"`
	CheckpointRoot    string   `codec:"checkpoint_root"`
	DefaultUser       string   `codec:"default_user"`
	AllowRoot         bool     `codec:"allow_root"`
	AllowedUsers      []string `codec:"allowed_users"`
	DeniedUsers       []string `codec:"denied_users"`
}

// DefaultTaskUser is who a task that names no user runs as.
const DefaultTaskUser = "nobody"

// DefaultConfig is the configuration before SetConfig or without a config block.
func DefaultConfig() Config {
	return Config{ReportPeriod: DefaultReportPeriod, DefaultUser: DefaultTaskUser}
}

// FieldError is one invalid setting, Field naming it as the user wrote it.
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

// ErrInvalidConfig is wrapped by ParseConfig's errors, ErrInvalidTaskConfig by
// ParseTaskConfig's.
var (
	ErrInvalidConfig     = errors.New("invalid nomad-driver-fft config")
	ErrInvalidTaskConfig = errors.New(`invalid task config for driver "fft"`)
)

// ParseConfig decodes and checks the MessagePack plugin config the agent sends to SetConfig
// (Nomad's schema has already refused unknown keys and wrong types).
func ParseConfig(msgpack []byte) (Config, error) {
	cfg := DefaultConfig()
	if len(msgpack) == 0 {
		return cfg, nil
	}
	var raw rawConfig
	if err := base.MsgPackDecode(msgpack, &raw); err != nil {
		return Config{}, fmt.Errorf("%w: decoding MessagePack: %w", ErrInvalidConfig, err)
	}
	var errs fieldErrors
	if raw.AllocatorAddress != "" {
		u, err := url.Parse(raw.AllocatorAddress)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs.add("allocator_address", "want an http(s) URL such as \"http://127.0.0.1:4650\", got %q", raw.AllocatorAddress)
		}
		cfg.AllocatorAddress = strings.TrimRight(raw.AllocatorAddress, "/")
	}
	cfg.AllocatorCAFile, cfg.AllocatorCertFile, cfg.AllocatorKeyFile = raw.AllocatorCAFile, raw.AllocatorCertFile, raw.AllocatorKeyFile
	errs.checkAllocatorTLS(cfg)
	if raw.ReportPeriod != "" {
		d, err := time.ParseDuration(raw.ReportPeriod)
		switch {
		case err != nil:
			errs.add("report_period", "invalid duration %q: write it as \"10s\"", raw.ReportPeriod)
		case d < MinReportPeriod:
			errs.add("report_period", "%s is below the minimum %s", d, MinReportPeriod)
		default:
			cfg.ReportPeriod = d
		}
	}
	if raw.CheckpointRoot != "" {
		if !filepath.IsAbs(raw.CheckpointRoot) {
			errs.add("checkpoint_root", "want an absolute path, got %q", raw.CheckpointRoot)
		}
		cfg.CheckpointRoot = filepath.Clean(raw.CheckpointRoot)
		if cfg.AllocatorAddress == "" {
			// Checkpoints there are kept per registration of a job, which the allocator tells.
			errs.add("checkpoint_root", "needs allocator_address: the allocator tells which registration of a job (its Nomad create index) a task is of, and checkpoints are kept per registration")
		}
	}
	if raw.DefaultUser != "" {
		cfg.DefaultUser = raw.DefaultUser
	}
	cfg.AllowRoot, cfg.AllowedUsers, cfg.DeniedUsers = raw.AllowRoot, raw.AllowedUsers, raw.DeniedUsers
	if err := cfg.checkUser(cfg.DefaultUser); err != nil {
		errs.add("default_user", "%v", err)
	}
	if err := errs.join(ErrInvalidConfig); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// TaskConfig is a task's validated driver config.
type TaskConfig struct {
	Command string
	Args    []string
	// ProgressPattern, when set, also reads progress from the task's stdout.
	ProgressPattern string
	// WarmupPoints first progress lines of a run are left out of the rate.
	WarmupPoints int
	// CheckpointSignal asks the task for a checkpoint when sent with `nomad alloc signal`.
	CheckpointSignal string
	// CheckpointTimeout is how long the driver waits for the checkpoint that signal asked for.
	CheckpointTimeout time.Duration
}

type rawTaskConfig struct {
	Command  string   `codec:"command"`
	Args     []string `codec:"args"`
	Progress *struct {
		Pattern      string `codec:"pattern"`
		WarmupPoints *int   `codec:"warmup_points"`
	} `codec:"progress"`
	Checkpoint *struct {
		Signal  string `codec:"signal"`
		Timeout string `codec:"timeout"`
	} `codec:"checkpoint"`
}

// ParseTaskConfig decodes and checks a task's driver config; errors name the field.
func ParseTaskConfig(cfg *drivers.TaskConfig) (TaskConfig, error) {
	var raw rawTaskConfig
	if err := cfg.DecodeDriverConfig(&raw); err != nil {
		return TaskConfig{}, fmt.Errorf("%w: decoding: %w", ErrInvalidTaskConfig, err)
	}
	return raw.validate()
}

func (raw rawTaskConfig) validate() (TaskConfig, error) {
	tc := TaskConfig{
		Command: raw.Command, Args: raw.Args, WarmupPoints: progress.DefaultWarmupPoints,
		CheckpointSignal: DefaultCheckpointSignal, CheckpointTimeout: DefaultCheckpointTimeout,
	}
	var errs fieldErrors
	if strings.TrimSpace(raw.Command) == "" {
		errs.add("command", "must not be empty: name the program to run, e.g. \"python3\"")
	}
	if p := raw.Progress; p != nil {
		if p.Pattern != "" {
			if _, err := progress.CompilePattern(p.Pattern); err != nil {
				errs.add("progress.pattern", "%v", err)
			}
			tc.ProgressPattern = p.Pattern
		}
		if p.WarmupPoints != nil {
			if *p.WarmupPoints < 0 || *p.WarmupPoints > 1000 {
				errs.add("progress.warmup_points", "must be between 0 and 1000, got %d", *p.WarmupPoints)
			}
			tc.WarmupPoints = *p.WarmupPoints
		}
	}
	if c := raw.Checkpoint; c != nil {
		if c.Signal != "" {
			if _, err := lookupSignal(c.Signal); err != nil {
				errs.add("checkpoint.signal", "%v", err)
			}
			tc.CheckpointSignal = c.Signal
		}
		if c.Timeout != "" {
			d, err := time.ParseDuration(c.Timeout)
			if err != nil || d <= 0 {
				errs.add("checkpoint.timeout", "want a positive duration such as \"5m\", got %q", c.Timeout)
			}
			tc.CheckpointTimeout = d
		}
	}
	if err := errs.join(ErrInvalidTaskConfig); err != nil {
		return TaskConfig{}, err
	}
	return tc, nil
}

// lookupSignal maps a signal name as Nomad writes it ("SIGUSR1") to the signal.
func lookupSignal(name string) (syscall.Signal, error) {
	s, ok := signals.SignalLookup[strings.ToUpper(name)]
	if !ok {
		return 0, fmt.Errorf("unknown signal %q: use a name such as \"SIGUSR1\" or \"SIGTERM\"", name)
	}
	sig, ok := s.(syscall.Signal)
	if !ok {
		return 0, fmt.Errorf("signal %q cannot be sent to a process group", name)
	}
	return sig, nil
}

type fieldErrors []*FieldError

func (fe *fieldErrors) add(field, format string, args ...any) {
	*fe = append(*fe, &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
}

// join is one error, "invalid …: a: …; b: …", that wraps kind and every field error.
func (fe fieldErrors) join(kind error) error {
	if len(fe) == 0 {
		return nil
	}
	sort.SliceStable(fe, func(i, j int) bool { return fe[i].Field < fe[j].Field })
	msgs := make([]string, len(fe))
	errs := []error{kind}
	for i, e := range fe {
		msgs[i] = e.Error()
		errs = append(errs, e)
	}
	return &configError{msg: kind.Error() + ": " + strings.Join(msgs, "; "), errs: errs}
}

type configError struct {
	msg  string
	errs []error
}

func (e *configError) Error() string   { return e.msg }
func (e *configError) Unwrap() []error { return e.errs }
