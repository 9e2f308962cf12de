package workload

import (
	"math"
	"testing"
)

// The expected values below were printed by CPython 3.11's random module
// (random.Random(seed) followed by the same calls in the same order).
func TestPyRandomMatchesCPython(t *testing.T) {
	for _, tc := range []struct {
		name string
		seed uint64
		// random(), getrandbits(32), getrandbits(5), uniform(1.5, 3),
		// choice(range(26)), choice(range(1000)), in this order.
		random    float64
		bits32    uint32
		bits5     uint32
		uniform   float64
		below26   int
		below1000 int
	}{
		{"seed 0", 0, 0.8444218515250481, 3255389356, 28, 2.1308573712462673, 8, 988},
		{"Gavel's job stream for its seed 0", 2, 0.9560342718892494, 4070888059, 27, 1.584827051590213, 2, 369},
		{"Gavel's arrival stream for its seed 0", 3, 0.23796462709189137, 2337446730, 4, 2.054932749822119, 19, 485},
		{"seed 5", 5, 0.6229016948897019, 3185950873, 11, 2.692790348348545, 23, 667},
		{"a two-word seed", 1<<32 + 7, 0.22550888929893187, 1540179448, 10, 2.698849686185963, 12, 944},
	} {
		r := newPyRandom(tc.seed)
		if got := r.random(); got != tc.random {
			t.Errorf("%s: random() = %v, want %v", tc.name, got, tc.random)
		}
		if got := r.uint32(); got != tc.bits32 {
			t.Errorf("%s: getrandbits(32) = %d, want %d", tc.name, got, tc.bits32)
		}
		if got := r.uint32() >> 27; got != tc.bits5 {
			t.Errorf("%s: getrandbits(5) = %d, want %d", tc.name, got, tc.bits5)
		}
		if got := r.uniform(1.5, 3); got != tc.uniform {
			t.Errorf("%s: uniform(1.5, 3) = %v, want %v", tc.name, got, tc.uniform)
		}
		if got := r.below(26); got != tc.below26 {
			t.Errorf("%s: choice(range(26)) index %d, want %d", tc.name, got, tc.below26)
		}
		if got := r.below(1000); got != tc.below1000 {
			t.Errorf("%s: choice(range(1000)) index %d, want %d", tc.name, got, tc.below1000)
		}
	}
}

// TestPyRandomRegenerates crosses the 624-word state refill.
func TestPyRandomRegenerates(t *testing.T) {
	r := newPyRandom(2)
	for range 700 {
		r.random()
	}
	if got, want := r.random(), 0.4747633409578357; got != want {
		t.Errorf("random() after 700 draws = %v, want %v (CPython)", got, want)
	}
}

// TestGavelStream checks the first jobs of Gavel's seed 0 at 1 job/hour
// against CPython running Gavel's draw order (see nextGavel): type, GPUs,
// duration on the V100 and arrival (-1: not checked).
func TestGavelStream(t *testing.T) {
	g := NewGenerator(GenConfig{Rate: 1, Seed: 0, MultiGPU: true, Stream: StreamGavel})
	for k, want := range []struct {
		typ     string
		gpus    int
		seconds float64
		arrival float64
	}{
		{"ResNet-18 (batch size 64)", 8, 68344.35010595087, 0},
		{"Transformer (batch size 16)", 1, 31016.60914593223, 978.344291641206},
		{"Recommendation (batch size 2048)", 1, 2146.6088374387864, 3807.099310116383},
		{"Recommendation (batch size 8192)", 1, 7386.674819745945, 5470.17078262555},
		{"LM (batch size 5)", 4, 6858.69820697011, -1},
	} {
		j, err := g.Next()
		if err != nil {
			t.Fatal(err)
		}
		if j.Type != want.typ || j.GPUs != want.gpus {
			t.Errorf("job %d: %s x%d, want %s x%d", k, j.Type, j.GPUs, want.typ, want.gpus)
		}
		if s := j.Work / j.Rate["v100"]; math.Abs(s-want.seconds) > 1e-9*want.seconds {
			t.Errorf("job %d: %v V100 seconds, want %v", k, s, want.seconds)
		}
		if want.arrival >= 0 && math.Abs(j.Arrival-want.arrival) > 1e-9*want.arrival {
			t.Errorf("job %d: arrival %v, want %v", k, j.Arrival, want.arrival)
		}
	}
}

func TestParseStream(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Stream
		err  bool
	}{
		{"", StreamOurs, false},
		{"ours", StreamOurs, false},
		{"gavel", StreamGavel, false},
		{"python", "", true},
	} {
		got, err := ParseStream(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseStream(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}
