package jobmeta

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/nomad-fft/nomad-fft/allocator"
)

// The job meta keys of the contract. A job is managed by FFT when it has
// KeyWork; every other key is optional unless noted.
const (
	// KeyWork is W_j, the total work in the job's own units (required, > 0).
	KeyWork = "fft.work"
	// KeyWorkUnit names the unit of KeyWork, for example "epochs" or "steps".
	KeyWorkUnit = "fft.work_unit"
	// KeyThroughput is theta_j per GPU model: work units per round with all
	// the job's GPUs, as "Model A=2.1,Model B=1.2". It is optional: a job
	// without it has Spec.LearnThroughput set, its rates to be learned
	// online (package allocator/profile). Present but empty is an error.
	KeyThroughput = "fft.throughput"
	// KeyThroughputSpread is the job's throughput per GPU model when its
	// allocations lie on more than one node (count > 1 spread over hosts),
	// in KeyThroughput's form; a model it leaves out runs spread at its
	// KeyThroughput value. Each model must be one of KeyThroughput's.
	KeyThroughputSpread = "fft.throughput_spread"
	// KeyFamily is the job's family ("ResNet-50"): jobs of one family scale
	// alike across GPU models, which the throughput estimator uses; default
	// "" (none).
	KeyFamily = "fft.family"
	// KeyStateSize is the checkpoint size in GB moved when the job changes
	// model (the switching penalty); default 0.
	KeyStateSize = "fft.state_size"
	// KeyUser is a label the allocator records (job record, audit log,
	// status); default "". The job writes it, so it is never an identity:
	// a tenant is the job's namespace, or a name the operator maps to that
	// namespace (loop.TenantShares.Users).
	KeyUser = "fft.user"
	// KeyWeight is the job's fairness weight w_j; default 1. When the
	// allocator counts weights (engine tenant_weights), the job's reference
	// share of every model is w_j / sum_k w_k over the active jobs instead
	// of 1/|A(t)| (package fairness); without tenant shares a weight above 1
	// counts as 1 (a job may only yield).
	KeyWeight = "fft.weight"
	// KeyGPUs is how errors name d_j, which is not meta but the sum of the
	// job's device "nvidia/gpu" counts.
	KeyGPUs = `device "nvidia/gpu" count`
	// Prefix is what every key of the contract starts with.
	Prefix = "fft."
)

// DefaultWorkUnit is the unit of fft.work when fft.work_unit is absent.
const DefaultWorkUnit = "steps"

// Limits on values. They keep the numbers the round engine multiplies and
// divides far from overflow and make nonsense visible early; each is within
// the engine's own range (allocator/limits.go), and so is the ratio of
// fft.work to each throughput (allocator.MaxWorkRatio).
const (
	// MaxWork bounds fft.work: 1e12 units is more than any training run.
	MaxWork = 1e12
	// MaxThroughput bounds a throughput value (units per round).
	MaxThroughput = 1e12
	// MaxStateSizeGB bounds fft.state_size (a petabyte of checkpoint).
	MaxStateSizeGB = 1e6
	// MinWeight and MaxWeight bound fft.weight, so two jobs' fairness
	// shares differ by a factor of at most 1e12.
	MinWeight = 1e-6
	MaxWeight = 1e6
	// MaxGPUs bounds the gang size d_j.
	MaxGPUs = 1 << 16
	// maxText bounds fft.user and fft.work_unit, maxModelName a model name.
	maxText      = 128
	maxModelName = 256
)

// knownKeys are the keys of the contract; any other fft.* key is an error,
// so a typo (fft.troughput) is caught rather than silently ignored.
var knownKeys = map[string]bool{
	KeyWork: true, KeyWorkUnit: true, KeyThroughput: true, KeyThroughputSpread: true,
	KeyStateSize: true, KeyUser: true, KeyWeight: true, KeyFamily: true,
}

// Spec is a job's validated FFT contract.
type Spec struct {
	// Work is W_j in WorkUnit units.
	Work     float64 `json:"work"`
	WorkUnit string  `json:"work_unit"`
	// Throughput maps GPU model name to work units per round with GPUs
	// GPUs of that model. Every value is > 0. It is nil when the job
	// declares none (then LearnThroughput is true).
	Throughput map[string]float64 `json:"throughput"`
	// SpreadThroughput is fft.throughput_spread: work units per round on a
	// model when the job's allocations lie on several hosts (nil: none).
	SpreadThroughput map[string]float64 `json:"throughput_spread,omitempty"`
	// LearnThroughput marks a job without fft.throughput: its rates are
	// unknown until measured or estimated.
	LearnThroughput bool `json:"learn_throughput,omitempty"`
	// Family is fft.family ("" when absent).
	Family string `json:"family,omitempty"`
	// StateGB is the checkpoint size.
	StateGB float64 `json:"state_gb,omitempty"`
	User    string  `json:"user,omitempty"`
	Weight  float64 `json:"weight"`
	// GPUs is d_j, from the task group's device "nvidia/gpu" blocks.
	GPUs int `json:"gpus"`
}

// Error is one violation of the contract. It names the key, the value seen
// and what was expected.
type Error struct {
	Key    string
	Value  string
	Expect string
}

func (e *Error) Error() string {
	if strings.HasPrefix(e.Key, Prefix) {
		return fmt.Sprintf("job meta %q = %q: expected %s", e.Key, e.Value, e.Expect)
	}
	return fmt.Sprintf("%s = %q: expected %s", e.Key, e.Value, e.Expect)
}

// ErrNotManaged means the job has no fft.* key at all: it does not opt in.
var ErrNotManaged = errors.New("jobmeta: job has no fft.* meta keys")

// Managed reports whether meta opts the job in to FFT (any fft.* key).
func Managed(meta map[string]string) bool {
	for k := range meta {
		if strings.HasPrefix(k, Prefix) {
			return true
		}
	}
	return false
}

// Parse validates a job's meta and GPU demand and returns its Spec. gpus is
// d_j, the sum of the job's device "nvidia/gpu" counts (the caller reads it
// from the jobspec). A job without fft.* keys returns ErrNotManaged; every
// other failure is an error that joins one *Error per bad key, in key order.
func Parse(meta map[string]string, gpus int) (*Spec, error) {
	if !Managed(meta) {
		return nil, ErrNotManaged
	}
	var errs []error
	bad := func(key, value, expect string) {
		errs = append(errs, &Error{Key: key, Value: value, Expect: expect})
	}
	var unknown []string
	for k := range meta {
		if strings.HasPrefix(k, Prefix) && !knownKeys[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		bad(k, meta[k], "one of fft.work, fft.work_unit, fft.throughput, fft.state_size, fft.user, fft.weight, fft.family (this key is unknown)")
	}

	s := &Spec{WorkUnit: DefaultWorkUnit, Weight: 1, GPUs: gpus}
	if v, ok := meta[KeyWork]; !ok {
		bad(KeyWork, "", "a number of work units > 0 (the key is required)")
	} else if w, err := number(v, 0, MaxWork); err != "" {
		bad(KeyWork, v, err)
	} else {
		s.Work = w
	}
	if v, ok := meta[KeyWorkUnit]; ok {
		if t := strings.TrimSpace(v); t == "" || len(t) > maxText || !printable(t) {
			bad(KeyWorkUnit, v, fmt.Sprintf("a unit name such as \"epochs\" or \"steps\" (1 to %d printable characters)", maxText))
		} else {
			s.WorkUnit = t
		}
	}
	if v, ok := meta[KeyThroughput]; !ok {
		s.LearnThroughput = true
	} else if tp, err := parseThroughput(v); err != "" {
		bad(KeyThroughput, v, err)
	} else {
		s.Throughput = tp
	}
	if v, ok := meta[KeyThroughputSpread]; ok {
		if tp, err := parseThroughput(v); err != "" {
			bad(KeyThroughputSpread, v, err)
		} else if m := firstMissing(tp, s.Throughput); m != "" {
			bad(KeyThroughputSpread, v, fmt.Sprintf("models named in %s (%q is not)", KeyThroughput, m))
		} else {
			s.SpreadThroughput = tp
		}
	}
	if v, ok := meta[KeyStateSize]; ok {
		if x, err := number(v, -1, MaxStateSizeGB); err != "" {
			bad(KeyStateSize, v, strings.Replace(err, "a number", "a checkpoint size in GB", 1))
		} else {
			s.StateGB = x
		}
	}
	if v, ok := meta[KeyUser]; ok {
		if t := strings.TrimSpace(v); t == "" || len(t) > maxText || !printable(t) {
			bad(KeyUser, v, fmt.Sprintf("a user or tenant name (1 to %d printable characters)", maxText))
		} else {
			s.User = t
		}
	}
	if v, ok := meta[KeyFamily]; ok {
		if t := strings.TrimSpace(v); t == "" || len(t) > maxText || !printable(t) {
			bad(KeyFamily, v, fmt.Sprintf("a job family name such as \"ResNet-50\" (1 to %d printable characters), or no key", maxText))
		} else {
			s.Family = t
		}
	}
	if v, ok := meta[KeyWeight]; ok {
		if x, err := number(v, 0, MaxWeight); err != "" || x < MinWeight {
			bad(KeyWeight, v, fmt.Sprintf("a fairness weight, a number from %g to %g (default 1)", MinWeight, MaxWeight))
		} else {
			s.Weight = x
		}
	}
	if s.Work > 0 && s.Throughput != nil {
		// The round engine's cost terms divide work by throughput and
		// throughput by work: both must stay in range.
		for _, name := range sortedNames(s.Throughput) {
			if why := allocator.RatioError(s.Work, s.Throughput[name]); why != "" {
				bad(KeyThroughput, meta[KeyThroughput], fmt.Sprintf("model %q with %s = %q: %s", name, KeyWork, meta[KeyWork], why))
				break
			}
		}
	}
	if gpus <= 0 || gpus > MaxGPUs {
		bad(KeyGPUs, strconv.Itoa(gpus), fmt.Sprintf("a task with a device \"nvidia/gpu\" block whose count is 1 to %d (d_j)", MaxGPUs))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// firstMissing is the first model of tp (sorted) that in lacks, "" if none.
func firstMissing(tp, in map[string]float64) string {
	for _, m := range sortedNames(tp) {
		if _, ok := in[m]; !ok {
			return m
		}
	}
	return ""
}

// number parses a finite decimal in (lo, hi] (lo = -1 allows 0). It
// returns the value or a description of what was expected.
func number(v string, lo, hi float64) (float64, string) {
	expect := fmt.Sprintf("a number > 0 and at most %g", hi)
	if lo < 0 {
		expect = fmt.Sprintf("a number >= 0 and at most %g", hi)
	}
	x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x > hi || (lo >= 0 && x <= lo) || x < 0 {
		return 0, expect
	}
	return x, ""
}

// parseThroughput reads "Model A=2.1,Model B=1.2". Model names are the GPU
// model strings the device plugin fingerprints (the Nomad device name);
// they may hold spaces but not '=' or ','. A model given twice is an error.
func parseThroughput(v string) (map[string]float64, string) {
	const expect = `comma-separated MODEL=UNITS_PER_ROUND pairs such as "NVIDIA A100-SXM4-40GB=2.1,Tesla V100-SXM2-16GB=1.2", each value > 0 and at most %g, each model once`
	out := map[string]float64{}
	for _, part := range strings.Split(v, ",") {
		name, val, ok := strings.Cut(part, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" || len(name) > maxModelName || !printable(name) {
			return nil, fmt.Sprintf(expect, MaxThroughput)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Sprintf(expect, MaxThroughput) + fmt.Sprintf(" (model %q appears twice)", name)
		}
		x, bad := number(val, 0, MaxThroughput)
		if bad != "" {
			return nil, fmt.Sprintf(expect, MaxThroughput) + fmt.Sprintf(" (model %q has %q)", name, strings.TrimSpace(val))
		}
		out[name] = x
	}
	return out, ""
}

func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '\uFFFD' {
			return false
		}
	}
	return true
}

func sortedNames(tp map[string]float64) []string {
	names := make([]string, 0, len(tp))
	for n := range tp {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// FormatThroughput writes a throughput map in the fft.throughput syntax,
// models sorted, so Parse(FormatThroughput(m)) == m.
func FormatThroughput(tp map[string]float64) string {
	names := sortedNames(tp)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + "=" + strconv.FormatFloat(tp[n], 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}
