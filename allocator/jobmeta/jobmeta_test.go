package jobmeta

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
)

// meta builds a valid contract and applies edits; an empty value deletes the key.
func meta(edits ...string) map[string]string {
	m := map[string]string{
		KeyWork:       "90",
		KeyWorkUnit:   "epochs",
		KeyThroughput: "NVIDIA A100-SXM4-40GB=2.1, Tesla V100-SXM2-16GB=1.2",
		KeyStateSize:  "0.5",
		KeyUser:       "alice",
		KeyWeight:     "2",
		"owner":       "not ours",
	}
	for i := 0; i+1 < len(edits); i += 2 {
		if edits[i+1] == "" {
			delete(m, edits[i])
		} else {
			m[edits[i]] = edits[i+1]
		}
	}
	return m
}

func TestParseValid(t *testing.T) {
	got, err := Parse(meta(), 2)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := &Spec{
		Work: 90, WorkUnit: "epochs",
		Throughput: map[string]float64{"NVIDIA A100-SXM4-40GB": 2.1, "Tesla V100-SXM2-16GB": 1.2},
		StateGB:    0.5, User: "alice", Weight: 2, GPUs: 2,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse = %+v, want %+v", got, want)
	}

	// Optional keys take their defaults.
	got, err = Parse(meta(KeyWorkUnit, "", KeyStateSize, "", KeyUser, "", KeyWeight, ""), 1)
	if err != nil {
		t.Fatalf("Parse without optional keys: %v", err)
	}
	if got.WorkUnit != DefaultWorkUnit || got.Weight != 1 || got.StateGB != 0 || got.User != "" {
		t.Errorf("defaults: got %+v, want unit %q, weight 1, state 0, no user", got, DefaultWorkUnit)
	}
	// A spread throughput for some of the declared models.
	got, err = Parse(meta(KeyThroughputSpread, "Tesla V100-SXM2-16GB=0.9"), 2)
	if err != nil {
		t.Fatalf("Parse with a spread throughput: %v", err)
	}
	if want := map[string]float64{"Tesla V100-SXM2-16GB": 0.9}; !reflect.DeepEqual(got.SpreadThroughput, want) {
		t.Errorf("spread = %v, want %v", got.SpreadThroughput, want)
	}
	// A state size of 0 is allowed, a numeric model name too.
	if _, err := Parse(meta(KeyStateSize, "0", KeyThroughput, "1080=3"), 1); err != nil {
		t.Errorf("state size 0 and numeric model: %v", err)
	}
}

func TestParseOptionalThroughput(t *testing.T) {
	for _, tc := range []struct {
		name   string
		meta   map[string]string
		learn  bool
		tp     map[string]float64
		family string
	}{
		{"declared", meta(), false, map[string]float64{"NVIDIA A100-SXM4-40GB": 2.1, "Tesla V100-SXM2-16GB": 1.2}, ""},
		{"absent: learned", meta(KeyThroughput, ""), true, nil, ""},
		{"absent, with family", meta(KeyThroughput, "", KeyFamily, " ResNet-50 "), true, nil, "ResNet-50"},
		{"declared, with family", meta(KeyFamily, "LM"), false, map[string]float64{"NVIDIA A100-SXM4-40GB": 2.1, "Tesla V100-SXM2-16GB": 1.2}, "LM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.meta, 1)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got.LearnThroughput != tc.learn || !reflect.DeepEqual(got.Throughput, tc.tp) || got.Family != tc.family {
				t.Errorf("Parse = {learn %v, throughput %v, family %q}, want {%v, %v, %q}", got.LearnThroughput, got.Throughput, got.Family, tc.learn, tc.tp, tc.family)
			}
		})
	}
}

func TestParseNotManaged(t *testing.T) {
	if _, err := Parse(map[string]string{"owner": "bob"}, 1); !errors.Is(err, ErrNotManaged) {
		t.Errorf("Parse of a job without fft. keys: err = %v, want ErrNotManaged", err)
	}
	if Managed(nil) || !Managed(map[string]string{"fft.user": "x"}) {
		t.Errorf("Managed: wrong answer")
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		meta map[string]string
		gpus int
		// every error must name these keys, values and expectations
		key, value, expect string
	}{
		{"missing work", meta(KeyWork, ""), 1, KeyWork, "", "required"},
		{"negative work", meta(KeyWork, "-3"), 1, KeyWork, "-3", "> 0"},
		{"zero work", meta(KeyWork, "0"), 1, KeyWork, "0", "> 0"},
		{"NaN work", meta(KeyWork, "NaN"), 1, KeyWork, "NaN", "a number"},
		{"infinite work", meta(KeyWork, "+Inf"), 1, KeyWork, "+Inf", "a number"},
		{"huge work", meta(KeyWork, "1e300"), 1, KeyWork, "1e300", "at most"},
		{"text work", meta(KeyWork, "ten"), 1, KeyWork, "ten", "a number"},
		{"empty throughput", meta(KeyThroughput, " "), 1, KeyThroughput, " ", "MODEL=UNITS_PER_ROUND"},
		{"blank family", meta(KeyFamily, " "), 1, KeyFamily, " ", "job family name"},
		{"control character family", meta(KeyFamily, "a\x01"), 1, KeyFamily, "a\x01", "printable"},
		{"throughput without =", meta(KeyThroughput, "A100"), 1, KeyThroughput, "A100", "MODEL=UNITS_PER_ROUND"},
		{"throughput zero", meta(KeyThroughput, "A100=0"), 1, KeyThroughput, "A100=0", `model "A100" has "0"`},
		{"throughput negative", meta(KeyThroughput, "A100=2,V100=-1"), 1, KeyThroughput, "A100=2,V100=-1", `model "V100" has "-1"`},
		{"throughput duplicate", meta(KeyThroughput, "A100=2, A100=3"), 1, KeyThroughput, "A100=2, A100=3", "appears twice"},
		{"throughput empty model", meta(KeyThroughput, "=2"), 1, KeyThroughput, "=2", "MODEL=UNITS_PER_ROUND"},
		{"throughput trailing comma", meta(KeyThroughput, "A100=2,"), 1, KeyThroughput, "A100=2,", "MODEL=UNITS_PER_ROUND"},
		{"work too large for a slow model", meta(KeyWork, "1e12", KeyThroughput, "A100=2,V100=1e-6"), 1, KeyThroughput, "A100=2,V100=1e-6", `model "V100" with fft.work = "1e12"`},
		{"work too small for a fast model", meta(KeyWork, "1e-300", KeyThroughput, "A100=2"), 1, KeyThroughput, "A100=2", "rounds to finish"},
		{"spread for a model not declared", meta(KeyThroughputSpread, "H100=1"), 2, KeyThroughputSpread, "H100=1", `models named in fft.throughput ("H100" is not)`},
		{"spread zero", meta(KeyThroughputSpread, "Tesla V100-SXM2-16GB=0"), 2, KeyThroughputSpread, "Tesla V100-SXM2-16GB=0", "has \"0\""},
		{"spread without throughput", meta(KeyThroughput, "", KeyThroughputSpread, "A100=1"), 2, KeyThroughputSpread, "A100=1", "models named in"},
		{"negative state size", meta(KeyStateSize, "-1"), 1, KeyStateSize, "-1", "checkpoint size in GB >= 0"},
		{"zero weight", meta(KeyWeight, "0"), 1, KeyWeight, "0", "from 1e-06 to 1e+06"},
		{"negative weight", meta(KeyWeight, "-2"), 1, KeyWeight, "-2", "fairness weight"},
		{"NaN weight", meta(KeyWeight, "NaN"), 1, KeyWeight, "NaN", "fairness weight"},
		{"infinite weight", meta(KeyWeight, "Inf"), 1, KeyWeight, "Inf", "fairness weight"},
		{"tiny weight", meta(KeyWeight, "1e-9"), 1, KeyWeight, "1e-9", "from 1e-06"},
		{"huge weight", meta(KeyWeight, "2e6"), 1, KeyWeight, "2e6", "to 1e+06"},
		{"blank user", meta(KeyUser, "  "), 1, KeyUser, "  ", "user or tenant name"},
		{"control character unit", meta(KeyWorkUnit, "ep\x00ochs"), 1, KeyWorkUnit, "ep\x00ochs", "printable"},
		{"unknown key", meta("fft.troughput", "A100=2"), 1, "fft.troughput", "A100=2", "this key is unknown"},
		{"no GPUs", meta(), 0, KeyGPUs, "0", `device "nvidia/gpu" block`},
		{"too many GPUs", meta(), MaxGPUs + 1, KeyGPUs, "65537", "count is 1 to 65536"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := Parse(tc.meta, tc.gpus)
			if err == nil {
				t.Fatalf("Parse = %+v, want an error naming %q", spec, tc.key)
			}
			var fe *Error
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *jobmeta.Error", err)
			}
			if fe.Key != tc.key || fe.Value != tc.value || !strings.Contains(fe.Expect, tc.expect) {
				t.Errorf("error = {key %q, value %q, expect %q}, want {key %q, value %q, expect containing %q}",
					fe.Key, fe.Value, fe.Expect, tc.key, tc.value, tc.expect)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.key) || !strings.Contains(msg, "expected") {
				t.Errorf("message %q does not name the key %q and what is expected", msg, tc.key)
			}
		})
	}
}

// TestLimitsWithinEngine: a spec at every limit of the contract is one the
// round engine accepts, so a job that passes Parse never fails a round.
func TestLimitsWithinEngine(t *testing.T) {
	for _, tc := range []struct {
		name        string
		work, theta float64
	}{
		{"most work, slowest model", MaxWork, MaxWork / allocator.MaxWorkRatio},
		{"least work, fastest model", MaxThroughput / allocator.MaxWorkRatio, MaxThroughput},
	} {
		in := allocator.Instance{
			Config: allocator.DefaultConfig(),
			Models: []allocator.Model{{Name: "A", GPUs: MaxGPUs}},
			Jobs:   []allocator.Job{{ID: "j", GPUs: MaxGPUs, Work: tc.work, StateGB: MaxStateSizeGB, Throughput: map[string]float64{"A": tc.theta}}},
		}
		if err := in.Validate(); err != nil {
			t.Errorf("%s: the engine rejects a spec at the contract's limits: %v", tc.name, err)
		}
	}
}

func TestParseReportsEveryBadKey(t *testing.T) {
	_, err := Parse(meta(KeyWork, "-1", KeyWeight, "x", KeyStateSize, "big"), 0)
	var keys []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		keys = append(keys, e.(*Error).Key)
	}
	want := []string{KeyWork, KeyStateSize, KeyWeight, KeyGPUs}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("errors name keys %q, want %q", keys, want)
	}
}

func TestFormatThroughputRoundTrip(t *testing.T) {
	in := map[string]float64{"Tesla V100-SXM2-16GB": 1.2, "NVIDIA A100-SXM4-40GB": 2.1, "1080": 0.5}
	s := FormatThroughput(in)
	if want := "1080=0.5,NVIDIA A100-SXM4-40GB=2.1,Tesla V100-SXM2-16GB=1.2"; s != want {
		t.Errorf("FormatThroughput = %q, want %q", s, want)
	}
	out, bad := parseThroughput(s)
	if bad != "" || !reflect.DeepEqual(out, in) {
		t.Errorf("parse(format) = %v (%s), want %v", out, bad, in)
	}
}

// FuzzParse checks that no meta value panics Parse, that a success holds
// only values the round engine accepts, and that every failure is made of
// *Error values naming an fft. key or the device count.
func FuzzParse(f *testing.F) {
	f.Add("90", "epochs", "A100=2.1,V100=1.2", "0.5", "alice", "1", 2)
	f.Add("-1", "", "A100", "x", " ", "0", 0)
	f.Add("1e308", "steps", "=,=", "NaN", "\x00", "+Inf", 1)
	f.Add("5", "", "a=1,a=2", "", "", "", 70000)
	f.Add("5", "", "", "", "", "", 1)
	f.Add("1e12", "", "a=1e-12", "", "", "", 1)
	f.Add("1e-300", "", "a=1", "", "", "", 1)
	f.Fuzz(func(t *testing.T, work, unit, tp, state, user, weight string, gpus int) {
		m := map[string]string{KeyWork: work}
		for k, v := range map[string]string{KeyThroughput: tp, KeyWorkUnit: unit, KeyStateSize: state, KeyUser: user, KeyWeight: weight} {
			if v != "" {
				m[k] = v
			}
		}
		spec, err := Parse(m, gpus)
		if err != nil {
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				fe, ok := e.(*Error)
				if !ok || fe.Key == "" || fe.Expect == "" {
					t.Fatalf("error %#v does not name a key and what is expected", e)
				}
			}
			return
		}
		ok := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
		if !(spec.Work > 0 && ok(spec.Work)) || !(spec.Weight >= MinWeight && spec.Weight <= MaxWeight) || spec.StateGB < 0 || !ok(spec.StateGB) ||
			spec.GPUs < 1 || (len(spec.Throughput) == 0) != spec.LearnThroughput || spec.LearnThroughput != (tp == "") {
			t.Fatalf("accepted an invalid spec %+v from %q", spec, m)
		}
		for name, v := range spec.Throughput {
			if name == "" || strings.ContainsAny(name, ",=") || !(v > 0) || !ok(v) {
				t.Fatalf("accepted throughput %q=%v from %q", name, v, tp)
			}
		}
		if spec.LearnThroughput {
			return
		}
		// The engine accepts the job on models of its throughput.
		in := allocator.Instance{Config: allocator.DefaultConfig(), Jobs: []allocator.Job{{
			ID: "j", GPUs: spec.GPUs, Work: spec.Work, StateGB: spec.StateGB, Throughput: spec.Throughput}}}
		for _, name := range sortedNames(spec.Throughput) {
			in.Models = append(in.Models, allocator.Model{Name: name, GPUs: spec.GPUs})
		}
		if err := in.Validate(); err != nil {
			t.Fatalf("Parse accepted %q but the round engine rejects it: %v", m, err)
		}
		back, bad := parseThroughput(FormatThroughput(spec.Throughput))
		if bad != "" || !reflect.DeepEqual(back, spec.Throughput) {
			t.Fatalf("throughput does not round-trip: %v -> %q -> %v (%s)", spec.Throughput, FormatThroughput(spec.Throughput), back, bad)
		}
	})
}
