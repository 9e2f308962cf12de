package guide

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/e2e/agentrun"
	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// guidePath is the guide, relative to the repository root.
const guidePath = "cmd/fft-allocator/GUIDE.md"

// stepTimeout bounds one block: the guide's own waits (an agent ready, a deployment healthy,
// a job started) are loops without a bound of their own.
const stepTimeout = 3 * time.Minute

const (
	trainJob = "fft-train-driver"
	model    = "NVIDIA A100-SXM4-40GB"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestOperatorGuide runs cmd/fft-allocator/GUIDE.md's blocks in order with the variables the
// guide names, then checks what the guide says the operator has at the end: the training job
// was moved into the GPU pool and started by the allocator, its task driver's report was
// taken with the task's own workload identity (the stored report names its allocation),
// fftctl status with the operator's Consul token shows it running (and Consul refuses it
// without a token), the allocator's /v1/status shows it to the user's Nomad token and
// nothing without one, and Nomad and Consul refuse plain HTTP.
func TestOperatorGuide(t *testing.T) {
	nomad := testenv.RequireNomad(t)
	consul := testenv.RequireConsul(t)
	for _, tool := range []string{"bash", "jq", "curl", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the guide needs %s on PATH: %v", tool, err)
		}
	}
	steps := guideSteps(t)
	repo := repoRoot(t)
	root := testenv.TempDir(t)
	start := time.Now()

	ports := testenv.FreePorts(t, 12)
	vars := map[string]string{
		"CONF":        filepath.Join(root, "etc"),
		"DATA":        filepath.Join(root, "data"),
		"PLUGIN_DIR":  filepath.Join(root, "plugins"),
		"FFT_BIN":     filepath.Join(root, "bin"),
		"CHECKPOINTS": filepath.Join(root, "checkpoints"),
	}
	for i, name := range []string{"CONSUL_HTTPS_PORT", "CONSUL_SERVER_PORT", "CONSUL_SERF_PORT",
		"SERVICE_CONSUL_HTTPS_PORT", "SERVICE_CONSUL_SERF_PORT",
		"NOMAD_HTTP_PORT", "NOMAD_RPC_PORT", "NOMAD_SERF_PORT",
		"SERVICE_HTTP_PORT", "GPU1_HTTP_PORT", "GPU2_HTTP_PORT", "ALLOCATOR_PORT"} {
		vars[name] = fmt.Sprint(ports[i])
	}
	// The agents the tests use, first on PATH; nothing of the test's own Nomad or Consul
	// settings leaks in.
	env := []string{"PATH=" + filepath.Dir(nomad) + ":" + filepath.Dir(consul) + ":" + os.Getenv("PATH")}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name != "PATH" && !strings.HasPrefix(name, "NOMAD_") && !strings.HasPrefix(name, "CONSUL_") && !strings.HasPrefix(name, "FFT_") {
			env = append(env, kv)
		}
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}

	r := &runner{t: t, repo: repo, dir: filepath.Join(root, "guide"), env: env, vars: vars}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stop)
	for i, s := range steps {
		stepStart := time.Now()
		r.step(i, s)
		t.Logf("step %d (%s) done in %s", i, s, time.Since(stepStart).Round(100*time.Millisecond))
	}
	t.Logf("the guide's %d steps ran in %s", len(steps), time.Since(start).Round(time.Second))

	r.checkEnd()
}

// runner runs the guide's steps and keeps what they exported.
type runner struct {
	t    *testing.T
	repo string
	// dir holds each step's script and output and the exported variables.
	dir  string
	env  []string
	vars map[string]string
	// groups are the process groups of the steps, with the agents they started in the background.
	groups []int
}

func (r *runner) exports() string { return filepath.Join(r.dir, "exports.sh") }

// step writes a file step with r.vars expanded, or runs a run step in bash with the variables
// earlier steps exported, and then takes the variables it exported.
func (r *runner) step(i int, s Step) {
	t := r.t
	t.Helper()
	switch s.Kind {
	case "file":
		path, err := Expand(s.Path, r.vars)
		if err != nil {
			t.Fatalf("step %d (%s): the path: %v", i, s, err)
		}
		body, err := Expand(s.Body, r.vars)
		if err != nil {
			t.Fatalf("step %d (%s): %v", i, s, err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatalf("step %d (%s): %v", i, s, err)
		}
	case "run":
		script := fmt.Sprintf("set -euo pipefail\n[ ! -f %[1]q ] || source %[1]q\ncd %[2]q\n%[3]s\nexport -p > %[1]q.new\nmv %[1]q.new %[1]q\n",
			r.exports(), r.repo, s.Body)
		path := filepath.Join(r.dir, fmt.Sprintf("step-%02d.sh", i))
		if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(r.dir, fmt.Sprintf("step-%02d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", path)
		cmd.Env = r.env
		// The output is a file, so that the agents a step starts in the background, which
		// keep it open, do not hold Wait; the step's own group is killed on its timeout.
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r.groups = append(r.groups, cmd.Process.Pid)
		err = cmd.Wait()
		log, _ := os.ReadFile(out.Name())
		if err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("%w, after %s", err, stepTimeout)
			}
			t.Fatalf("step %d (%s) failed: %v\n--- its script\n%s\n--- its output\n%s%s", i, s, err, s.Body, log, r.agentLogs())
		}
		dump, err := os.ReadFile(r.exports())
		if err != nil {
			t.Fatal(err)
		}
		exported, err := ParseExports(string(dump))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range exported {
			r.vars[k] = v
		}
	default:
		t.Fatalf("step %d: unknown kind %q", i, s.Kind)
	}
}

// agentLogs are the last lines of every log the guide's agents write in $DATA, and of their
// tasks' (the allocator's own log says why it does not lead or start a job).
func (r *runner) agentLogs() string {
	logs, _ := filepath.Glob(filepath.Join(r.vars["DATA"], "*.log"))
	tasks, _ := filepath.Glob(filepath.Join(r.vars["DATA"], "*", "alloc", "*", "alloc", "logs", "*.std*.0"))
	logs = append(logs, tasks...)
	var b strings.Builder
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		fmt.Fprintf(&b, "\n--- last lines of %s\n%s\n", l, strings.Join(lines, "\n"))
	}
	return b.String()
}

// stop ends what the steps left running: SIGINT to each step's process group (the agents),
// then SIGKILL to what is left after 15 s. testenv.TempDir's cleanup then kills what names the
// folder (tasks) and unmounts the clients' task folders.
func (r *runner) stop() {
	if r.t.Failed() {
		r.t.Logf("agent logs at the end:%s", r.agentLogs())
	}
	for _, g := range r.groups {
		_ = syscall.Kill(-g, syscall.SIGINT)
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, g := range r.groups {
		for time.Now().Before(deadline) && syscall.Kill(-g, 0) == nil {
			time.Sleep(200 * time.Millisecond)
		}
		agentrun.KillGroup(g) // and the sockets of its plugins, in /tmp: the agents run with env -i
	}
}

// checkEnd checks, with the management tokens the guide bootstrapped and the clients of the
// agents' own APIs, the end state the guide promises.
func (r *runner) checkEnd() {
	t := r.t
	conf := r.vars["CONF"]
	nomadToken, err := os.ReadFile(filepath.Join(conf, "nomad-bootstrap.token"))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := api.NewClient(&api.Config{Address: "https://127.0.0.1:" + r.vars["NOMAD_HTTP_PORT"],
		SecretID: strings.TrimSpace(string(nomadToken)), TLSConfig: &api.TLSConfig{CACert: filepath.Join(conf, "tls", "nomad-agent-ca.pem")}})
	if err != nil {
		t.Fatal(err)
	}

	// The job was moved into the GPU pool (by the allocator: the user's jobspec names none)
	// and runs there, on a GPU client.
	job, _, err := nc.Jobs().Info(trainJob, nil)
	if err != nil {
		t.Fatal(err)
	}
	if *job.NodePool != "gpu" {
		t.Errorf("%s is in node pool %q, want gpu (the allocator's start)", trainJob, *job.NodePool)
	}
	allocs, _, err := nc.Jobs().Allocations(trainJob, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var running *api.AllocationListStub
	for _, a := range allocs {
		if a.ClientStatus == api.AllocClientStatusRunning {
			running = a
		}
	}
	if running == nil {
		t.Fatalf("%s has no running allocation: %d allocations", trainJob, len(allocs))
	}
	node, _, err := nc.Nodes().Info(running.NodeID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if node.NodePool != "gpu" || !strings.HasPrefix(node.Name, "gpu-") {
		t.Errorf("%s runs on %s in pool %q, want a GPU client", trainJob, node.Name, node.NodePool)
	}

	// Its driver's report was taken with the task's own identity: the stored report names the
	// allocation Nomad verified, and its GPU model.
	consulBoot, err := os.ReadFile(filepath.Join(conf, "consul-bootstrap.json"))
	if err != nil {
		t.Fatal(err)
	}
	var boot struct{ SecretID string }
	if err := json.Unmarshal(consulBoot, &boot); err != nil {
		t.Fatal(err)
	}
	consulHTTP := httpsClient(t, filepath.Join(conf, "tls", "consul-agent-ca.pem"))
	consulURL := "https://127.0.0.1:" + r.vars["CONSUL_HTTPS_PORT"]
	var report struct {
		Done     float64 `json:"done"`
		GPUModel string  `json:"gpu_model"`
		GPUs     int     `json:"gpus"`
		Alloc    string  `json:"alloc"`
	}
	testenv.Eventually(t, 30*time.Second, time.Second, "the driver's report stored", func() error {
		code, body := get(t, consulHTTP, consulURL+"/v1/kv/nomad-fft/v2/progress/default/"+trainJob+"?raw", "X-Consul-Token", boot.SecretID)
		if code != http.StatusOK {
			return fmt.Errorf("HTTP %d %s", code, body)
		}
		return json.Unmarshal(body, &report)
	})
	if report.Alloc != running.ID || report.GPUModel != model || report.GPUs != 2 || report.Done <= 0 {
		t.Errorf("stored report %+v, want done > 0 on 2 x %s from allocation %s", report, model, running.ID)
	}
	t.Logf("the driver's report, taken with the task's identity: done %g on %d x %s from allocation %s", report.Done, report.GPUs, report.GPUModel, report.Alloc)

	// fftctl status with the operator's token shows it running; without a token Consul
	// refuses the read.
	fftctl := filepath.Join(r.vars["FFT_BIN"], "fftctl")
	ctl := func(token string) (string, error) {
		cmd := exec.Command(fftctl, "status", "-json")
		cmd.Env = append([]string{"CONSUL_HTTP_ADDR=" + consulURL, "CONSUL_CACERT=" + filepath.Join(conf, "tls", "consul-agent-ca.pem"),
			"CONSUL_HTTP_TOKEN=" + token}, "PATH=/usr/bin:/bin")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := ctl(r.vars["OPERATOR_CONSUL_TOKEN"])
	if err != nil {
		t.Fatalf("fftctl status with the operator's token: %v\n%s", err, out)
	}
	var status struct {
		Jobs []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(out), &status); err != nil {
		t.Fatalf("fftctl status -json: %v\n%s", err, out)
	}
	found := false
	for _, j := range status.Jobs {
		if j.ID == "default/"+trainJob {
			found = j.Status == "running"
		}
	}
	if !found {
		t.Errorf("fftctl status does not show default/%s running:\n%s", trainJob, out)
	}
	if out, err := ctl(""); err == nil {
		t.Errorf("fftctl status without a token succeeded; Consul's ACLs should refuse it:\n%s", out)
	}

	// The allocator's status: the user's Nomad token sees the job, no token nothing.
	allocURL := "http://127.0.0.1:" + r.vars["ALLOCATOR_PORT"] + "/v1/status"
	if code, body := get(t, http.DefaultClient, allocURL, "X-Nomad-Token", r.vars["TRAINER_TOKEN"]); code != http.StatusOK || !strings.Contains(string(body), `"default/`+trainJob+`"`) {
		t.Errorf("/v1/status with the user's token: HTTP %d, want 200 with default/%s:\n%.400s", code, trainJob, body)
	}
	if code, _ := get(t, http.DefaultClient, allocURL, "", ""); code != http.StatusUnauthorized {
		t.Errorf("/v1/status without a token: HTTP %d, want 401", code)
	}

	// TLS is on: plain HTTP reaches neither agent.
	for name, port := range map[string]string{"Consul": r.vars["CONSUL_HTTPS_PORT"], "Nomad": r.vars["NOMAD_HTTP_PORT"]} {
		if code, _ := get(t, http.DefaultClient, "http://127.0.0.1:"+port+"/v1/status/leader", "", ""); code != http.StatusBadRequest {
			t.Errorf("%s answered plain HTTP with %d, want 400 (HTTPS only)", name, code)
		}
	}
}

// httpsClient trusts the CA in caFile only.
func httpsClient(t *testing.T, caFile string) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", caFile)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// get GETs url with the header (none for ""), and returns the status and body; a failed
// request fails the test.
func get(t *testing.T, c *http.Client, url, header, value string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if header != "" {
		req.Header.Set(header, value)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the answer: %v", url, err)
	}
	return resp.StatusCode, b
}
