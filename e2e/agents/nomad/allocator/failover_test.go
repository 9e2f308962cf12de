package allocator

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// Two replicas: one leads and runs rounds, the other waits. Killing the leader hands the lock
// to the standby within the lock's TTL; it resumes from the ledger in Consul, no round number is
// recorded twice, and jobs submitted after the takeover are still scheduled. On two A100 hosts,
// a job that runs through the takeover keeps its allocation on its host.
func TestAllocatorFailover(t *testing.T) {
	st := startStack(t, []testenv.FakeGPUClient{
		{Name: "a100-1", Model: modelA100, Count: 2},
		{Name: "a100-2", Model: modelA100, Count: 2},
	})
	c, cs := st.Cluster, st.consul
	replicas := map[string]*testenv.Process{}
	for _, id := range []string{"replica-a", "replica-b"} {
		replicas[id] = st.allocator(t, "fft-allocator-"+id,
			"-id", id, "-round", "2s", "-leader-ttl", "10s", "-http-addr", "", "-log-level", "debug")
	}
	leader := func() string {
		b, code, err := cs.Get("/v1/kv/" + prefix + "/leader")
		if err != nil || code != http.StatusOK {
			return ""
		}
		var pairs []struct{ Value, Session string }
		if json.Unmarshal(b, &pairs) != nil || len(pairs) == 0 || pairs[0].Session == "" {
			return ""
		}
		v, _ := base64.StdEncoding.DecodeString(pairs[0].Value)
		return string(v)
	}
	var first string
	testenv.Eventually(t, 30*time.Second, 250*time.Millisecond, "a replica takes the lead", func() error {
		if first = leader(); first == "" {
			return fmt.Errorf("no leader")
		}
		return nil
	})

	jobspec := trainJobspec(t)
	register(t, c.API, parseJob(t, c.API, jobspec, "steady", `work = "1000"
seconds = 600`))
	steady := waitAlloc(t, c.API, replicas[first], "steady", "running", "")
	register(t, c.API, parseJob(t, c.API, jobspec, "before", `seconds = 1`))
	waitAlloc(t, c.API, replicas[first], "before", "complete", "")
	before := readRounds(t, cs)

	// The leader crashes; the standby takes over within the TTL (Consul may take up to twice
	// the TTL to expire a session) plus the lock delay.
	replicas[first].Kill()
	standby := "replica-a"
	if first == standby {
		standby = "replica-b"
	}
	testenv.Eventually(t, 45*time.Second, 250*time.Millisecond, "the standby takes the lead", func() error {
		if got := leader(); got != standby {
			return fmt.Errorf("leader %q", got)
		}
		return nil
	})
	register(t, c.API, parseJob(t, c.API, jobspec, "after", `seconds = 1`))
	waitAlloc(t, c.API, replicas[standby], "after", "complete", "")
	if allocs := allocsOf(t, c.API, "steady"); len(allocs) != 1 || allocs[0].ID != steady.ID || allocs[0].ClientStatus != "running" {
		t.Errorf("steady's allocations after the takeover: %d, want its first (%s on node %s) still running alone", len(allocs), steady.ID, steady.NodeID)
	}

	// The audit log: one record per round number, numbered without gaps, and the standby went
	// on from where the leader stopped.
	after := readRounds(t, cs)
	if len(after) <= len(before) {
		t.Fatalf("no rounds recorded after the takeover: %d before, %d after", len(before), len(after))
	}
	for i, r := range after {
		if r.Round != i {
			t.Fatalf("audit record %d is round %d: rounds are duplicated or missing", i, r.Round)
		}
	}
	var ledger struct {
		Round int `json:"round"`
	}
	readKV(t, cs, prefix+"/ledger", &ledger)
	if ledger.Round < len(after) || ledger.Round > len(after)+2 {
		t.Errorf("ledger is at round %d with %d rounds recorded", ledger.Round, len(after))
	}
	var afterLine bool
	for _, r := range after[len(before):] {
		for _, l := range r.Jobs {
			afterLine = afterLine || (strings.HasSuffix(l.ID, "/after") && l.Action == "start")
		}
	}
	if !afterLine {
		t.Errorf("no round after the takeover started the job submitted then")
	}
}
