package devcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/nomad-fft/nomad-fft/e2e/agentrun"
)

// attr evaluates the attribute at path (block types, then the attribute
// name; a labelled block matches its type or its label) in an HCL config.
func attr(t *testing.T, src string, path ...string) string {
	t.Helper()
	file, diags := hclsyntax.ParseConfig([]byte(src), "agent.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("the configuration does not parse: %v\n%s", diags, src)
	}
	body := file.Body.(*hclsyntax.Body)
	for _, step := range path[:len(path)-1] {
		var next *hclsyntax.Body
		for _, b := range body.Blocks {
			if b.Type == step || (len(b.Labels) > 0 && b.Labels[0] == step) {
				next = b.Body
			}
		}
		if next == nil {
			t.Fatalf("no block %q on the way to %v", step, path)
		}
		body = next
	}
	a, ok := body.Attributes[path[len(path)-1]]
	if !ok {
		t.Fatalf("no attribute %v", path)
	}
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		t.Fatalf("attribute %v: %v", path, diags)
	}
	if v.Type().FriendlyName() == "string" {
		return v.AsString()
	}
	if v.Type().IsTupleType() {
		var items []string
		for _, e := range v.AsValueSlice() {
			items = append(items, e.AsString())
		}
		return strings.Join(items, ",")
	}
	return v.AsBigFloat().String()
}

func TestAgentConfigs(t *testing.T) {
	dir := "/tmp/dev ${odd} dir"
	p := agentrun.NomadPorts{HTTP: 4646, RPC: 4647, Serf: 4648}
	server := serverConfig(dir, p, "127.0.0.1:8500")
	for _, tc := range []struct {
		path []string
		want string
	}{
		{[]string{"data_dir"}, filepath.Join(dir, "fft-dev-server")},
		{[]string{"bind_addr"}, "127.0.0.1"},
		{[]string{"ports", "http"}, "4646"},
		{[]string{"server", "bootstrap_expect"}, "1"},
		{[]string{"consul", "address"}, "127.0.0.1:8500"},
	} {
		if got := attr(t, server, tc.path...); got != tc.want {
			t.Errorf("server %v = %q, want %q", tc.path, got, tc.want)
		}
	}
	v100 := DefaultClients[3]
	client := clientConfig(dir, "/plugins", agentrun.NomadPorts{HTTP: 1, RPC: 2, Serf: 3}, "127.0.0.1:8500", "127.0.0.1:4647", "gpu", "http://127.0.0.1:4650", v100)
	for _, tc := range []struct {
		path []string
		want string
	}{
		{[]string{"name"}, "fft-dev-v100"},
		{[]string{"plugin_dir"}, "/plugins"},
		{[]string{"client", "servers"}, "127.0.0.1:4647"},
		{[]string{"client", "node_pool"}, "gpu"},
		{[]string{agentrun.PluginName, "config", "fake", "gpu", "model"}, ModelV100},
		{[]string{agentrun.PluginName, "config", "fake", "gpu", "count"}, "4"},
		{[]string{agentrun.PluginName, "config", "fake", "gpu", "memory_mib"}, "16384"},
		{[]string{DriverName, "config", "allocator_address"}, "http://127.0.0.1:4650"},
		{[]string{DriverName, "config", "checkpoint_root"}, filepath.Join(dir, "checkpoints")},
	} {
		if got := attr(t, client, tc.path...); got != tc.want {
			t.Errorf("client %v = %q, want %q", tc.path, got, tc.want)
		}
	}
	// A catalogue model needs no memory_mib, and gets none.
	if c := clientConfig(dir, "/p", p, "a", "b", "gpu", "http://x", DefaultClients[0]); strings.Contains(c, "memory_mib") {
		t.Errorf("memory_mib set for a catalogue model:\n%s", c)
	}
	// The Consul agent is loopback-only with its data in the state folder.
	args := strings.Join(consulArgs(dir, agentrun.ConsulPorts{HTTP: 8500, Server: 1, SerfLAN: 2, SerfWAN: 3}), " ")
	for _, w := range []string{"-dev", "-bind 127.0.0.1", "-client 127.0.0.1", "-data-dir " + filepath.Join(dir, "consul-data"), "http = 8500", "dns = -1"} {
		if !strings.Contains(args, w) {
			t.Errorf("consul args lack %q: %s", w, args)
		}
	}
}

func TestPrepareDir(t *testing.T) {
	base := t.TempDir()
	if err := prepareDir(filepath.Join(base, "new", "state")); err != nil {
		t.Errorf("a new folder: %v", err)
	}
	if err := prepareDir(filepath.Join(base, "new", "state")); err != nil {
		t.Errorf("an empty folder: %v", err)
	}
	full := filepath.Join(base, "full")
	if err := os.MkdirAll(filepath.Join(full, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := prepareDir(full); err == nil || !strings.Contains(err.Error(), full+" is not empty") {
		t.Errorf("a folder with files: %v", err)
	}
	if err := prepareDir(""); err == nil {
		t.Error("an empty name was accepted")
	}
}
