package devcluster

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nomad-fft/nomad-fft/e2e/agentrun"
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

// DefaultClients are four clients of three models, the A100s on two hosts
// of 2, so that the round printout shows placement on hosts: a 2-GPU job
// needs a whole A100 host, and 1-GPU jobs are packed beside each other.
var DefaultClients = []GPUClient{
	{Name: "h100", Model: ModelH100, Count: 2},
	{Name: "a100-1", Model: ModelA100, Count: 2},
	{Name: "a100-2", Model: ModelA100, Count: 2},
	{Name: "v100", Model: ModelV100, Count: 4, MemoryMiB: 16384},
}

// AllocatorHosts are the Nomad clients the fft-allocator job's replicas
// run on (distinct_hosts): in the "default" node pool, outside the GPU
// pool, each with a Consul client agent of its own, since a Nomad client
// removes from its agent the services it did not register. Their one fake
// GPU each is outside the pool the allocator counts.
var AllocatorHosts = []GPUClient{
	{Name: "host-1", Model: ModelA100, Count: 1},
	{Name: "host-2", Model: ModelA100, Count: 1},
}

// NodePool is the GPU clients' node pool: fft-allocator's default
// -node-pool, which it counts capacity in and moves a job into when a round
// starts it. A job submitted without a pool waits in "default", which has
// no nodes.
const NodePool = "gpu"

// consulArgs are the arguments of the Consul dev agent, its data in the
// state folder.
func consulArgs(dir string, p agentrun.ConsulPorts) []string {
	return agentrun.ConsulDevArgs(consulDataDir(dir), p)
}

// consulDataDir is the Consul dev agent's data folder in the state folder.
func consulDataDir(dir string) string { return filepath.Join(dir, "consul-data") }

// consulClientArgs are the arguments of an allocator host's Consul client
// agent, named fft-dev-<name>, that joins the dev agent at join. It skips
// the graceful leave on SIGINT (seconds per agent): the whole cluster stops.
func consulClientArgs(dir, name string, p agentrun.ConsulPorts, join string) []string {
	return append(agentrun.ConsulClientArgs(filepath.Join(dir, "consul-"+name), "fft-dev-"+name, p, join),
		"-hcl", "skip_leave_on_interrupt = true")
}

// nomadAgent is what a dev agent's configuration says about who and where it
// is: named fft-dev-<name>, its data in the state folder.
func nomadAgent(name, dir string, p agentrun.NomadPorts, consulAddr string) agentrun.NomadAgent {
	return agentrun.NomadAgent{Name: "fft-dev-" + name, DataDir: filepath.Join(dir, "fft-dev-"+name),
		LogLevel: "INFO", Ports: p, ConsulAddr: consulAddr}
}

// serverConfig is the Nomad server's configuration.
func serverConfig(dir string, p agentrun.NomadPorts, consulAddr string) string {
	return agentrun.NomadServerConfig(nomadAgent("server", dir, p, consulAddr))
}

// clientConfig is a Nomad client's configuration: raw_exec without
// cgroups, the device plugin with the client's fake GPUs, and the fft task
// driver reporting to the allocator at allocatorAddr with its checkpoints in
// the state folder (shared by the clients, as a cluster file system would
// be), in the given node pool.
func clientConfig(dir, pluginDir string, p agentrun.NomadPorts, consulAddr, serverRPC, pool, allocatorAddr string, c GPUClient) string {
	return agentrun.NomadClientConfig(agentrun.NomadClient{
		NomadAgent:   nomadAgent(c.Name, dir, p, consulAddr),
		Server:       serverRPC,
		NodePool:     pool,
		CgroupParent: "fft-dev-" + c.Name,
		PluginDir:    pluginDir,
		GPU:          agentrun.FakeGPU{Model: c.Model, Count: c.Count, MemoryMiB: c.MemoryMiB},
		Extra: fmt.Sprintf(`
plugin %s {
  config {
    allocator_address = %s
    report_period     = "2s"
    checkpoint_root   = %s
%s  }
}
`, hclQuote(DriverName), hclQuote(allocatorAddr), hclQuote(filepath.Join(dir, "checkpoints")), devTaskUser()),
	})
}

// hclQuote is s as an HCL string: Go quoting, with "${" escaped.
func hclQuote(s string) string { return strings.ReplaceAll(strconv.Quote(s), "${", "$${") }

// devTaskUser is the driver's user settings on the dev cluster: its tasks run as the user
// who runs fftctl dev, whose state folder may be private (a temporary folder is 0700), as
// raw_exec's would. A production client keeps the driver's default, nobody (see
// cmd/nomad-driver-fft/README.md, "Isolation").
func devTaskUser() string {
	u, err := user.Current()
	if err != nil || os.Geteuid() != 0 {
		// Not root: the driver cannot switch users, and runs tasks as this user anyway.
		return ""
	}
	return fmt.Sprintf("    default_user      = %s\n    allow_root        = true\n", hclQuote(u.Username))
}
