package fftctl

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// fftctl dev runs the allocator from jobspecs/fft-allocator.nomad.hcl: two replicas on
// distinct hosts, both passing their Consul health check, one holding the leader lock.
// Stopping the leader's allocation hands the lead to the standby, rounds go on, and Nomad
// replaces the stopped allocation with one that turns healthy in its turn.
func TestDevAllocatorFailsOver(t *testing.T) {
	d := startDev(t, "-round", "2s", "-no-workload")
	d.waitLine(t, 60*time.Second, "Round 0 at ")
	nc, err := api.NewClient(&api.Config{Address: d.NomadAddr})
	if err != nil {
		t.Fatal(err)
	}

	first := d.waitPassing(t, 2, nil)
	nodes := map[string]bool{}
	for _, a := range running(t, nc) {
		nodes[a.NodeID] = true
	}
	if len(nodes) != 2 {
		t.Errorf("running fft-allocator replicas on %d nodes, want 2 (distinct_hosts)", len(nodes))
	}
	leader := d.waitLeader(t, "")
	if !strings.Contains(strings.Join(first, " "), leader) {
		t.Fatalf("the lock holder %q is none of the passing instances %q", leader, first)
	}

	t.Logf("instances %q pass, allocation %s leads; stopping it", first, leader)
	if _, err := nc.Allocations().Stop(&api.Allocation{ID: leader}, nil); err != nil {
		t.Fatalf("stopping the leader's allocation %s: %v", leader, err)
	}
	next := d.waitLeader(t, leader)
	// The standby goes on from the ledger: fftctl dev shows rounds it recorded.
	shown := d.rounds()
	testenv.Eventually(t, 30*time.Second, time.Second, "a round after the takeover is shown", func() error {
		if n := d.rounds(); n <= shown {
			return fmt.Errorf("%d rounds shown, as at the takeover", n)
		}
		return nil
	})
	// Nomad replaces the stopped allocation, and its replacement passes its check.
	again := d.waitPassing(t, 2, func(ids []string) error {
		for _, id := range ids {
			if !strings.Contains(strings.Join(first, " "), id) {
				return nil
			}
		}
		return fmt.Errorf("no replacement among %q (before the stop: %q)", ids, first)
	})
	for _, a := range running(t, nc) {
		if a.ID == leader {
			t.Errorf("the stopped allocation %s still runs", leader)
		}
	}
	t.Logf("allocation %s took the lead; Nomad replaced %s, instances now %q", next, leader, again)
	// The stopped replica's and its replacement's processes go with the cluster too.
	d.interrupt()
	if code := d.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("fftctl dev exited %d on SIGINT:\n%s", code, d.output())
	}
	if left := leftovers(d.Dir); len(left) > 0 {
		t.Errorf("fftctl dev left behind:\n%s", strings.Join(left, "\n"))
	}
}

// rounds counts the round lines fftctl dev has printed.
func (d *dev) rounds() int {
	return strings.Count(d.output(), "\nRound ")
}

// waitPassing waits until want fft-allocator instances pass their HTTP check in Consul and
// more holds of their service IDs (nil: nothing more), and returns the IDs.
func (d *dev) waitPassing(t *testing.T, want int, more func([]string) error) []string {
	t.Helper()
	var ids []string
	testenv.Eventually(t, 2*time.Minute, time.Second, fmt.Sprintf("%d passing fft-allocator instances", want), func() error {
		b, code, err := get("http://" + d.ConsulAddr + "/v1/health/service/fft-allocator?passing=true")
		if err != nil || code != 200 {
			return fmt.Errorf("health of fft-allocator: HTTP %d, %v", code, err)
		}
		var entries []struct {
			Service struct{ ID string }
			Checks  []struct{ Name string }
		}
		if err := json.Unmarshal(b, &entries); err != nil {
			return err
		}
		ids = ids[:0]
		for _, e := range entries {
			for _, ch := range e.Checks {
				if ch.Name == "fft-allocator health" {
					ids = append(ids, e.Service.ID)
				}
			}
		}
		sort.Strings(ids)
		if len(ids) != want {
			return fmt.Errorf("passing: %q", ids)
		}
		if more != nil {
			return more(ids)
		}
		return nil
	})
	return ids
}

// waitLeader waits until a replica other than not holds the leader lock and returns its ID,
// the allocation ID (the jobspec runs it with -id ${NOMAD_ALLOC_ID}).
func (d *dev) waitLeader(t *testing.T, not string) string {
	t.Helper()
	var got string
	testenv.Eventually(t, 60*time.Second, 500*time.Millisecond, fmt.Sprintf("a replica other than %q leads", not), func() error {
		b, code, err := get("http://" + d.ConsulAddr + "/v1/kv/nomad-fft/v1/leader")
		if err != nil || code != 200 {
			return fmt.Errorf("no lock key (HTTP %d, %v)", code, err)
		}
		var pairs []struct{ Value, Session string }
		if json.Unmarshal(b, &pairs) != nil || len(pairs) == 0 || pairs[0].Session == "" {
			return fmt.Errorf("the lock is not held")
		}
		v, _ := base64.StdEncoding.DecodeString(pairs[0].Value)
		if got = string(v); got == "" || got == not {
			return fmt.Errorf("leader %q", got)
		}
		return nil
	})
	return got
}

// running lists the fft-allocator job's running allocations.
func running(t *testing.T, nc *api.Client) []*api.AllocationListStub {
	t.Helper()
	stubs, _, err := nc.Jobs().Allocations("fft-allocator", true, nil)
	if err != nil {
		t.Fatalf("allocations of fft-allocator: %v", err)
	}
	var out []*api.AllocationListStub
	for _, a := range stubs {
		if a.ClientStatus == api.AllocClientStatusRunning {
			out = append(out, a)
		}
	}
	return out
}
