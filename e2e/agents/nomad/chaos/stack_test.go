package chaos

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

const (
	modelV100 = "Tesla V100-SXM2-16GB"
	modelA100 = "NVIDIA A100-SXM4-40GB"
	// prefix is the allocator's default: `fftctl report` in the training tasks writes there.
	prefix   = "nomad-fft/v2"
	taskName = "train"
	gpuPool  = "gpu"
	// roundSeconds is the allocator's round length R.
	roundSeconds = 2
	// leaderTTL is the leader lock's session TTL (Consul's least).
	leaderTTL = "10s"
)

// serverHeartbeat makes the Nomad server mark a stopped client down within seconds, not
// Nomad's default of tens of seconds.
const serverHeartbeat = `min_heartbeat_ttl = "2s"
  heartbeat_grace   = "3s"`

// stack is what the chaos suite runs: a Consul server that keeps its data across restarts, a
// Nomad server with three fake-GPU clients, and fft-allocator replicas.
type stack struct {
	*testenv.Cluster
	consul   *testenv.ConsulServer
	root     string
	bin      string
	fftctl   string
	ckptDir  string
	clients  []testenv.FakeGPUClient
	replicas map[string]*testenv.Process
	// statusURL is each replica's GET /v1/status (its rounds and failures since its start).
	statusURL map[string]string
	// allocConsul and allocNomad are the allocators' ACL tokens (the shipped policies),
	// reporter the training tasks' Consul token.
	allocConsul consulToken
	allocNomad  string
	reporter    string
	// revocations are the revoke-token faults injected so far.
	revocations []revocation
	// hits are the faults injected so far, with the phase each hit.
	hits []faultHit
	// flips are the gpu-unhealthy faults injected so far.
	flips []flip
}

func startStack(t *testing.T, replicas int) *stack {
	t.Helper()
	began := time.Now()
	nomad := testenv.RequireNomad(t)
	consul := testenv.RequireConsul(t)
	bins := testenv.MainBinaries(t, "fft-allocator", "fftctl")
	st := &stack{
		bin: bins[0], fftctl: bins[1],
		root: testenv.TempDir(t), replicas: map[string]*testenv.Process{}, statusURL: map[string]string{},
		clients: []testenv.FakeGPUClient{
			{Name: "a100-1", Model: modelA100, Count: 2, NodePool: gpuPool},
			{Name: "a100-2", Model: modelA100, Count: 2, NodePool: gpuPool},
			{Name: "v100-1", Model: modelV100, Count: 2, Extra: `memory_mib = 16384`, NodePool: gpuPool},
			{Name: "v100-2", Model: modelV100, Count: 2, Extra: `memory_mib = 16384`, NodePool: gpuPool},
		},
	}
	for i := range st.clients {
		st.clients[i].HealthFile = st.healthFile(st.clients[i].Name)
	}
	st.ckptDir = filepath.Join(st.root, "checkpoints")
	if err := os.MkdirAll(st.ckptDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// ACLs on, default deny, in both: the allocators run with the shipped policies.
	defer func() {
		t.Logf("timing: stack: binaries built, Consul, Nomad, ACLs, replicas started in %s", time.Since(began).Round(100*time.Millisecond))
	}()
	t.Logf("timing: binaries built in %s", time.Since(began).Round(100*time.Millisecond))
	st.consul = testenv.StartConsulServerWith(t, consul, st.root, testenv.ConsulOptions{ACL: true})
	t.Logf("timing: Consul up at %s", time.Since(began).Round(100*time.Millisecond))
	st.Cluster = testenv.StartClusterWith(t, nomad, st.root, st.clients, testenv.ClusterOptions{ServerExtra: serverHeartbeat, ACL: true})
	t.Logf("timing: Nomad server and clients ready at %s", time.Since(began).Round(100*time.Millisecond))
	st.setUpACLs(t)
	ports := testenv.FreePorts(t, replicas)
	for i := 0; i < replicas; i++ {
		id := fmt.Sprintf("replica-%c", 'a'+i)
		addr := fmt.Sprintf("127.0.0.1:%d", ports[i])
		st.statusURL[id] = "http://" + addr + "/v1/status"
		// Trace logs carry each round's phases with the round number: the suite reads the
		// apply phases from them. Early rounds are off (-min-round-gap 0) so that every
		// round keeps its predecessor's credit whole and the audit log's rho chain is exact.
		st.replicas[id] = testenv.StartProcess(t, "fft-allocator-"+id, st.root, st.bin,
			"-nomad-addr", st.Server.HTTP, "-nomad-token", st.allocNomad, "-consul-addr", st.consul.HTTP,
			"-consul-token", st.allocConsul.SecretID, "-consul-prefix", prefix,
			"-id", id, "-round", fmt.Sprintf("%ds", roundSeconds), "-leader-ttl", leaderTTL, "-min-round-gap", "0",
			"-http-addr", addr, "-log-level", "trace")
	}
	return st
}

// jobVars are the fft-train variables of one chaos job: its work is its seconds (one unit per
// second on any model), it reports with fftctl and checkpoints in ckptDir.
func (st *stack) jobVars(seconds, gpus int) string {
	return fmt.Sprintf(`work = "%d"
seconds = %d
gpu_count = %d
fftctl = %q
consul_addr = %q
checkpoint_dir = %q
throughput = "%s=2,%s=1.6"`, seconds, seconds, gpus, st.fftctl, st.consul.HTTP, st.ckptDir, modelA100, modelV100)
}

// trainJobspec is jobspecs/fft-train.nomad.hcl, the example training job.
func trainJobspec(t testing.TB) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "jobspecs", "fft-train.nomad.hcl"))
	if err != nil {
		t.Fatalf("reading the jobspec: %v", err)
	}
	return string(b)
}

func parseJob(c *api.Client, jobspec, id, vars string) (*api.Job, error) {
	job, err := c.Jobs().ParseHCLOpts(&api.JobsParseRequest{JobHCL: jobspec, Variables: vars, Canonicalize: true})
	if err != nil {
		return nil, fmt.Errorf("parsing the jobspec for %s: %w", id, err)
	}
	job.ID, job.Name = &id, &id
	return job, nil
}

// withEnv sets an environment variable in every task of job.
func withEnv(job *api.Job, key, value string) *api.Job {
	for _, tg := range job.TaskGroups {
		for _, task := range tg.Tasks {
			if task.Env == nil {
				task.Env = map[string]string{}
			}
			task.Env[key] = value
		}
	}
	return job
}

// kvList returns the values below a Consul KV prefix by key (nil while Consul is down), read
// with the management token.
func (st *stack) kvList(dir string) (map[string][]byte, error) {
	b, code, err := st.consul.Get("/v1/kv/" + dir + "?recurse=true")
	if err != nil {
		return nil, err
	}
	if code == http.StatusNotFound {
		return map[string][]byte{}, nil
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d", dir, code)
	}
	var pairs []struct {
		Key     string
		Value   string
		Session string
	}
	if err := json.Unmarshal(b, &pairs); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", dir, err)
	}
	out := make(map[string][]byte, len(pairs))
	for _, p := range pairs {
		v, err := base64.StdEncoding.DecodeString(p.Value)
		if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", p.Key, err)
		}
		out[strings.TrimPrefix(p.Key, dir)] = v
	}
	return out, nil
}

// leader is the id of the replica holding the leader lock, "" if none or Consul is down.
func (st *stack) leader() string {
	b, code, err := st.consul.Get("/v1/kv/" + prefix + "/leader")
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

// nextRound is the round the ledger runs next, -1 when it cannot be read.
func (st *stack) nextRound() int {
	kv, err := st.kvList(prefix + "/ledger")
	if err != nil || kv[""] == nil {
		return -1
	}
	var l struct {
		Round int `json:"round"`
	}
	if json.Unmarshal(kv[""], &l) != nil {
		return -1
	}
	return l.Round
}

// waitRounds waits until the ledger is n rounds past from, and fails after timeout.
func (st *stack) waitRounds(t *testing.T, from, n int, timeout time.Duration, why string) int {
	t.Helper()
	var got int
	testenv.Eventually(t, timeout, 100*time.Millisecond, why, func() error {
		if got = st.nextRound(); got < from+n {
			return fmt.Errorf("next round %d, want %d", got, from+n)
		}
		return nil
	})
	return got
}
