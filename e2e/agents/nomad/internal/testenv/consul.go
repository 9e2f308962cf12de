package testenv

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/nomad-fft/nomad-fft/e2e/agentrun"
)

// RequireConsul returns the Consul agent, or skips the test when there is none, unless
// FFT_E2E=1, when a missing agent fails it.
func RequireConsul(t testing.TB) string {
	t.Helper()
	return requireAgent(t, agentrun.Consul, "e2e/agents/build-consul.sh")
}

// Consul is a Consul dev agent started by a test.
type Consul struct {
	// HTTP is its API address as CONSUL_HTTP_ADDR takes it: 127.0.0.1:port.
	HTTP    string
	LogPath string
	// SerfLAN is its LAN gossip address, which client agents join.
	SerfLAN string
}

// StartConsul starts `consul agent -dev` bound to 127.0.0.1 on free ports, with its data in
// dir (DNS and gRPC off), waits until it has a leader and serves KV, and stops it when the test
// ends, passed or failed.
func StartConsul(t testing.TB, consul, dir string) *Consul {
	t.Helper()
	p := FreePorts(t, 4)
	ports := agentrun.ConsulPorts{HTTP: p[0], Server: p[1], SerfLAN: p[2], SerfWAN: p[3]}
	proc := StartProcess(t, "consul", dir, consul, agentrun.ConsulDevArgs(filepath.Join(dir, "consul-data"), ports)...)
	c := &Consul{HTTP: fmt.Sprintf("127.0.0.1:%d", ports.HTTP), LogPath: proc.LogPath, SerfLAN: fmt.Sprintf("127.0.0.1:%d", ports.SerfLAN)}
	Eventually(t, 60*time.Second, 250*time.Millisecond, "consul elects itself and serves KV", func() error {
		if proc.Exited() {
			t.Fatalf("the Consul agent exited")
		}
		return agentrun.ConsulReady(c.HTTP)
	})
	return c
}

// StartConsulClient starts a Consul client agent named node that joins server, with its data in
// dir/consul-<node>, waits until it answers with the cluster's leader, and stops it when the
// test ends. Each Nomad client that registers services needs its own (agentrun.ConsulClientArgs).
func StartConsulClient(t testing.TB, consul, dir, node string, server *Consul) *Consul {
	t.Helper()
	p := FreePorts(t, 3)
	ports := agentrun.ConsulPorts{HTTP: p[0], SerfLAN: p[1], Server: p[2]}
	proc := StartProcess(t, "consul-"+node, dir, consul,
		agentrun.ConsulClientArgs(filepath.Join(dir, "consul-"+node), node, ports, server.SerfLAN)...)
	c := &Consul{HTTP: fmt.Sprintf("127.0.0.1:%d", ports.HTTP), LogPath: proc.LogPath, SerfLAN: fmt.Sprintf("127.0.0.1:%d", ports.SerfLAN)}
	Eventually(t, 60*time.Second, 250*time.Millisecond, "consul client "+node+" joins", func() error {
		if proc.Exited() {
			t.Fatalf("the Consul client agent %s exited", node)
		}
		return agentrun.ConsulReady(c.HTTP)
	})
	return c
}

// Get reads an HTTP API path of the agent, returning the body and status code.
func (c *Consul) Get(path string) ([]byte, int, error) {
	resp, err := http.Get("http://" + c.HTTP + path)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, resp.StatusCode, err
}
