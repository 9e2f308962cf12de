package allocator

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// equivJob is one job of the equivalence workload: it arrives before round Round, on GPUs
// GPUs, with Work work units and the throughputs per 300 s round on each model.
type equivJob struct {
	Name       string
	Round      int
	GPUs       int
	Work       float64
	A100, V100 float64
}

// The simulator runs the allocator's own round loop: the same small workload through
// `fftctl simulate` and through fft-allocator against real Nomad and Consul agents (fake GPUs,
// tasks that report their progress) starts, migrates and parks the same jobs on the same
// models in the same rounds. Rounds are run one at a time (fft-allocator -once, each after
// the cluster settled), so the comparison is of decisions, not of timing: what it compares is
// every job's action, model and hosts in each of the first four rounds, and rho, which both
// must derive from the same ledger. Real timing only enters through finishes, so no job
// finishes within them (works are long); arrivals do (jobs join before each of rounds 0-2),
// and they make the loop start, migrate and park.
//
// Each model is two hosts of 2 GPUs, and each 2-GPU job comes twice: every gang fills a host,
// and both placements, the simulator's hosts and the live loop's pins to Nomad nodes, must
// find a host for each. Two 1-GPU jobs, fast only on the V100s, start there in round 0 and
// share one host (best fit), so one V100 host is left for the gangs: one mover moves there,
// its twin is parked, and one wide job starts. The hosts are compared by their rank among
// their model's hosts: the simulator names its hosts and Nomad its nodes differently, and the
// placement stage orders both by ID, so the same decisions put each job on the host of the
// same rank. settle checks that Nomad runs each allocation on the node the round named.
func TestSimulatorMatchesLiveRounds(t *testing.T) {
	const rounds, roundSeconds = 4, 300
	jobs := []equivJob{
		{"solo-1", 0, 1, 300, 0.3, 3}, // crawl on the A100s: one V100 host holds both
		{"solo-2", 0, 1, 300, 0.3, 3},
	}
	for _, j := range []equivJob{
		{"mover", 0, 2, 1000, 4, 3},  // start on the A100s alone
		{"picky", 1, 2, 400, 4, 0.5}, // crawl on the V100s: a mover moves there, the pickies take the A100s
		{"wide", 2, 2, 500, 2, 2},    // as fast on both: the free V100 host goes to one, the mover is parked
	} {
		for _, n := range []string{"-1", "-2"} {
			pair := j
			pair.Name += n
			jobs = append(jobs, pair)
		}
	}
	st := startStack(t, []testenv.FakeGPUClient{
		{Name: "v100-1", Model: modelV100, Count: 2, Extra: `memory_mib = 16384`},
		{Name: "v100-2", Model: modelV100, Count: 2, Extra: `memory_mib = 16384`},
		{Name: "a100-1", Model: modelA100, Count: 2},
		{Name: "a100-2", Model: modelA100, Count: 2},
	})
	want := simulate(t, st.root, jobs, rounds, roundSeconds)

	c, cs := st.Cluster, st.consul
	jobspec := trainJobspec(t)
	fftctl := testenv.MainBinary(t, "fftctl")
	next := 0
	got := make([]map[string]string, rounds)
	for r := 0; r < rounds; r++ {
		for ; next < len(jobs) && jobs[next].Round <= r; next++ {
			j := jobs[next]
			register(t, c.API, parseJob(t, c.API, jobspec, j.Name, fmt.Sprintf(`work = %q
seconds = 600
gpu_count = %d
fftctl = %q
consul_addr = %q
throughput = "%s=%g,%s=%g"`, fmt.Sprint(j.Work), j.GPUs, fftctl, st.consul.HTTP, modelA100, j.A100, modelV100, j.V100)))
		}
		out, err := exec.Command(st.bin, st.args("-once", "-round", fmt.Sprintf("%ds", roundSeconds), "-http-addr", "", "-log-level", "debug")...).CombinedOutput()
		if err != nil {
			t.Fatalf("fft-allocator -once, round %d: %v\n%s", r, err, out)
		}
		var rec roundRec
		readKV(t, cs, fmt.Sprintf("%s/rounds/%012d", prefix, r), &rec)
		got[r] = actions(rec, "default/")
		settle(t, c, rec)
	}
	for r := 0; r < rounds; r++ {
		if fmt.Sprint(want[r]) != fmt.Sprint(got[r]) {
			t.Errorf("round %d:\n simulator: %v\n live:      %v", r, want[r], got[r])
		}
	}
	t.Logf("rounds compared: %v", got)
}

// simulate runs the workload through `fftctl simulate` with the live allocator's settings
// (300 s rounds, the 30 s restart it prices by default) and returns each round's actions from
// the loop's own round records.
func simulate(t *testing.T, dir string, jobs []equivJob, rounds, roundSeconds int) []map[string]string {
	t.Helper()
	trace := filepath.Join(dir, "equivalence.csv")
	var b strings.Builder
	fmt.Fprintf(&b, "id,job_type,arrival_s,gpus,work,rate:%s,rate:%s\n", modelA100, modelV100)
	for _, j := range jobs {
		fmt.Fprintf(&b, "%s,custom,%d,%d,%g,%g,%g\n", j.Name, j.Round*roundSeconds, j.GPUs, j.Work, j.A100/float64(roundSeconds), j.V100/float64(roundSeconds))
	}
	if err := os.WriteFile(trace, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	outDir := filepath.Join(dir, "sim-out")
	cmd := exec.Command(testenv.MainBinary(t, "fftctl"), "simulate", "-trace", trace, "-policies", "fft",
		"-cluster", fmt.Sprintf("%s=2x2,%s=2x2", modelV100, modelA100), "-round-seconds", fmt.Sprint(roundSeconds), "-restart-seconds", "30",
		"-max-rounds", fmt.Sprint(rounds), "-records", "-plots=false", "-out", outDir, "-quiet",
		// Fixed rounds, as the live side runs them (-once, one round at a time); the
		// simulator's default is the allocator's early-round schedule.
		"-min-round-gap", "0s")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fftctl simulate: %v\n%s", err, out)
	}
	// A trace run is named rate 0, seed 0.
	f, err := os.Open(filepath.Join(outDir, "records-fft-r0-s0.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var rec roundRec
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("record %d: %v", len(out), err)
		}
		out = append(out, actions(rec, ""))
	}
	if len(out) < rounds {
		t.Fatalf("the simulation recorded %d rounds, want %d", len(out), rounds)
	}
	return out[:rounds]
}

// actions maps job name to "action model rho_after [hosts]" for one round, each host named
// by its model and its rank among that model's hosts ordered by ID ("V100#1").
func actions(rec roundRec, ns string) map[string]string {
	byModel := map[string][]string{}
	for _, h := range rec.Hosts {
		byModel[h.Model] = append(byModel[h.Model], h.ID)
	}
	rank := map[string]string{}
	for model, ids := range byModel {
		slices.Sort(ids)
		for i, id := range ids {
			rank[id] = fmt.Sprintf("%s#%d", model, i)
		}
	}
	out := map[string]string{}
	for _, l := range rec.Jobs {
		var hosts []string
		for _, s := range l.Hosts {
			name, ok := rank[s.Host]
			if !ok {
				name = "unlisted:" + s.Host
			}
			hosts = append(hosts, fmt.Sprintf("%s×%d", name, s.GPUs))
		}
		out[strings.TrimPrefix(l.ID, ns)] = fmt.Sprintf("%s %q %.6g %v", l.Action, l.Model, l.RhoAfter, hosts)
	}
	return out
}

// settle waits until the cluster is as the round left it: every job it started or moved
// runs on a client of its model, on the node its record names where it names one (the live
// loop pins each allocation there), and every job it parked has no running allocation.
func settle(t *testing.T, c *testenv.Cluster, rec roundRec) {
	t.Helper()
	model := map[string]string{} // by node ID
	for name, id := range c.NodeIDs {
		model[id] = map[bool]string{true: modelV100, false: modelA100}[strings.HasPrefix(name, "v100")]
	}
	for _, l := range rec.Jobs {
		id := strings.TrimPrefix(l.ID, "default/")
		testenv.Eventually(t, 90*time.Second, 250*time.Millisecond, fmt.Sprintf("%s settles after %s", id, l.Action), func() error {
			var nodes []string
			for _, s := range allocsOf(t, c.API, id) {
				if s.ClientStatus == "running" && s.DesiredStatus == "run" {
					nodes = append(nodes, s.NodeID)
				}
			}
			switch {
			case l.Model == "" && len(nodes) != 0:
				return fmt.Errorf("%d running allocations, want none", len(nodes))
			case l.Model == "":
				return nil
			case len(nodes) != 1 || model[nodes[0]] != l.Model:
				return fmt.Errorf("running on nodes %v; want one allocation on a %s client", nodes, l.Model)
			case len(l.Hosts) > 0 && nodes[0] != l.Hosts[0].Host:
				return fmt.Errorf("running on node %s; the round placed it on %s", nodes[0], l.Hosts[0].Host)
			}
			return nil
		})
	}
}
