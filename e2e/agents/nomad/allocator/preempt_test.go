package allocator

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// roundLine is one job's line of an audit record.
type roundLine struct {
	ID        string  `json:"id"`
	Model     string  `json:"model"`
	Action    string  `json:"action"`
	RhoBefore float64 `json:"rho_before"`
	RhoAfter  float64 `json:"rho_after"`
	// ReasonCode is why a job waits (UnhealthyGPU, ParkedByOperator, …).
	ReasonCode string `json:"reason_code"`
	// Hosts are where the job runs after the round.
	Hosts []slotLine `json:"hosts"`
}

type roundRec struct {
	Round       int         `json:"round"`
	Start       string      `json:"start"`
	Trigger     string      `json:"trigger"`
	TriggerJobs []string    `json:"trigger_jobs"`
	CreditKept  float64     `json:"credit_kept"`
	Jobs        []roundLine `json:"jobs"`
	Hosts       []hostLine  `json:"hosts"`
	Apply       struct {
		Calls     int      `json:"calls"`
		Conflicts []string `json:"conflicts"`
		Errors    []string `json:"errors"`
	} `json:"apply"`
}

// When a job with much lower FFT cost arrives and the GPUs are taken, the running job is
// preempted (gated, its allocation stopped with time to checkpoint), the new job runs, and the
// preempted job resumes once the GPUs are free; its rho rises while it waits and falls while it
// runs again, faster than its fair share (a third job, too costly to run, shares the cluster).
// The A100s are two hosts of 2 GPUs and each job comes twice, one gang a host: both shorts
// take both hosts, and both longs resume on one each.
func TestAllocatorPreemptsAndResumes(t *testing.T) {
	st := startStack(t, []testenv.FakeGPUClient{
		{Name: "a100-1", Model: modelA100, Count: 2},
		{Name: "a100-2", Model: modelA100, Count: 2},
	})
	c, cs := st.Cluster, st.consul
	proc := st.allocator(t, "fft-allocator",
		"-round", "2s", "-http-addr", "", "-log-level", "debug")
	pair := []string{"-1", "-2"}
	a100 := []string{c.NodeIDs["a100-1"], c.NodeIDs["a100-2"]}

	jobspec := trainJobspec(t)
	// long: W = 100 at 4 per round, volume term 2*100/4 = 50; short: W = 8, volume term 4.
	// slow: W = 1000 at 1 per round, volume term 2000: it waits all along, and while it does,
	// long's fair share is half the GPUs (1 a job per round), half of what long gets when it
	// runs.
	for _, n := range pair {
		register(t, c.API, parseJob(t, c.API, jobspec, "long"+n, `work = "100"
seconds = 600`))
		register(t, c.API, parseJob(t, c.API, jobspec, "slow"+n, `work = "1000"
seconds = 600
throughput = "NVIDIA A100-SXM4-40GB=1"`))
	}
	first := map[string]*api.Allocation{}
	for _, n := range pair {
		first[n] = waitAlloc(t, c.API, proc, "long"+n, "running", "")
	}
	for _, n := range pair {
		register(t, c.API, parseJob(t, c.API, jobspec, "short"+n, `work = "8"
seconds = 5`))
	}

	for _, n := range pair {
		// long is preempted: gated, its allocation stopped, and the task wrote its checkpoint.
		testenv.Eventually(t, 60*time.Second, 500*time.Millisecond, "long"+n+" is parked", func() error {
			a, _, err := c.API.Allocations().Info(first[n].ID, nil)
			if err != nil {
				return err
			}
			if a.DesiredStatus != "stop" || a.ClientStatus != "complete" {
				return fmt.Errorf("first allocation of long%s: desired %s, client %s", n, a.DesiredStatus, a.ClientStatus)
			}
			return nil
		})
		if out := taskOutput(t, c.API, first[n]); !strings.Contains(out, "checkpoint written") {
			t.Errorf("the preempted task long%s did not get its stop signal in time to checkpoint: output %q", n, out)
		}
		if !gated(t, c.API, "long"+n) {
			t.Errorf("long%s was stopped without the gate: Nomad would reschedule it", n)
		}
	}
	for _, n := range pair {
		// short runs on the GPUs long left, and finishes.
		waitAlloc(t, c.API, proc, "short"+n, "complete", "")
	}
	for _, n := range pair {
		// long resumes on a new allocation.
		resumed := waitAlloc(t, c.API, proc, "long"+n, "running", first[n].ID)
		if !slices.Contains(a100, resumed.NodeID) {
			t.Errorf("long%s resumed on node %s, want an A100 client %q", n, resumed.NodeID, a100)
		}
	}
	for _, n := range pair {
		checkParkedAndResumed(t, cs, "default/long"+n)
	}
}

// checkParkedAndResumed reads the story of a preempted job in the audit log: parked in some
// round, its rho rising while it waited, started again later, and its rho falling while it
// runs again. The rounds after the restart may not be recorded yet: it reads until one shows
// the fall. The job's record in Consul agrees: its rho is below the highest it reached while
// waiting.
func checkParkedAndResumed(t *testing.T, cs *testenv.Consul, id string) {
	t.Helper()
	var parkRound, parkCalls, restart, fell int
	var rose bool
	testenv.Eventually(t, 60*time.Second, time.Second, "the audit log shows "+id+"'s rho falling after its restart", func() error {
		parkRound, rose, restart, fell = -1, false, -1, -1
		for _, r := range readRounds(t, cs) {
			for _, l := range r.Jobs {
				if l.ID != id {
					continue
				}
				switch {
				case l.Action == "park" && parkRound < 0:
					parkRound, parkCalls = r.Round, r.Apply.Calls
				case parkRound >= 0 && restart < 0 && l.Model == "" && l.RhoAfter > l.RhoBefore:
					rose = true
				case parkRound >= 0 && l.Action == "start" && restart < 0:
					restart = r.Round
				}
				if restart >= 0 && fell < 0 && l.Model == modelA100 && l.RhoAfter < l.RhoBefore {
					fell = r.Round
				}
			}
			if len(r.Apply.Errors) > 0 {
				t.Fatalf("round %d apply errors: %q", r.Round, r.Apply.Errors)
			}
		}
		if parkRound < 0 || !rose || restart < 0 || fell < 0 {
			return fmt.Errorf("park round %d, rho rose while waiting %v, restart round %d, rho fell while running round %d", parkRound, rose, restart, fell)
		}
		return nil
	})
	t.Logf("%s parked in round %d, restarted in round %d, rho fell in round %d", id, parkRound, restart, fell)
	if parkCalls < 2 {
		t.Errorf("round %d parked %s with %d API calls, want 2+ (gate, stop)", parkRound, id, parkCalls)
	}
	var peak float64
	for _, r := range readRounds(t, cs) {
		for _, l := range r.Jobs {
			if l.ID == id && r.Round < restart {
				peak = max(peak, l.RhoAfter)
			}
		}
	}
	var rec struct {
		Rho    float64 `json:"rho"`
		Status string  `json:"status"`
	}
	readJob(t, cs, id, &rec)
	if rec.Status != "running" || !(rec.Rho < peak) {
		t.Errorf("%s's record: status %q, rho %g; want running, below its peak %g while waiting", id, rec.Status, rec.Rho, peak)
	}
}

// waitAlloc waits for jobID to have an allocation other than `not` in client status `want`.
func waitAlloc(t *testing.T, c *api.Client, proc *testenv.Process, jobID, want, not string) *api.Allocation {
	t.Helper()
	return waitAllocWithin(t, 90*time.Second, c, proc, jobID, want, not)
}

// waitAllocWithin is waitAlloc with its own timeout, for tests where time is what is checked.
func waitAllocWithin(t *testing.T, timeout time.Duration, c *api.Client, proc *testenv.Process, jobID, want, not string) *api.Allocation {
	t.Helper()
	var found *api.Allocation
	testenv.Eventually(t, timeout, 250*time.Millisecond, jobID+" has a "+want+" allocation", func() error {
		if proc.Exited() {
			t.Fatalf("fft-allocator exited")
		}
		var states []string
		for _, s := range allocsOf(t, c, jobID) {
			if s.ID == not {
				continue
			}
			states = append(states, s.ClientStatus)
			if s.ClientStatus == want {
				a, _, err := c.Allocations().Info(s.ID, nil)
				if err != nil {
					return err
				}
				found = a
				return nil
			}
			if s.ClientStatus == "failed" || s.ClientStatus == "lost" {
				t.Fatalf("allocation %s of %s is %s", s.ID, jobID, s.ClientStatus)
			}
		}
		return fmt.Errorf("allocations in states %q", states)
	})
	return found
}

func gated(t *testing.T, c *api.Client, jobID string) bool {
	t.Helper()
	job, _, err := c.Jobs().Info(jobID, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, con := range job.Constraints {
		if con.LTarget == "${meta.fft_gate}" {
			return true
		}
	}
	return false
}

func taskOutput(t *testing.T, c *api.Client, alloc *api.Allocation) string {
	t.Helper()
	r, err := c.AllocFS().Cat(alloc, "alloc/logs/"+taskName+".stdout.0", nil)
	if err != nil {
		t.Errorf("reading the output of %s: %v", alloc.ID, err)
		return ""
	}
	defer r.Close()
	b, _ := io.ReadAll(r)
	return string(b)
}

func readRounds(t *testing.T, cs *testenv.Consul) []roundRec {
	t.Helper()
	var out []roundRec
	for _, raw := range readRoundsRaw(t, cs) {
		var r roundRec
		decodeRecord(t, raw, &r)
		out = append(out, r)
	}
	return out
}

// readRoundsRaw returns every record of the audit log, unzipped JSON.
func readRoundsRaw(t *testing.T, cs *testenv.Consul) [][]byte {
	t.Helper()
	b, code, err := cs.Get("/v1/kv/" + prefix + "/rounds/?recurse=true")
	if err != nil || code != http.StatusOK {
		t.Fatalf("listing the audit log: HTTP %d, %v", code, err)
	}
	var pairs []struct{ Key, Value string }
	if err := json.Unmarshal(b, &pairs); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, p := range pairs {
		raw, err := base64.StdEncoding.DecodeString(p.Value)
		if err == nil {
			raw, err = gunzipped(raw)
		}
		if err != nil {
			t.Fatalf("reading %s: %v", p.Key, err)
		}
		out = append(out, raw)
	}
	return out
}

func decodeRecord(t *testing.T, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decoding a round record: %v", err)
	}
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
