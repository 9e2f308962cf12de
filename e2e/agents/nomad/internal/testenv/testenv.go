package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nomad-fft/nomad-fft/e2e/agentrun"
)

const (
	// PluginName is the plugin executable's file name (the agent's `plugin` block label).
	PluginName = agentrun.PluginName
	// EnvE2E set to 1 turns "agent missing" from a skip into a failure.
	EnvE2E = "FFT_E2E"
	// EnvPluginBin names a prebuilt plugin binary to use instead of building one.
	EnvPluginBin = "FFT_PLUGIN_BIN"
	// EnvKeep set to 1 keeps each test's folder (the agents' data and logs) after the test,
	// and logs where it is; the agents are stopped all the same.
	EnvKeep = "FFT_E2E_KEEP"
)

// RepoRoot returns the root of the main module, found by walking up from the working
// directory.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the repository root: %w", err)
	}
	root, ok := agentrun.RepoRoot(wd)
	if !ok {
		return "", fmt.Errorf("no go.mod of module %s above %s", agentrun.MainModule, wd)
	}
	return root, nil
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// PluginDir returns a folder holding only the plugin executable, built once per test
// binary from the main module (or copied from $FFT_PLUGIN_BIN).
func PluginDir(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "fft-plugin-dir-")
		if buildErr != nil {
			return
		}
		buildErr = buildPlugin(filepath.Join(buildDir, PluginName))
	})
	if buildErr != nil {
		t.Fatalf("preparing the plugin binary: %v", buildErr)
	}
	return buildDir
}

func buildPlugin(out string) error {
	if prebuilt := os.Getenv(EnvPluginBin); prebuilt != "" {
		data, err := os.ReadFile(prebuilt)
		if err != nil {
			return fmt.Errorf("reading %s=%q: %w", EnvPluginBin, prebuilt, err)
		}
		return os.WriteFile(out, data, 0o755)
	}
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-o", out, "./cmd/"+PluginName)
	cmd.Dir = root
	// The plugin is its own module's binary: build it with that module's go.mod, not this one's.
	cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/%s in %s: %w\n%s", PluginName, root, err, output)
	}
	return nil
}

// ReapPlugins kills plugin processes this test process started and left running, and
// reports how many there were. Nomad 1.6.1's loader leaves one behind when SetConfig refuses
// a config; the agent exits in that case, a test does not.
func ReapPlugins() int {
	if buildDir == "" {
		return 0
	}
	return agentrun.KillChildren(filepath.Join(buildDir, PluginName))
}

// Main runs a package's tests and removes what they built: the plugin folders and the
// binaries. A package's TestMain is `func TestMain(m *testing.M) { testenv.Main(m) }`.
func Main(m *testing.M) {
	code := m.Run()
	cleanupPluginDir()
	cleanupBinaries()
	os.Exit(code)
}

// cleanupPluginDir removes the folder PluginDir built (Main calls it).
func cleanupPluginDir() {
	ReapPlugins()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	if driverDir != "" {
		_ = os.RemoveAll(driverDir)
	}
}

// requireAgent returns the agent, or skips the test when there is none, unless FFT_E2E=1, when
// a missing agent fails it; script is what builds it.
func requireAgent(t testing.TB, a agentrun.Agent, script string) string {
	t.Helper()
	p, err := agentrun.DefaultFinder().Find(a)
	if err == nil {
		return p
	}
	if os.Getenv(EnvE2E) == "1" {
		t.Fatalf("%s=1 but %v (run %s)", EnvE2E, err, script)
	}
	t.Skipf("skipping end-to-end test: %v (run %s, or set %s=1 to make this a failure)", err, script, EnvE2E)
	return ""
}

// RequireNomad returns the Nomad agent, or skips the test when there is none, unless
// FFT_E2E=1, when a missing agent fails it.
func RequireNomad(t testing.TB) string {
	t.Helper()
	return requireAgent(t, agentrun.Nomad, "e2e/agents/build.sh")
}

// FreePorts returns n distinct ports free on 127.0.0.1 right now (agentrun.FreePorts: below
// the ephemeral range, so that an agent restarted on them finds them free).
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports, err := agentrun.FreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}
