package allocator

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// identityJob is a managed job whose task has a workload identity in NOMAD_TOKEN and prints
// it, so the test can report with it as the task would.
const identityJob = `job %q {
  type        = "batch"
  datacenters = ["*"]
  meta = {
    "fft.work"       = "100"
    "fft.throughput" = "Tesla V100-SXM2-16GB=1"
  }
  group "main" {
    task "train" {
      driver = "raw_exec"
      identity {
        env = true
      }
      config {
        command = "/bin/sh"
        args    = ["-c", "echo \"TOKEN=$NOMAD_TOKEN\"; sleep 600"]
      }
      resources {
        cpu    = 50
        memory = 32
        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
`

// With Nomad and Consul ACLs on, the allocator runs rounds with the policies shipped in
// cmd/fft-allocator/acl; a task of job A cannot report progress for job B (nor without a
// token, nor with a forged one); a Consul token that may not write the prefix fails the round
// with a message naming the missing policy and leaves the ledger as it was; a Nomad token
// without submit-job is refused with a message naming it, and the round records the failure. A
// standby answers /v1/health 200; a replica whose Consul token lacks the session block, 503.
func TestACLPoliciesAndReports(t *testing.T) {
	nomad := testenv.RequireNomad(t)
	consul := testenv.RequireConsul(t)
	bin := testenv.MainBinary(t, "fft-allocator")
	root := testenv.TempDir(t)
	cs := testenv.StartConsulWith(t, consul, root, testenv.ConsulOptions{ACL: true})
	c := testenv.StartClusterWith(t, nomad, root, []testenv.FakeGPUClient{
		{Name: "v100", Model: modelV100, Count: 4, Extra: `memory_mib = 16384`, NodePool: gpuPool},
	}, testenv.ClusterOptions{ACL: true})

	nomadPolicy, consulPolicy := shippedPolicies(t, cs)
	nomadToken := nomadTokenWith(t, c.API, "fft-allocator", nomadPolicy)
	noSubmit := nomadTokenWith(t, c.API, "fft-no-submit", strings.Replace(nomadPolicy, `"submit-job", `, "", 1))
	consulToken := consulTokenWith(t, cs, "fft-allocator", consulPolicy)
	consulRead := consulTokenWith(t, cs, "fft-read-only", strings.ReplaceAll(consulPolicy, `policy = "write"`, `policy = "read"`))

	for _, id := range []string{"job-a", "job-b"} {
		register(t, c.API, parseJob(t, c.API, fmt.Sprintf(identityJob, id), id, ""))
	}
	httpPort := testenv.FreePorts(t, 1)[0]
	progressURL := fmt.Sprintf("http://127.0.0.1:%d/v1/progress/default/", httpPort)
	args := func(nomadTok, consulTok string, extra ...string) []string {
		return append([]string{"-nomad-addr", c.Server.HTTP, "-nomad-token", nomadTok, "-consul-addr", cs.HTTP,
			"-consul-token", consulTok, "-consul-prefix", prefix, "-log-level", "debug"}, extra...)
	}
	// The leader runs one round now and the next in an hour: the -once rounds below do not race it.
	proc := testenv.StartProcess(t, "fft-allocator", root, bin, args(nomadToken, consulToken,
		"-round", "1h", "-min-round-gap", "0", "-http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort))...)
	allocA := waitAllocWithin(t, 60*time.Second, c.API, proc, "job-a", "running", "")
	waitAllocWithin(t, 30*time.Second, c.API, proc, "job-b", "running", "")
	// The shipped policy lets the leader follow Nomad's event stream (topic Job, every namespace).
	testenv.Eventually(t, 30*time.Second, 250*time.Millisecond, "the leader following the event stream", func() error {
		raw, err := os.ReadFile(proc.LogPath)
		switch {
		case err != nil:
			return err
		case strings.Contains(string(raw), "event stream broke"):
			t.Fatalf("the event stream failed with the shipped policy:\n%s", raw)
		case !strings.Contains(string(raw), "following Nomad's event stream"):
			return fmt.Errorf("no subscription logged yet")
		}
		return nil
	})

	// Reports: job-a's task token reports for job-a only.
	tokenA := taskToken(t, c.API, allocA)
	for _, tc := range []struct {
		name, job, token, body string
		code                   int
		inBody                 string
	}{
		{"no token", "job-a", "", "7", 401, "no token"},
		{"job a's task for job b", "job-b", tokenA, "7", 403, "cannot report for job"},
		{"forged claims", "job-b", forge(t, tokenA, "job-b"), "7", 403, "Nomad refused it"},
		{"the allocator's own ACL token", "job-a", nomadToken, "7", 403, "not a workload identity"},
		{"beyond the work", "job-a", tokenA, "101", 400, "beyond the job's fft.work = 100"},
		{"job a's task for job a", "job-a", tokenA, "7", 200, `"done": 7`},
	} {
		code, body := put(t, progressURL+tc.job, tc.token, tc.body)
		if code != tc.code || !strings.Contains(body, tc.inBody) {
			t.Errorf("%s: HTTP %d %s, want %d with %q", tc.name, code, body, tc.code, tc.inBody)
		}
	}
	if b, code, err := cs.Get("/v1/kv/" + prefix + "/progress/default/job-a?raw"); err != nil || code != 200 || doneOf(b) != "7" {
		t.Errorf("job-a's stored progress: HTTP %d %q (%v), want 7", code, b, err)
	}
	// The KV path: a task has no Consul token, and Consul refuses the write.
	anon, err := http.NewRequest(http.MethodPut, "http://"+cs.HTTP+"/v1/kv/"+prefix+"/progress/default/job-b", strings.NewReader("99"))
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := http.DefaultClient.Do(anon); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("a progress write to Consul without a token: %v %v, want 403", resp, err)
	} else {
		resp.Body.Close()
	}
	if _, code, _ := cs.Get("/v1/kv/" + prefix + "/progress/default/job-b?raw"); code != http.StatusNotFound {
		t.Errorf("job-b has a stored progress (HTTP %d): job-a's task reported for it", code)
	}

	// A Consul token that may only read the prefix: the round fails at record, names the
	// missing policy, and the ledger stays as it was.
	ledgerIndex := func() uint64 {
		b, code, err := cs.Get("/v1/kv/" + prefix + "/ledger")
		var pairs []struct{ ModifyIndex uint64 }
		if err != nil || code != 200 || json.Unmarshal(b, &pairs) != nil || len(pairs) != 1 {
			t.Fatalf("reading the ledger: HTTP %d %s %v", code, b, err)
		}
		return pairs[0].ModifyIndex
	}
	before := ledgerIndex()
	out, err := runOnce(t, bin, args(nomadToken, consulRead, "-http-addr", "")...)
	// The log quotes the error: unescape its quotes.
	out = strings.ReplaceAll(out, `\"`, `"`)
	if err == nil || !strings.Contains(out, fmt.Sprintf(`lacks key_prefix "%s/" policy "write"`, prefix)) {
		t.Errorf("a round with a read-only Consul token: %v, want a failure naming the key_prefix write policy:\n%s", err, out)
	}
	if after := ledgerIndex(); after != before {
		t.Errorf("the ledger changed (index %d -> %d) in a round that could not record", before, after)
	}

	// Two more replicas behind the leader: one with the shipped token waits for the lock and
	// answers /v1/health 200 (Nomad must not restart it); one whose token lacks the session
	// block can never lead and answers 503 naming the block, so its deployment would not turn
	// healthy.
	noSession := consulTokenWith(t, cs, "fft-no-session", regexp.MustCompile(`(?m)^session "[^"]*" \{[^}]*\}`).ReplaceAllString(consulPolicy, ""))
	ports := testenv.FreePorts(t, 2)
	standbyURL := fmt.Sprintf("http://127.0.0.1:%d/v1/health", ports[0])
	lockless := testenv.StartProcess(t, "fft-allocator-no-session", root, bin, args(nomadToken, noSession, "-id", "no-session",
		"-http-addr", fmt.Sprintf("127.0.0.1:%d", ports[1]))...)
	standby := testenv.StartProcess(t, "fft-allocator-standby", root, bin, args(nomadToken, consulToken, "-id", "standby",
		"-http-addr", fmt.Sprintf("127.0.0.1:%d", ports[0]))...)
	health := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	testenv.Eventually(t, 30*time.Second, 250*time.Millisecond, "the replica without the session block answering 503", func() error {
		if code, body := health(fmt.Sprintf("http://127.0.0.1:%d/v1/health", ports[1])); code != http.StatusServiceUnavailable ||
			!strings.Contains(body, "cannot lead") || !strings.Contains(body, "session block") {
			return fmt.Errorf("HTTP %d %s", code, body)
		}
		return nil
	})
	// The standby has been taking the lock for as long (past the 3 s a refusal takes to show).
	time.Sleep(4 * time.Second)
	if code, body := health(standbyURL); code != http.StatusOK {
		t.Errorf("the standby behind the leader: /v1/health HTTP %d %s, want 200", code, body)
	}
	if raw, err := os.ReadFile(lockless.LogPath); err != nil || strings.Count(string(raw), "cannot take the leader lock: /v1/health answers 503") != 1 {
		t.Errorf("the replica without the session block logged its refusal %d times, want once (%v):\n%s",
			strings.Count(string(raw), "cannot take the leader lock: /v1/health answers 503"), err, raw)
	}
	lockless.Stop()
	standby.Stop()

	// A Nomad token without submit-job: the round cannot start job-c, says what is missing,
	// and records the failed apply; job-a and job-b keep their records.
	register(t, c.API, parseJob(t, c.API, fmt.Sprintf(identityJob, "job-c"), "job-c", ""))
	out, err = runOnce(t, bin, args(noSubmit, consulToken, "-http-addr", "")...)
	out = strings.ReplaceAll(out, `\"`, `"`)
	if err != nil || !strings.Contains(out, `lacks namespace capability "submit-job"`) {
		t.Errorf("a round with a token without submit-job: %v, want a logged refusal naming submit-job:\n%s", err, out)
	}
	var last struct {
		Apply struct {
			Errors []string `json:"errors"`
		} `json:"apply"`
	}
	lastRound(t, cs, &last)
	if len(last.Apply.Errors) == 0 || !strings.Contains(strings.Join(last.Apply.Errors, " "), "submit-job") {
		t.Errorf("the round record's apply errors = %q, want the refused registration naming submit-job", last.Apply.Errors)
	}
	for _, id := range []string{"job-a", "job-b"} {
		var rec struct{ Status string }
		readJob(t, cs, "default/"+id, &rec)
		if rec.Status != "running" {
			t.Errorf("%s's record after the refused round: status %q, want running", id, rec.Status)
		}
	}
	if allocs := allocsOf(t, c.API, "job-c"); len(allocs) != 0 {
		t.Errorf("job-c has %d allocations: a token without submit-job started it", len(allocs))
	}
}

// doneOf is the work done a stored progress value holds: a plain number, or the "done" of a
// JSON report (a report taken with a workload identity is stored with its allocation).
func doneOf(b []byte) string {
	var r struct {
		Done *float64 `json:"done"`
	}
	if json.Unmarshal(b, &r) == nil && r.Done != nil {
		return strconv.FormatFloat(*r.Done, 'g', -1, 64)
	}
	return strings.TrimSpace(string(b))
}

// shippedPolicies reads cmd/fft-allocator/acl's policies, the Consul one for this test's prefix.
func shippedPolicies(t *testing.T, cs *testenv.Consul) (nomadPolicy, consulPolicy string) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(root, "cmd", "fft-allocator", "acl", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	consulPolicy = read("consul-policy.hcl")
	if !strings.Contains(consulPolicy, `key_prefix "nomad-fft/v2/"`) {
		t.Fatalf("consul-policy.hcl does not grant the default prefix:\n%s", consulPolicy)
	}
	return read("nomad-policy.hcl"), cs.FillAllocatorNode(t, strings.ReplaceAll(consulPolicy, "nomad-fft/v2/", prefix+"/"))
}

func nomadTokenWith(t *testing.T, c *api.Client, name, rules string) string {
	t.Helper()
	if _, err := c.ACLPolicies().Upsert(&api.ACLPolicy{Name: name, Rules: rules}, nil); err != nil {
		t.Fatalf("creating Nomad policy %s: %v", name, err)
	}
	tok, _, err := c.ACLTokens().Create(&api.ACLToken{Name: name, Type: "client", Policies: []string{name}}, nil)
	if err != nil {
		t.Fatalf("creating a Nomad token with %s: %v", name, err)
	}
	return tok.SecretID
}

func consulTokenWith(t *testing.T, cs *testenv.Consul, name, rules string) string {
	t.Helper()
	pol, _ := json.Marshal(map[string]string{"Name": name, "Rules": rules})
	if b, code, err := cs.Do("PUT", "/v1/acl/policy", string(pol)); err != nil || code != 200 {
		t.Fatalf("creating Consul policy %s: HTTP %d %s %v", name, code, b, err)
	}
	tok, _ := json.Marshal(map[string]any{"Description": name, "Policies": []map[string]string{{"Name": name}}})
	b, code, err := cs.Do("PUT", "/v1/acl/token", string(tok))
	if err != nil || code != 200 {
		t.Fatalf("creating a Consul token with %s: HTTP %d %s %v", name, code, b, err)
	}
	var out struct{ SecretID string }
	if err := json.Unmarshal(b, &out); err != nil || out.SecretID == "" {
		t.Fatalf("Consul token for %s: %s (%v)", name, b, err)
	}
	return out.SecretID
}

// taskToken reads the workload identity the task printed.
func taskToken(t *testing.T, c *api.Client, alloc *api.Allocation) string {
	t.Helper()
	var tok string
	testenv.Eventually(t, 30*time.Second, 500*time.Millisecond, "the task prints its NOMAD_TOKEN", func() error {
		out := taskOutput(t, c, alloc)
		for _, line := range strings.Split(out, "\n") {
			if v, ok := strings.CutPrefix(line, "TOKEN="); ok && strings.Count(v, ".") == 2 {
				tok = strings.TrimSpace(v)
				return nil
			}
		}
		return fmt.Errorf("output %q", out)
	})
	return tok
}

// forge rewrites a JWT's job claim, keeping its signature: only Nomad can tell.
func forge(t *testing.T, token, job string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	claims["nomad_job_id"] = job
	b, _ := json.Marshal(claims)
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString(b) + "." + parts[2]
}

func put(t *testing.T, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("X-Nomad-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("PUT %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// runOnce runs `fft-allocator -once` and returns its output.
func runOnce(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append([]string{"-once"}, args...)...).CombinedOutput()
	return string(out), err
}

// lastRound decodes the newest round record.
func lastRound(t *testing.T, cs *testenv.Consul, v any) {
	t.Helper()
	b, code, err := cs.Get("/v1/kv/" + prefix + "/rounds/?keys")
	if err != nil || code != 200 {
		t.Fatalf("listing round records: HTTP %d %v", code, err)
	}
	var keys []string
	if err := json.Unmarshal(b, &keys); err != nil || len(keys) == 0 {
		t.Fatalf("round records %s (%v)", b, err)
	}
	readKV(t, cs, keys[len(keys)-1], v)
}
