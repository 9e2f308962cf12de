package agentrun

import (
	"fmt"
	"strconv"
	"strings"
)

// PluginName is the device plugin's executable file name, which is also the label of its
// plugin block in a Nomad client's configuration.
const PluginName = "nomad-device-fft"

// NomadPorts are the three ports a Nomad agent binds.
type NomadPorts struct{ HTTP, RPC, Serf int }

// NomadAgent is what every Nomad agent's configuration says about who and where it is.
type NomadAgent struct {
	// Name is the node name.
	Name    string
	DataDir string
	// LogLevel is Nomad's log_level: "INFO", "DEBUG", ...
	LogLevel string
	Ports    NomadPorts
	// ConsulAddr is the Consul agent's HTTP address (127.0.0.1:port); "" leaves Nomad's
	// default, 127.0.0.1:8500.
	ConsulAddr string
	// ACL turns Nomad's ACLs on (acl { enabled = true }); the cluster then needs bootstrapping.
	ACL bool
	// TLS, when set, turns TLS on for HTTP and RPC, verified both ways (nomadTLS);
	// ConsulTLS, when set, is how the agent reaches Consul over HTTPS.
	TLS, ConsulTLS *TLSFiles
}

// NomadClient is a Nomad client that runs raw_exec tasks and loads the device plugin with fake
// GPUs.
type NomadClient struct {
	NomadAgent
	// Server is the Nomad server's RPC address (127.0.0.1:port).
	Server string
	// NodePool is the client's node pool; "" leaves Nomad's "default". Nomad creates a pool the
	// first time a client names it.
	NodePool     string
	CgroupParent string
	// PluginDir holds the device plugin's executable, named PluginName.
	PluginDir string
	GPU       FakeGPU
	// Extra is more HCL at the top level of the client's configuration (another plugin block).
	Extra string
}

// FakeGPU is the device plugin's fake block: Count GPUs of Model
// (cmd/nomad-device-fft/README.md).
type FakeGPU struct {
	Model string
	Count int
	// MemoryMiB is needed for models outside go-nvml's mock catalogue; 0 leaves it out.
	MemoryMiB int
	// Extra is more HCL inside the gpu block, for the attributes this type does not name.
	Extra string
	// HealthFile is the fake block's health_file ("": none): the GPUs it lists are unhealthy.
	HealthFile string
}

// nomadCommon is the part of every Nomad agent's configuration that says who and where it is:
// loopback only, its own data folder, and no Consul service registration.
func nomadCommon(a NomadAgent) string {
	consulAddr := ""
	if a.ConsulAddr != "" {
		consulAddr = "\n  address          = " + quote(a.ConsulAddr)
	}
	consulAddr += nomadConsulTLS(a.ConsulTLS)
	acl := ""
	if a.ACL {
		acl = "\nacl {\n  enabled = true\n}\n"
	}
	acl += nomadTLS(a.TLS)
	return fmt.Sprintf(`name                 = %s
data_dir             = %s
bind_addr            = "127.0.0.1"
log_level            = %s
disable_update_check = true

ports {
  http = %d
  rpc  = %d
  serf = %d
}

advertise {
  http = "127.0.0.1"
  rpc  = "127.0.0.1"
  serf = "127.0.0.1"
}

consul {%s
  auto_advertise   = false
  server_auto_join = false
  client_auto_join = false
}
%s`, quote(a.Name), quote(a.DataDir), quote(a.LogLevel), a.Ports.HTTP, a.Ports.RPC, a.Ports.Serf, consulAddr, acl)
}

// NomadServerConfig is the configuration of a Nomad server that elects itself.
func NomadServerConfig(a NomadAgent) string { return NomadServerConfigWith(a, "") }

// NomadServerConfigWith is NomadServerConfig with more HCL inside the server block (for
// example short heartbeat settings, so that a test sees a stopped client go down in seconds).
func NomadServerConfigWith(a NomadAgent, serverExtra string) string {
	if serverExtra != "" {
		serverExtra = "\n  " + serverExtra
	}
	return nomadCommon(a) + `
server {
  enabled          = true
  bootstrap_expect = 1` + serverExtra + `
}
`
}

// NomadClientConfig is a Nomad client's configuration: raw_exec without cgroups (tasks that
// open GPU device files need that) and the device plugin with the client's fake GPUs, seeded
// with its node name so that no two clients present the same GPU UUIDs.
func NomadClientConfig(c NomadClient) string {
	var pool, gpu, health string
	if c.GPU.HealthFile != "" {
		health = "\n      health_file = " + quote(c.GPU.HealthFile)
	}
	if c.NodePool != "" {
		pool = "\n  node_pool         = " + quote(c.NodePool)
	}
	if c.GPU.MemoryMiB > 0 {
		gpu += fmt.Sprintf("\n        memory_mib = %d", c.GPU.MemoryMiB)
	}
	if c.GPU.Extra != "" {
		gpu += "\n        " + c.GPU.Extra
	}
	return nomadCommon(c.NomadAgent) + fmt.Sprintf(`
plugin_dir = %s

client {
  enabled           = true
  servers           = [%s]%s
  network_interface = "lo"
  cgroup_parent     = %s
}

plugin "raw_exec" {
  config {
    enabled    = true
    no_cgroups = true
  }
}

plugin %s {
  config {
    fingerprint_period = "5s"
    fake {
      uuid_seed = %s%s
      gpu {
        model      = %s
        count      = %d%s
      }
    }
  }
}
`, quote(c.PluginDir), quote(c.Server), pool, quote(c.CgroupParent), quote(PluginName), quote(c.Name), health, quote(c.GPU.Model), c.GPU.Count, gpu) + c.Extra
}

// ConsulPorts are the ports a Consul dev agent binds (DNS and gRPC are off).
type ConsulPorts struct{ HTTP, Server, SerfLAN, SerfWAN int }

// ConsulDevArgs are the arguments of a Consul dev agent on loopback with its data in dataDir.
// The node ID is random rather than the host's, so that several agents on one machine (parallel
// test packages) never share one.
func ConsulDevArgs(dataDir string, p ConsulPorts) []string {
	return []string{"agent", "-dev", "-bind", "127.0.0.1", "-client", "127.0.0.1",
		"-data-dir", dataDir, "-disable-host-node-id",
		"-hcl", fmt.Sprintf("ports { http = %d, server = %d, serf_lan = %d, serf_wan = %d, dns = -1, grpc = -1, grpc_tls = -1 }",
			p.HTTP, p.Server, p.SerfLAN, p.SerfWAN),
		"-hcl", "disable_update_check = true"}
}

// ConsulACLArgs are the flags that turn a dev agent's ACLs on with default deny: management is
// both the initial management token and the agent's own token (so the agent can register its
// node, which sessions need).
func ConsulACLArgs(management string) []string {
	return []string{"-hcl", fmt.Sprintf(`acl { enabled = true, default_policy = "deny", tokens { initial_management = %s, agent = %s } }`,
		quote(management), quote(management))}
}

// ConsulClientArgs are the arguments of a Consul client agent named node on loopback, with its
// data in dataDir, that joins the agent whose LAN gossip is at join (127.0.0.1:port). Nomad
// clients need one Consul agent each: a Nomad client removes from its agent the services it
// did not register, so two sharing one agent unregister each other's.
func ConsulClientArgs(dataDir, node string, p ConsulPorts, join string) []string {
	return []string{"agent", "-bind", "127.0.0.1", "-client", "127.0.0.1",
		"-data-dir", dataDir, "-node", node, "-disable-host-node-id", "-retry-join", join,
		"-hcl", fmt.Sprintf("ports { http = %d, serf_lan = %d, serf_wan = -1, server = %d, dns = -1, grpc = -1, grpc_tls = -1 }",
			p.HTTP, p.SerfLAN, p.Server),
		"-hcl", "disable_update_check = true"}
}

// quote writes s as an HCL string literal (the values here are paths, names and addresses:
// no templates).
func quote(s string) string {
	return strings.ReplaceAll(strconv.Quote(s), "${", "$${")
}

// ConsulServerArgs are the arguments of a single Consul server on loopback that elects itself
// and keeps its data in dataDir, so that, unlike a dev agent (whose state is in memory), it
// comes back with its KV after a restart. Raft runs at the fastest timing (raft_multiplier 1)
// so that it elects itself again in seconds.
func ConsulServerArgs(dataDir string, p ConsulPorts) []string {
	return []string{"agent", "-server", "-bootstrap-expect", "1", "-node", "fft-e2e-consul",
		"-bind", "127.0.0.1", "-client", "127.0.0.1", "-data-dir", dataDir,
		"-hcl", fmt.Sprintf("ports { http = %d, server = %d, serf_lan = %d, serf_wan = %d, dns = -1, grpc = -1, grpc_tls = -1 }",
			p.HTTP, p.Server, p.SerfLAN, p.SerfWAN),
		"-hcl", "performance { raft_multiplier = 1 }",
		"-hcl", "disable_update_check = true"}
}
