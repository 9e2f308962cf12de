package agentrun

import (
	"strings"
	"testing"
)

// normalized splits an agent configuration into lines with their spaces collapsed, so that
// expectations do not depend on alignment.
func normalized(config string) []string {
	var out []string
	for _, line := range strings.Split(config, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			out = append(out, strings.Join(f, " "))
		}
	}
	return out
}

// inOrder returns the first of want that does not appear in lines after the previous one, or
// "" when all do.
func inOrder(lines, want []string) string {
	i := 0
	for _, w := range want {
		for i < len(lines) && lines[i] != w {
			i++
		}
		if i == len(lines) {
			return w
		}
		i++
	}
	return ""
}

func TestNomadConfigs(t *testing.T) {
	agent := NomadAgent{Name: "fft-dev-h100", DataDir: "/tmp/dev ${odd}/h100", LogLevel: "INFO",
		Ports: NomadPorts{HTTP: 4646, RPC: 4647, Serf: 4648}, ConsulAddr: "127.0.0.1:8500"}
	client := NomadClient{NomadAgent: agent, Server: "127.0.0.1:5647", NodePool: "gpu", CgroupParent: "fft-dev-h100",
		PluginDir: "/state/plugins", GPU: FakeGPU{Model: "Tesla V100-SXM2-16GB", Count: 4, MemoryMiB: 16384}}
	plain := client
	plain.ConsulAddr, plain.NodePool, plain.LogLevel = "", "", "DEBUG"
	plain.GPU = FakeGPU{Model: "NVIDIA A100-SXM4-40GB", Count: 2, Extra: `compute_capability = "8.0"`}
	withACL := agent
	withACL.ACL = true
	for _, tc := range []struct {
		name   string
		config string
		want   []string // lines, in this order
		absent []string
	}{
		{"server", NomadServerConfig(agent), []string{
			`name = "fft-dev-h100"`,
			// HCL would expand ${...}: it is escaped.
			`data_dir = "/tmp/dev $${odd}/h100"`,
			`bind_addr = "127.0.0.1"`,
			`log_level = "INFO"`,
			`ports {`, `http = 4646`, `rpc = 4647`, `serf = 4648`, `}`,
			`advertise {`, `http = "127.0.0.1"`, `rpc = "127.0.0.1"`, `serf = "127.0.0.1"`, `}`,
			`consul {`, `address = "127.0.0.1:8500"`, `auto_advertise = false`, `}`,
			`server {`, `enabled = true`, `bootstrap_expect = 1`, `}`,
		}, []string{"client {", "plugin", "acl {"}},
		{"server with ACLs", NomadServerConfig(withACL), []string{
			`consul {`, `}`, `acl {`, `enabled = true`, `}`, `server {`, `enabled = true`, `}`,
		}, nil},
		{"server with extra settings", NomadServerConfigWith(agent, `heartbeat_grace = "2s"`), []string{
			`server {`, `enabled = true`, `bootstrap_expect = 1`, `heartbeat_grace = "2s"`, `}`,
		}, []string{"client {"}},
		{"client with a pool and memory", NomadClientConfig(client), []string{
			`name = "fft-dev-h100"`,
			`consul {`, `address = "127.0.0.1:8500"`, `}`,
			`plugin_dir = "/state/plugins"`,
			`client {`, `enabled = true`, `servers = ["127.0.0.1:5647"]`, `node_pool = "gpu"`,
			`network_interface = "lo"`, `cgroup_parent = "fft-dev-h100"`, `}`,
			`plugin "raw_exec" {`, `config {`, `enabled = true`, `no_cgroups = true`, `}`, `}`,
			`plugin "nomad-device-fft" {`, `config {`, `fingerprint_period = "5s"`, `fake {`, `uuid_seed = "fft-dev-h100"`, `gpu {`,
			`model = "Tesla V100-SXM2-16GB"`, `count = 4`, `memory_mib = 16384`, `}`, `}`, `}`, `}`,
		}, []string{"server {", "compute_capability"}},
		{"client in the default pool with extra HCL", NomadClientConfig(plain), []string{
			`log_level = "DEBUG"`,
			`consul {`, `auto_advertise = false`, `server_auto_join = false`, `client_auto_join = false`, `}`,
			`model = "NVIDIA A100-SXM4-40GB"`, `count = 2`, `compute_capability = "8.0"`, `}`,
		}, []string{"address", "node_pool", "memory_mib"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if missing := inOrder(normalized(tc.config), tc.want); missing != "" {
				t.Errorf("no %q where expected in:\n%s", missing, tc.config)
			}
			for _, a := range tc.absent {
				if strings.Contains(tc.config, a) {
					t.Errorf("%q should be absent from:\n%s", a, tc.config)
				}
			}
			if open, closed := strings.Count(tc.config, "{"), strings.Count(tc.config, "}"); open != closed {
				t.Errorf("%d { but %d } in:\n%s", open, closed, tc.config)
			}
		})
	}
}

func TestConsulACLArgs(t *testing.T) {
	args := strings.Join(ConsulACLArgs("6f3c5b0e-0f70-4e2e-8ac1-000000000001"), " ")
	for _, want := range []string{"acl { enabled = true", `default_policy = "deny"`,
		`initial_management = "6f3c5b0e-0f70-4e2e-8ac1-000000000001"`, `agent = "6f3c5b0e-0f70-4e2e-8ac1-000000000001"`} {
		if !strings.Contains(args, want) {
			t.Errorf("consul ACL args lack %q: %s", want, args)
		}
	}
}

func TestConsulClientArgs(t *testing.T) {
	args := strings.Join(ConsulClientArgs("/state/c1", "host-a", ConsulPorts{HTTP: 8600, Server: 1, SerfLAN: 2}, "127.0.0.1:8301"), " ")
	for _, want := range []string{"-node host-a", "-retry-join 127.0.0.1:8301", "-data-dir /state/c1", "http = 8600", "serf_lan = 2", "-bind 127.0.0.1"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if strings.Contains(args, "-dev") {
		t.Errorf("args %q: a client agent is not a dev server", args)
	}
}

func TestConsulDevArgs(t *testing.T) {
	args := strings.Join(ConsulDevArgs("/state/consul-data", ConsulPorts{HTTP: 8500, Server: 1, SerfLAN: 2, SerfWAN: 3}), " ")
	for _, want := range []string{"agent -dev", "-bind 127.0.0.1", "-client 127.0.0.1", "-data-dir /state/consul-data",
		"-disable-host-node-id", "http = 8500, server = 1, serf_lan = 2, serf_wan = 3", "dns = -1", "grpc = -1", "grpc_tls = -1",
		"disable_update_check = true"} {
		if !strings.Contains(args, want) {
			t.Errorf("consul args lack %q: %s", want, args)
		}
	}
}

func TestConsulServerArgs(t *testing.T) {
	args := strings.Join(ConsulServerArgs("/state/consul-data", ConsulPorts{HTTP: 8500, Server: 1, SerfLAN: 2, SerfWAN: 3}), " ")
	for _, want := range []string{"agent -server", "-bootstrap-expect 1", "-bind 127.0.0.1", "-client 127.0.0.1",
		"-data-dir /state/consul-data", "http = 8500, server = 1, serf_lan = 2, serf_wan = 3", "dns = -1", "grpc = -1",
		"raft_multiplier = 1", "disable_update_check = true"} {
		if !strings.Contains(args, want) {
			t.Errorf("consul args lack %q: %s", want, args)
		}
	}
	if strings.Contains(args, "-dev") {
		t.Errorf("a server that keeps its data across restarts must not run -dev: %s", args)
	}
}
