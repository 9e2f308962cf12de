package consultest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/nomad-fft/nomad-fft/e2e/agentrun"
)

// Bin finds the Consul agent: $FFT_CONSUL_BIN, `consul` on PATH, or the one
// e2e/agents/build-consul.sh caches in <repo>/.cache/agents. Without one the
// test skips, unless FFT_E2E=1 makes that a failure.
func Bin(t testing.TB) string {
	t.Helper()
	p, err := agentrun.DefaultFinder().Find(agentrun.Consul)
	if err == nil {
		return p
	}
	if os.Getenv("FFT_E2E") == "1" {
		t.Fatalf("FFT_E2E=1 but %v (run make agents)", err)
	}
	t.Skipf("%v (run make agents, or set FFT_E2E=1 to make this a failure)", err)
	return ""
}

// Start runs a Consul dev agent on free loopback ports, waits until it
// serves KV, and stops it when the test ends (its log is printed if the
// test failed). It returns the agent's HTTP address (as CONSUL_HTTP_ADDR
// takes it) and a client.
func Start(t testing.TB) (string, *api.Client) {
	t.Helper()
	bin := Bin(t)
	p, err := agentrun.FreePorts(4)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ports := agentrun.ConsulPorts{HTTP: p[0], Server: p[1], SerfLAN: p[2], SerfWAN: p[3]}
	dataDir := filepath.Join(dir, "consul-data")
	proc, err := agentrun.Start(dir, "consul", bin, agentrun.ConsulDevArgs(dataDir, ports), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Registered after TempDir's, so it runs first: the agent stops before
	// its folder goes.
	t.Cleanup(func() {
		proc.Stop(context.Background(), 10*time.Second)
		if t.Failed() {
			b, _ := os.ReadFile(proc.LogPath)
			t.Logf("consul log:\n%s", b)
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", ports.HTTP)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		err := agentrun.ConsulReady(addr, dataDir)
		if err == nil {
			break
		}
		if proc.Exited() {
			t.Fatalf("consul exited before it was ready: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("consul not ready after 30s: %v", err)
		}
	}
	c, err := api.NewClient(&api.Config{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	return addr, c
}
