package allocator

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// learnPrefix is where fftctl report writes by default (consulstore.DefaultPrefix), which the
// job's task uses.
const learnPrefix = "nomad-fft/v2"

// learnLine is a round record's job line with the throughputs the round used.
type learnLine struct {
	ID         string `json:"id"`
	Model      string `json:"model"`
	Action     string `json:"action"`
	Throughput map[string]struct {
		UnitsPerRound float64 `json:"units_per_round"`
		LogSD         float64 `json:"log_sd"`
		Source        string  `json:"source"`
	} `json:"throughput"`
	Learn *struct {
		Model  string `json:"model"`
		Reason string `json:"reason"`
	} `json:"learn"`
}

// A job submitted without fft.throughput is profiled: run first on the model its family is
// expected to be fastest on (the V100: Gavel's priors have no A100 row), measured there from
// the progress its task reports, scheduled on the model its estimate favours (the A100, whose
// estimate is uncertain, so its mean is high), and its estimate there is replaced by a
// measurement after a round there; fftctl explain shows each value's source. Rounds are run
// one at a time (fft-allocator -once), each after the cluster settled and the task reported,
// on two hosts of 2 GPUs per model.
func TestAllocatorLearnsThroughput(t *testing.T) {
	st := startStack(t, []testenv.FakeGPUClient{
		{Name: "v100-1", Model: modelV100, Count: 2, Extra: `memory_mib = 16384`},
		{Name: "v100-2", Model: modelV100, Count: 2, Extra: `memory_mib = 16384`},
		{Name: "a100-1", Model: modelA100, Count: 2},
		{Name: "a100-2", Model: modelA100, Count: 2},
	})
	c, cs := st.Cluster, st.consul
	fftctl := testenv.MainBinary(t, "fftctl")
	job := parseJob(t, c.API, trainJobspec(t), "learner", fmt.Sprintf(`work = "1000"
seconds = 900
gpu_count = 2
fftctl = %q
consul_addr = %q`, fftctl, st.consul.HTTP))
	delete(job.Meta, "fft.throughput")
	job.Meta["fft.family"] = "ResNet-50"
	register(t, c.API, job)

	round := func(r int) learnLine {
		t.Helper()
		// The task reports with fftctl report, to its default prefix.
		out, err := exec.Command(st.bin, st.args("-once", "-round", "300s", "-http-addr", "", "-log-level", "debug", "-consul-prefix", learnPrefix)...).CombinedOutput()
		if err != nil {
			t.Fatalf("fft-allocator -once, round %d: %v\n%s", r, err, out)
		}
		var rec struct {
			Jobs []learnLine `json:"jobs"`
		}
		readKV(t, cs, fmt.Sprintf("%s/rounds/%012d", learnPrefix, r), &rec)
		var l learnLine
		for _, j := range rec.Jobs {
			if j.ID == "default/learner" {
				l = j
			}
		}
		settle(t, c, roundRec{Jobs: []roundLine{{ID: l.ID, Model: l.Model, Action: l.Action}}})
		return l
	}
	// reported waits until the task has reported progress beyond done, and returns it.
	reported := func(done float64) float64 {
		t.Helper()
		var now float64
		testenv.Eventually(t, 60*time.Second, 500*time.Millisecond, "a progress report", func() error {
			readKV(t, cs, learnPrefix+"/progress/default/learner", &now)
			if now <= done {
				return fmt.Errorf("progress %g, want more than %g", now, done)
			}
			return nil
		})
		return now
	}

	l := round(0)
	if l.Learn == nil || l.Model != modelV100 || l.Action != "start" {
		t.Fatalf("round 0: %+v: want a start on the V100 to be measured", l)
	}
	// Until a round has run whole on the model with reports at both ends, it stays there.
	r, measured := 1, false
	for ; r < 6 && !measured; r++ {
		done := reported(0)
		reported(done) // a report inside the next round, so that it measures something
		l = round(r)
		v := l.Throughput[modelV100]
		measured = v.Source == "measured"
		if !measured && (l.Learn == nil || l.Model != modelV100) {
			t.Fatalf("round %d: %+v: want it kept on the V100 until measured", r, l)
		}
	}
	if !measured {
		t.Fatalf("not measured on the V100 after %d rounds: %+v", r, l)
	}
	if a := l.Throughput[modelA100]; a.Source != "prior" && a.Source != "estimated" || !(a.LogSD > 0) {
		t.Fatalf("round %d: A100 %+v: want an estimate with an error", r-1, a)
	}
	if l.Model != modelA100 {
		t.Fatalf("round %d: %+v: want it moved to the A100, where its estimate's mean is higher", r-1, l)
	}
	// A round there, whole, with reports: the A100's estimate becomes a measurement.
	for k := 0; k < 4 && l.Throughput[modelA100].Source != "measured"; k, r = k+1, r+1 {
		done := reported(0)
		reported(done)
		l = round(r)
	}
	if a := l.Throughput[modelA100]; a.Source != "measured" || !(a.UnitsPerRound > 0) {
		t.Fatalf("round %d: A100 %+v: want measured after running there", r-1, a)
	}
	out, err := exec.Command(fftctl, "explain", "-consul-addr", st.consul.HTTP, "-consul-prefix", learnPrefix, "learner").CombinedOutput()
	if err != nil {
		t.Fatalf("fftctl explain learner: %v\n%s", err, out)
	}
	for _, w := range []string{"Source", "Log SD", "measured"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("fftctl explain lacks %q:\n%s", w, out)
		}
	}
	t.Logf("fftctl explain learner:\n%s", out)
}
