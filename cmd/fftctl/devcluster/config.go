package devcluster

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// GPUClient is one Nomad client whose plugin presents Count fake GPUs of
// Model. MemoryMiB is needed for models outside go-nvml's mock catalogue
// (cmd/nomad-device-fft/README.md, the fake block).
type GPUClient struct {
	Name      string
	Model     string
	Count     int
	MemoryMiB int
}

// Models of the default clients.
const (
	ModelH100 = "NVIDIA H100 80GB HBM3"
	ModelA100 = "NVIDIA A100-SXM4-40GB"
	ModelV100 = "Tesla V100-SXM2-16GB"
)

// DefaultClients are three clients, each with a different model.
var DefaultClients = []GPUClient{
	{Name: "h100", Model: ModelH100, Count: 2},
	{Name: "a100", Model: ModelA100, Count: 2},
	{Name: "v100", Model: ModelV100, Count: 4, MemoryMiB: 16384},
}

// NodePool is the GPU clients' node pool: fft-allocator's default
// -node-pool, which it counts capacity in and moves a job into when a round
// starts it. A job submitted without a pool waits in "default", which has
// no nodes.
const NodePool = "gpu"

// nomadPorts are the three ports a Nomad agent binds.
type nomadPorts struct{ HTTP, RPC, Serf int }

// consulPorts are the ports a Consul dev agent binds (DNS and gRPC are off).
type consulPorts struct{ HTTP, Server, SerfLAN, SerfWAN int }

// consulArgs are the arguments of a Consul dev agent with its data in dir.
func consulArgs(dir string, p consulPorts) []string {
	return []string{"agent", "-dev", "-bind", "127.0.0.1", "-client", "127.0.0.1",
		"-data-dir", filepath.Join(dir, "consul-data"), "-disable-host-node-id",
		"-hcl", fmt.Sprintf("ports { http = %d, server = %d, serf_lan = %d, serf_wan = %d, dns = -1, grpc = -1, grpc_tls = -1 }",
			p.HTTP, p.Server, p.SerfLAN, p.SerfWAN),
		"-hcl", "disable_update_check = true"}
}

// nomadCommon is the part of every Nomad agent's configuration that says
// who and where it is: loopback only, its own data folder, and no Consul
// service registration.
func nomadCommon(name, dir string, p nomadPorts, consulAddr string) string {
	return fmt.Sprintf(`name                 = %s
data_dir             = %s
bind_addr            = "127.0.0.1"
log_level            = "INFO"
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

consul {
  address          = %s
  auto_advertise   = false
  server_auto_join = false
  client_auto_join = false
}
`, quote(name), quote(filepath.Join(dir, name)), p.HTTP, p.RPC, p.Serf, quote(consulAddr))
}

// serverConfig is the Nomad server's configuration.
func serverConfig(dir string, p nomadPorts, consulAddr string) string {
	return nomadCommon("fft-dev-server", dir, p, consulAddr) + `
server {
  enabled          = true
  bootstrap_expect = 1
}
`
}

// clientConfig is a Nomad client's configuration: raw_exec without
// cgroups (the sample tasks are shell scripts) and the device plugin with
// the client's fake GPUs.
func clientConfig(dir, pluginDir string, p nomadPorts, consulAddr, serverRPC, pool string, c GPUClient) string {
	memory := ""
	if c.MemoryMiB > 0 {
		memory = fmt.Sprintf("\n        memory_mib = %d", c.MemoryMiB)
	}
	return nomadCommon("fft-dev-"+c.Name, dir, p, consulAddr) + fmt.Sprintf(`
plugin_dir = %s

client {
  enabled           = true
  servers           = [%s]
  node_pool         = %s
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
      gpu {
        model      = %s
        count      = %d%s
      }
    }
  }
}
`, quote(pluginDir), quote(serverRPC), quote(pool), quote("fft-dev-"+c.Name), quote(PluginName), quote(c.Model), c.Count, memory)
}

// quote writes s as an HCL string literal (the values here are paths,
// names and addresses: no templates).
func quote(s string) string {
	return strings.ReplaceAll(strconv.Quote(s), "${", "$${")
}
