package consultest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

// Version is the agent version e2e/agents/build-consul.sh builds.
const Version = "1.16.1"

// Bin finds the Consul agent: $FFT_CONSUL_BIN, `consul` on PATH, or the one
// e2e/agents/build-consul.sh caches in <repo>/.cache/agents. Without one the
// test skips, unless FFT_E2E=1 makes that a failure.
func Bin(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("FFT_CONSUL_BIN"); p != "" {
		return p
	}
	if p, err := exec.LookPath("consul"); err == nil {
		return p
	}
	cached := filepath.Join(repoRoot(), ".cache", "agents", "consul-v"+Version, "consul")
	if _, err := os.Stat(cached); err == nil {
		return cached
	}
	if os.Getenv("FFT_E2E") == "1" {
		t.Fatalf("FFT_E2E=1 but no Consul agent: FFT_CONSUL_BIN unset, no consul on PATH, %s missing (run make agents)", cached)
	}
	t.Skipf("no Consul agent (run make agents, or set FFT_E2E=1 to make this a failure)")
	return ""
}

// repoRoot is the folder of the main module's go.mod above the test's
// working directory ("" if none).
func repoRoot() string {
	dir, _ := os.Getwd()
	for dir != "" {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			s := bufio.NewScanner(f)
			main := s.Scan() && strings.TrimSpace(s.Text()) == "module github.com/nomad-fft/nomad-fft"
			f.Close()
			if main {
				return dir
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
	return ""
}

// Start runs a Consul dev agent on free loopback ports, waits until it
// serves KV, and stops it when the test ends (its log is printed if the
// test failed). It returns the agent's HTTP address (as CONSUL_HTTP_ADDR
// takes it) and a client.
func Start(t testing.TB) (string, *api.Client) {
	t.Helper()
	bin := Bin(t)
	p := freePorts(t, 4)
	dir := t.TempDir()
	cmd := exec.Command(bin, "agent", "-dev", "-bind", "127.0.0.1", "-client", "127.0.0.1", "-data-dir", dir,
		"-hcl", fmt.Sprintf(`ports { http = %d, server = %d, serf_lan = %d, serf_wan = %d, dns = -1, grpc = -1, grpc_tls = -1 }`, p[0], p[1], p[2], p[3]))
	logPath := filepath.Join(dir, "consul.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting consul: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("consul log:\n%s", b)
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", p[0])
	c, err := api.NewClient(&api.Config{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if leader, err := c.Status().Leader(); err == nil && leader != "" {
			if _, _, err := c.KV().Get("probe", nil); err == nil {
				return addr, c
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("consul did not elect a leader in 30s")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}
