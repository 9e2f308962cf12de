package testenv

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
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
	// ManagementToken is the initial management token when ACLs are on, else "". Get sends it.
	ManagementToken string
	// SerfLAN is its LAN gossip address, which client agents join.
	SerfLAN string
	// scheme and client are how Do reaches it: "https" and a client with the test's
	// certificates for StartConsulTLS's agent, else plain HTTP.
	scheme string
	client *http.Client
}

// ConsulOptions are StartConsulWith's choices; the zero value is StartConsul's agent.
type ConsulOptions struct {
	// ACL turns ACLs on with default deny; Consul.ManagementToken is the management token.
	ACL bool
}

// StartConsul starts `consul agent -dev` bound to 127.0.0.1 on free ports, with its data in
// dir (DNS and gRPC off), waits until it has a leader and serves KV, and stops it when the test
// ends, passed or failed.
func StartConsul(t testing.TB, consul, dir string) *Consul {
	t.Helper()
	return StartConsulWith(t, consul, dir, ConsulOptions{})
}

// StartConsulWith is StartConsul with options.
func StartConsulWith(t testing.TB, consul, dir string, opts ConsulOptions) *Consul {
	t.Helper()
	p := FreePorts(t, 4)
	ports := agentrun.ConsulPorts{HTTP: p[0], Server: p[1], SerfLAN: p[2], SerfWAN: p[3]}
	dataDir := filepath.Join(dir, "consul-data")
	args := agentrun.ConsulDevArgs(dataDir, ports)
	c := &Consul{HTTP: fmt.Sprintf("127.0.0.1:%d", ports.HTTP), SerfLAN: fmt.Sprintf("127.0.0.1:%d", ports.SerfLAN)}
	if opts.ACL {
		c.ManagementToken = "6f3c5b0e-0f70-4e2e-8ac1-000000000001"
		args = append(args, agentrun.ConsulACLArgs(c.ManagementToken)...)
	}
	proc := StartProcess(t, "consul", dir, consul, args...)
	c.LogPath = proc.LogPath
	Eventually(t, 60*time.Second, 250*time.Millisecond, "consul elects itself and serves KV", func() error {
		if proc.Exited() {
			t.Fatalf("the Consul agent exited")
		}
		return agentrun.ConsulReadyToken(c.HTTP, c.ManagementToken, dataDir)
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
	dataDir := filepath.Join(dir, "consul-"+node)
	proc := StartProcess(t, "consul-"+node, dir, consul, agentrun.ConsulClientArgs(dataDir, node, ports, server.SerfLAN)...)
	c := &Consul{HTTP: fmt.Sprintf("127.0.0.1:%d", ports.HTTP), LogPath: proc.LogPath, SerfLAN: fmt.Sprintf("127.0.0.1:%d", ports.SerfLAN)}
	Eventually(t, 60*time.Second, 250*time.Millisecond, "consul client "+node+" joins", func() error {
		if proc.Exited() {
			t.Fatalf("the Consul client agent %s exited", node)
		}
		return agentrun.ConsulReady(c.HTTP, dataDir)
	})
	return c
}

// Get reads an HTTP API path of the agent, returning the body and status code.
func (c *Consul) Get(path string) ([]byte, int, error) {
	return c.Do(http.MethodGet, path, "")
}

// Do sends an HTTP request to the agent with the management token (if any) and returns the
// body and status code.
func (c *Consul) Do(method, path, body string) ([]byte, int, error) {
	scheme, client := "http", http.DefaultClient
	if c.client != nil {
		scheme, client = c.scheme, c.client
	}
	req, err := http.NewRequest(method, scheme+"://"+c.HTTP+path, strings.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	if c.ManagementToken != "" {
		req.Header.Set("X-Consul-Token", c.ManagementToken)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, resp.StatusCode, err
}

// ConsulServer is a single Consul server started by a test that keeps its data across
// restarts (a dev agent keeps it in memory), so that a test can restart it.
type ConsulServer struct {
	Consul
	*Process
	dataDir string
}

// StartConsulServer starts a single Consul server (agentrun.ConsulServerArgs) bound to
// 127.0.0.1 on free ports with its data in dir, waits until it serves KV, and stops it when
// the test ends.
func StartConsulServer(t testing.TB, consul, dir string) *ConsulServer {
	t.Helper()
	return StartConsulServerWith(t, consul, dir, ConsulOptions{})
}

// StartConsulServerWith is StartConsulServer with options; with ACLs the management token
// survives restarts with the data.
func StartConsulServerWith(t testing.TB, consul, dir string, opts ConsulOptions) *ConsulServer {
	t.Helper()
	p := FreePorts(t, 4)
	ports := agentrun.ConsulPorts{HTTP: p[0], Server: p[1], SerfLAN: p[2], SerfWAN: p[3]}
	dataDir := filepath.Join(dir, "consul-data")
	args := agentrun.ConsulServerArgs(dataDir, ports)
	var token string
	if opts.ACL {
		token = "6f3c5b0e-0f70-4e2e-8ac1-000000000001"
		args = append(args, agentrun.ConsulACLArgs(token)...)
	}
	proc := StartProcess(t, "consul", dir, consul, args...)
	c := &ConsulServer{Consul: Consul{HTTP: fmt.Sprintf("127.0.0.1:%d", ports.HTTP), LogPath: proc.LogPath, ManagementToken: token},
		Process: proc, dataDir: dataDir}
	c.WaitReady(t, 60*time.Second)
	return c
}

// WaitReady waits until the server has a leader and serves KV, and fails the test after
// timeout.
func (c *ConsulServer) WaitReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, 250*time.Millisecond, "consul elects itself and serves KV", func() error {
		if c.Exited() {
			t.Fatalf("the Consul agent exited")
		}
		return agentrun.ConsulReadyToken(c.HTTP, c.ManagementToken, c.dataDir)
	})
}

// NodeName is the agent's node name: the node of the sessions it creates.
func (c *Consul) NodeName(t testing.TB) string {
	t.Helper()
	b, code, err := c.Get("/v1/agent/self")
	var self struct{ Config struct{ NodeName string } }
	if err != nil || code != http.StatusOK || json.Unmarshal(b, &self) != nil || self.Config.NodeName == "" {
		t.Fatalf("reading the Consul agent's node name: HTTP %d %s %v", code, b, err)
	}
	return self.Config.NodeName
}

// AllocatorNode is the placeholder of cmd/fft-allocator/acl/consul-policy.hcl for the node
// of the allocator's Consul agent.
const AllocatorNode = `session "allocator-node"`

// FillAllocatorNode names the agent's node in the shipped Consul policy's session block.
func (c *Consul) FillAllocatorNode(t testing.TB, policy string) string {
	t.Helper()
	if !strings.Contains(policy, AllocatorNode) {
		t.Fatalf("the Consul policy has no %s block to fill:\n%s", AllocatorNode, policy)
	}
	return strings.ReplaceAll(policy, AllocatorNode, fmt.Sprintf("session %q", c.NodeName(t)))
}
