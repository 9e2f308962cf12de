package chaos

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// faultRevokeToken deletes the allocators' Consul ACL token (every read and write of theirs is
// then refused with 403), waits a few rounds' time, and creates it again with the same
// AccessorID and SecretID.
const faultRevokeToken = "revoke-token"

// consulToken is a Consul ACL token the suite can delete and create again as it was.
type consulToken struct {
	AccessorID, SecretID string
	Policy               string
}

// reporterPolicy is the training tasks' Consul policy: their own progress reports only need
// the progress keys (the suite's tasks share one token; production tasks report through the
// allocator's endpoint with their workload identity instead).
const reporterPolicy = `key_prefix "` + prefix + `/progress/" {
  policy = "write"
}`

// shippedPolicy reads a policy of cmd/fft-allocator/acl; they name the default prefix, the
// suite's.
func shippedPolicy(t *testing.T, name string) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "cmd", "fft-allocator", "acl", name))
	if err != nil {
		t.Fatalf("reading the shipped policy: %v", err)
	}
	return string(b)
}

// setUpACLs creates the allocators' tokens from the shipped policies (Nomad and Consul) and
// the tasks' reporter token.
func (st *stack) setUpACLs(t *testing.T) {
	t.Helper()
	st.allocConsul = st.consulTokenWith(t, "fft-allocator", st.consul.FillAllocatorNode(t, shippedPolicy(t, "consul-policy.hcl")))
	st.reporter = st.consulTokenWith(t, "fft-reporter", reporterPolicy).SecretID
	rules := shippedPolicy(t, "nomad-policy.hcl")
	if _, err := st.API.ACLPolicies().Upsert(&api.ACLPolicy{Name: "fft-allocator", Rules: rules}, nil); err != nil {
		t.Fatalf("creating the Nomad policy: %v", err)
	}
	tok, _, err := st.API.ACLTokens().Create(&api.ACLToken{Name: "fft-allocator", Type: "client", Policies: []string{"fft-allocator"}}, nil)
	if err != nil {
		t.Fatalf("creating the allocators' Nomad token: %v", err)
	}
	st.allocNomad = tok.SecretID
}

func (st *stack) consulTokenWith(t *testing.T, name, rules string) consulToken {
	t.Helper()
	pol, _ := json.Marshal(map[string]string{"Name": name, "Rules": rules})
	if b, code, err := st.consul.Do(http.MethodPut, "/v1/acl/policy", string(pol)); err != nil || code != http.StatusOK {
		t.Fatalf("creating Consul policy %s: HTTP %d %s %v", name, code, b, err)
	}
	tok := consulToken{Policy: name}
	if err := st.createToken(&tok); err != nil {
		t.Fatal(err)
	}
	return tok
}

// createToken creates tok, with its AccessorID and SecretID when set (Consul then keeps them),
// and fills them in.
func (st *stack) createToken(tok *consulToken) error {
	body := map[string]any{"Description": tok.Policy, "Policies": []map[string]string{{"Name": tok.Policy}}}
	if tok.AccessorID != "" {
		body["AccessorID"], body["SecretID"] = tok.AccessorID, tok.SecretID
	}
	raw, _ := json.Marshal(body)
	b, code, err := st.consul.Do(http.MethodPut, "/v1/acl/token", string(raw))
	if err != nil || code != http.StatusOK {
		return fmt.Errorf("creating a Consul token with %s: HTTP %d %s %v", tok.Policy, code, b, err)
	}
	var out consulToken
	if err := json.Unmarshal(b, &out); err != nil || out.SecretID == "" {
		return fmt.Errorf("consul token for %s: %s (%v)", tok.Policy, b, err)
	}
	tok.AccessorID, tok.SecretID = out.AccessorID, out.SecretID
	return nil
}

// injectRevokeToken deletes the allocators' Consul token, checks that Consul refuses it,
// waits, and restores it as it was.
func (st *stack) injectRevokeToken(t *testing.T, rng *rand.Rand) string {
	t.Helper()
	before := st.nextRound()
	statusBefore := st.statuses()
	if b, code, err := st.consul.Do(http.MethodDelete, "/v1/acl/token/"+st.allocConsul.AccessorID, ""); err != nil || code != http.StatusOK {
		t.Fatalf("deleting the allocators' token: HTTP %d %s %v", code, b, err)
	}
	revoked := time.Now()
	if code := st.kvStatus(st.allocConsul.SecretID, prefix+"/ledger"); code != http.StatusForbidden {
		t.Errorf("the revoked token reads the ledger with HTTP %d, want 403", code)
	}
	down := time.Duration(2+rng.Intn(3)) * roundSeconds * time.Second
	time.Sleep(down)
	during := st.nextRound()
	failures, lastError := failedSince(statusBefore, st.statuses())
	restoring := time.Now()
	if err := st.createToken(&st.allocConsul); err != nil {
		t.Fatalf("restoring the allocators' token: %v", err)
	}
	if code := st.kvStatus(st.allocConsul.SecretID, prefix+"/ledger"); code != http.StatusOK {
		t.Errorf("the restored token reads the ledger with HTTP %d, want 200", code)
	}
	st.revocations = append(st.revocations, revocation{From: revoked, To: restoring, RoundBefore: before, RoundDuring: during,
		Failures: failures, LastError: lastError})
	return fmt.Sprintf("revoked for %s (ledger at round %d before, %d at the end; %d rounds failed in the replicas' status, their last errors %q)",
		down, before, during, failures, lastError)
}

// replicaStatus is the part of a replica's GET /v1/status the suite reads.
type replicaStatus struct {
	Leader    bool   `json:"leader"`
	Failures  int    `json:"failures"`
	LastError string `json:"last_error"`
}

// statuses reads every running replica's status (a replica just restarted may not answer).
func (st *stack) statuses() map[string]replicaStatus {
	out := map[string]replicaStatus{}
	for id, url := range st.statusURL {
		// The status takes a Nomad ACL token (-read-auth=nomad, the default).
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			continue
		}
		req.Header.Set("X-Nomad-Token", st.ManagementToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		var s replicaStatus
		if json.NewDecoder(resp.Body).Decode(&s) == nil {
			out[id] = s
		}
		resp.Body.Close()
	}
	return out
}

// failedSince compares two readings of the replicas' status: the rounds failed in between by
// each replica that answered both (a replica restarted meanwhile starts counting again, so it
// is left out), and the last errors of those that failed, joined. The leader may lose its lock
// to the refusal and a standby fail the next attempt, so every such replica counts.
func failedSince(before, after map[string]replicaStatus) (int, string) {
	n, errs := 0, []string{}
	for _, id := range sortedKeys(after) {
		b, ok := before[id]
		if a := after[id]; ok && a.Failures > b.Failures {
			n += a.Failures - b.Failures
			errs = append(errs, id+": "+a.LastError)
		}
	}
	return n, strings.Join(errs, " | ")
}

// revocation is one window in which the allocators' Consul token did not exist: deleted at
// From, created again from To on.
type revocation struct {
	From, To                 time.Time
	RoundBefore, RoundDuring int
	// Failures are the rounds the replicas' status counted failed meanwhile; LastError joins
	// the last round errors of the replicas that failed them, just before the token came back.
	Failures  int
	LastError string
}

// kvStatus is the HTTP status of a KV read with token.
func (st *stack) kvStatus(token, key string) int {
	req, err := http.NewRequest(http.MethodGet, "http://"+st.consul.HTTP+"/v1/kv/"+key, nil)
	if err != nil {
		return 0
	}
	req.Header.Set("X-Consul-Token", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// deniedLine is Consul's refusal of a deleted or insufficient token, as the allocator logs it.
var deniedLine = regexp.MustCompile(`Unexpected response code: 403|ACL not found|Permission denied`)

// revokedRoundsFailed: while the token was revoked no round was recorded beyond the one that
// may have been in flight (every round's Consul write is refused), the replicas counted
// failed rounds, and their logs name Consul's refusal.
func (e *evidence) revokedRoundsFailed() []string {
	var out []string
	for _, r := range e.revocations {
		if r.RoundDuring > r.RoundBefore+1 {
			out = append(out, fmt.Sprintf("the ledger went from round %d to %d while the allocators' token was revoked (%s to %s)",
				r.RoundBefore, r.RoundDuring, r.From.Format(time.RFC3339Nano), r.To.Format(time.RFC3339Nano)))
		}
		// A round that started within a second of either end may have made its Consul
		// calls while the token existed: in flight at the revocation, or reaching Consul
		// only after the token came back. Rounds start every 2 s and the token is down a
		// whole number of rounds, so one can start as it comes back: a CI run recorded a
		// round that started while the test was restoring the token (2026-12-06).
		for _, rec := range e.rounds {
			if rec.recorded() && rec.start.After(r.From.Add(time.Second)) && rec.start.Before(r.To.Add(-time.Second)) {
				out = append(out, fmt.Sprintf("round %d started at %s, while the allocators' token was revoked, and was recorded", rec.Round, rec.Start))
			}
		}
	}
	// A replica's last error can be another failure of the same window (an observe that
	// timed out, or the read that lost the lock), so the refusal itself is looked for in the
	// logs below, and the status only has to count the failed rounds.
	for _, r := range e.revocations {
		if r.Failures == 0 {
			out = append(out, fmt.Sprintf("while the token was revoked (%s to %s) the replicas' status counted 0 failed rounds (last errors %q): want the refused rounds counted",
				r.From.Format(time.RFC3339Nano), r.To.Format(time.RFC3339Nano), r.LastError))
		}
	}
	if len(e.revocations) > 0 && e.deniedFailures == 0 {
		out = append(out, "no replica logged a failed round refused by Consul's ACLs while the token was revoked")
	}
	return out
}
