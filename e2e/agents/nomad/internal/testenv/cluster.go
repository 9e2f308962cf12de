package testenv

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/e2e/agentrun"
)

// FakeGPUClient is one Nomad client whose device plugin presents Count GPUs of Model.
type FakeGPUClient struct {
	Name  string
	Model string
	Count int
	// Extra is more HCL inside the fake gpu block.
	Extra string
	// NodePool is the client's node pool ("": Nomad's "default"). Nomad creates a pool the
	// first time a client names it.
	NodePool string
	// PluginDir replaces PluginDir(t), e.g. DriverPluginDir(t); AgentExtra is more HCL at the
	// top level of the client's configuration.
	PluginDir, AgentExtra string
}

// Cluster is one Nomad server and its clients, each on its own ports and data dir.
type Cluster struct {
	Server *Agent
	// API is a client of the server; with ACLs it carries ManagementToken.
	API *api.Client
	// NodeIDs maps client name to node ID.
	NodeIDs map[string]string
	// ManagementToken is the bootstrap token's secret when ACLs are on, else "".
	ManagementToken string
	// Clients maps client name to its agent.
	Clients map[string]*Agent
}

// ClusterOptions are StartClusterWith's choices; the zero value is StartCluster's cluster.
type ClusterOptions struct {
	// ACL turns Nomad's ACLs on in every agent and bootstraps them (Cluster.ManagementToken).
	ACL bool
	// ConsulAddrs, when set, are the Consul agents (127.0.0.1:port), one per client in order,
	// that the clients register job services with and run their checks through.
	ConsulAddrs []string
	// ServerExtra is more HCL inside the server's server block.
	ServerExtra string
	// TLS, when set, turns TLS on for every agent's HTTP and RPC with its certificates
	// (agentrun.NomadAgent.TLS) and for the clients' Consul (ConsulAddrs serve HTTPS);
	// Cluster.API then uses its CLI certificate.
	TLS *PKI
}

// StartCluster starts a Nomad server and one client per FakeGPUClient under root, each
// client loading the device plugin with its fake model and raw_exec (no cgroups) and in its
// node pool, and waits until every client is ready with its devices. Everything stops when the
// test ends.
func StartCluster(t testing.TB, nomad, root string, clients []FakeGPUClient) *Cluster {
	t.Helper()
	return StartClusterWith(t, nomad, root, clients, ClusterOptions{})
}

// StartClusterWith is StartCluster with options.
func StartClusterWith(t testing.TB, nomad, root string, clients []FakeGPUClient, opts ClusterOptions) *Cluster {
	t.Helper()
	pluginDir := PluginDir(t)
	ports := FreePorts(t, 3*(1+len(clients)))
	at := func(i int) agentrun.NomadPorts {
		return agentrun.NomadPorts{HTTP: ports[3*i], RPC: ports[3*i+1], Serf: ports[3*i+2]}
	}
	// Each agent's data is in root/<node name>; DEBUG logs help when a test fails.
	agent := func(name string, p agentrun.NomadPorts) agentrun.NomadAgent {
		return agentrun.NomadAgent{Name: name, DataDir: filepath.Join(root, name), LogLevel: "DEBUG", Ports: p, ACL: opts.ACL}
	}

	sp := at(0)
	sa := agent("fft-e2e-server", sp)
	if opts.TLS != nil {
		sa.TLS = &opts.TLS.NomadServer
	}
	server := withTLS(StartAgent(t, nomad, "server", root, sp, agentrun.NomadServerConfigWith(sa, opts.ServerExtra)), opts.TLS)
	c := &Cluster{Server: server, API: server.Client(t), NodeIDs: map[string]string{}, Clients: map[string]*Agent{}}
	Eventually(t, 60*time.Second, 250*time.Millisecond, "server elects itself", func() error {
		if server.Exited() {
			t.Fatalf("the Nomad server exited")
		}
		leader, err := c.API.Status().Leader()
		if err != nil || leader == "" {
			return fmt.Errorf("no leader yet (%v)", err)
		}
		return nil
	})
	if opts.ACL {
		bootstrap(t, c)
	}

	var agents []*Agent
	for i, fc := range clients {
		p := at(i + 1)
		a := agent("fft-e2e-"+fc.Name, p)
		if i < len(opts.ConsulAddrs) {
			a.ConsulAddr = opts.ConsulAddrs[i]
		}
		if opts.TLS != nil {
			a.TLS = &opts.TLS.NomadClient
			if a.ConsulAddr != "" {
				a.ConsulTLS = &opts.TLS.NomadClient
			}
		}
		dir := pluginDir
		if fc.PluginDir != "" {
			dir = fc.PluginDir
		}
		c.Clients[fc.Name] = withTLS(StartAgent(t, nomad, fc.Name, root, p, agentrun.NomadClientConfig(agentrun.NomadClient{
			NomadAgent:   a,
			Server:       server.RPCAddr,
			NodePool:     fc.NodePool,
			CgroupParent: "fft-e2e-" + fc.Name,
			PluginDir:    dir,
			GPU:          agentrun.FakeGPU{Model: fc.Model, Count: fc.Count, Extra: fc.Extra},
			Extra:        fc.AgentExtra,
		})), opts.TLS)
		agents = append(agents, c.Clients[fc.Name])
	}

	Eventually(t, 120*time.Second, 500*time.Millisecond, "clients ready with devices", func() error {
		for _, a := range agents {
			if a.Exited() {
				t.Fatalf("the Nomad client %s exited", a.Name)
			}
		}
		nodes, _, err := c.API.Nodes().List(nil)
		if err != nil {
			return err
		}
		for _, fc := range clients {
			want := "fft-e2e-" + fc.Name
			var found *api.NodeListStub
			for _, n := range nodes {
				if n.Name == want {
					found = n
				}
			}
			if found == nil || found.Status != "ready" {
				return fmt.Errorf("node %s not ready (%v)", want, found)
			}
			if pool := nodePoolOr(fc.NodePool); found.NodePool != pool {
				t.Fatalf("node %s is in node pool %q, want %q", want, found.NodePool, pool)
			}
			node, _, err := c.API.Nodes().Info(found.ID, nil)
			if err != nil {
				return err
			}
			if node.NodeResources == nil || len(node.NodeResources.Devices) == 0 {
				return fmt.Errorf("node %s has no devices yet", want)
			}
			c.NodeIDs[fc.Name] = found.ID
		}
		return nil
	})
	return c
}

// withTLS points a's address and API clients at HTTPS with p's CLI certificate; a as it is
// for nil p.
func withTLS(a *Agent, p *PKI) *Agent {
	if p != nil {
		a.HTTP = "https://" + strings.TrimPrefix(a.HTTP, "http://")
		a.TLS = p.NomadTLS()
	}
	return a
}

// bootstrap creates the cluster's management token and has c.API use it.
func bootstrap(t testing.TB, c *Cluster) {
	t.Helper()
	Eventually(t, 30*time.Second, 250*time.Millisecond, "ACL bootstrap", func() error {
		tok, _, err := c.API.ACLTokens().Bootstrap(nil)
		if err != nil {
			return err
		}
		c.ManagementToken = tok.SecretID
		return nil
	})
	c.API.SetSecretID(c.ManagementToken)
}

// nodePoolOr returns the pool a client with this setting ends up in.
func nodePoolOr(pool string) string {
	if pool == "" {
		return api.NodePoolDefault
	}
	return pool
}

// VisibleDevices reads task's stdout in alloc and returns, sorted, the GPU ids of the first
// non-empty NVIDIA_VISIBLE_DEVICES=... line it printed (nil if it printed only empty ones).
func VisibleDevices(t testing.TB, c *api.Client, task string, alloc *api.Allocation) []string {
	t.Helper()
	var out string
	Eventually(t, 30*time.Second, 500*time.Millisecond, "task output", func() error {
		r, err := c.AllocFS().Cat(alloc, "alloc/logs/"+task+".stdout.0", nil)
		if err != nil {
			return err
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		out = string(b)
		if !strings.Contains(out, "NVIDIA_VISIBLE_DEVICES=") {
			return fmt.Errorf("output %q", out)
		}
		return nil
	})
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "NVIDIA_VISIBLE_DEVICES="); ok && strings.TrimSpace(v) != "" {
			ids := strings.Split(strings.TrimSpace(v), ",")
			sort.Strings(ids)
			return ids
		}
	}
	return nil
}
