package allocator

import (
	"slices"
	"testing"
	"time"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// With a long round (120 s), a job submitted while the GPUs are idle starts within seconds: its
// arrival brings a round forward. A second job that arrives while the GPUs are busy waits, and
// the first job's finish brings the round that starts it forward too. Both happen well before
// the next regular round could. The A100s are two hosts of 2 GPUs, and a long job (filler)
// holds one of them throughout: the GPUs idle, and then busy, are the other host's.
func TestEarlyRoundOnArrivalAndFinish(t *testing.T) {
	st := startStack(t, []testenv.FakeGPUClient{
		{Name: "a100-1", Model: modelA100, Count: 2},
		{Name: "a100-2", Model: modelA100, Count: 2},
	})
	c, cs := st.Cluster, st.consul
	proc := st.allocator(t, "fft-allocator", "-round", "120s", "-min-round-gap", "1s", "-http-addr", "", "-log-level", "debug")
	// Round 0 runs at once and finds nothing to do: every GPU idle.
	var r0 roundRec
	readKV(t, cs, prefix+"/rounds/000000000000", &r0)
	if r0.Trigger != "schedule" || len(r0.Jobs) != 0 {
		t.Fatalf("round 0: trigger %q, %d jobs; want the first scheduled round, with nothing to do", r0.Trigger, len(r0.Jobs))
	}
	jobspec := trainJobspec(t)
	register(t, c.API, parseJob(t, c.API, jobspec, "filler", `work = "1000"
seconds = 600`))
	filler := waitAllocWithin(t, 60*time.Second, c.API, proc, "filler", "running", "")

	submitted := time.Now()
	register(t, c.API, parseJob(t, c.API, jobspec, "early", `seconds = 10`))
	// Well under the 120 s round: only an early round can start it in time.
	waitAllocWithin(t, 60*time.Second, c.API, proc, "early", "running", "")
	t.Logf("early runs %s after its submission", time.Since(submitted).Round(time.Millisecond))

	register(t, c.API, parseJob(t, c.API, jobspec, "second", `seconds = 1`))
	waitAlloc(t, c.API, proc, "early", "complete", "")
	finished := time.Now()
	// second runs for a second: wait for it to be done, still well under the round.
	waitAllocWithin(t, 60*time.Second, c.API, proc, "second", "complete", "")
	t.Logf("second is done %s after early finished", time.Since(finished).Round(time.Millisecond))
	if a, _, err := c.API.Allocations().Info(filler.ID, nil); err != nil || a.ClientStatus != "running" || a.DesiredStatus != "run" {
		t.Errorf("filler's allocation %+v (%v): want it running throughout, its host never the idle one", a, err)
	}

	// The audit log names the trigger of each early round, and each came seconds after the
	// round before it, so it kept that round's credit only for the seconds that passed (a
	// fraction of the 120 s round), not for a whole round.
	started := map[string]roundRec{}
	for _, r := range readRounds(t, cs) {
		for _, l := range r.Jobs {
			if l.Action == "start" {
				started[l.ID] = r
			}
		}
	}
	for id, want := range map[string]string{"default/early": "arrival", "default/second": "finish"} {
		r, ok := started[id]
		if !ok || r.Trigger != want || !(r.CreditKept > 0 && r.CreditKept < 0.5) {
			t.Errorf("%s: started by round %d with trigger %q for %q, credit kept %g; want an early %q round keeping under half a round's credit",
				id, r.Round, r.Trigger, r.TriggerJobs, r.CreditKept, want)
		}
		if want == "arrival" && !slices.Contains(r.TriggerJobs, id) {
			t.Errorf("%s: the arrival round answers %q, not this job", id, r.TriggerJobs)
		}
	}
}
