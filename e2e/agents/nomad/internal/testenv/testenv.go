package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const (
	// MainModule is the module path of the repository that holds the plugin.
	MainModule = "github.com/nomad-fft/nomad-fft"
	// PluginName is the plugin executable's file name (the agent's `plugin` block label).
	PluginName = "nomad-device-fft"
	// NomadVersion is the agent version e2e/agents/build.sh builds.
	NomadVersion = "1.6.1"
	// EnvE2E set to 1 turns "agent missing" from a skip into a failure.
	EnvE2E = "FFT_E2E"
	// EnvNomadBin names a Nomad agent binary to use instead of looking for one.
	EnvNomadBin = "FFT_NOMAD_BIN"
	// EnvPluginBin names a prebuilt plugin binary to use instead of building one.
	EnvPluginBin = "FFT_PLUGIN_BIN"
)

// RepoRoot returns the root of the main module, found by walking up from the working
// directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the repository root: %w", err)
	}
	for {
		if isMainModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of module %s above the working directory", MainModule)
		}
		dir = parent
	}
}

func isMainModule(gomod string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if line := strings.TrimSpace(s.Text()); strings.HasPrefix(line, "module ") {
			return strings.TrimSpace(strings.TrimPrefix(line, "module")) == MainModule
		}
	}
	return false
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
	return reapChildren(filepath.Join(buildDir, PluginName))
}

// CleanupPluginDir removes the folder PluginDir built; call it from TestMain.
func CleanupPluginDir() {
	ReapPlugins()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}

// ErrNoNomad means no Nomad agent binary was found.
var ErrNoNomad = errors.New("no Nomad agent binary")

// agentBinary says where one agent's binary may be found.
type agentBinary struct {
	name, version, env, script string
	missing                    error
}

var nomadBinary = agentBinary{"nomad", NomadVersion, EnvNomadBin, "e2e/agents/build.sh", ErrNoNomad}

// find returns the agent to run: $env, else the command on PATH, else the one the build
// script caches in <repo>/.cache/agents/<name>-v<version>/<name>.
func (b agentBinary) find() (string, error) {
	if p := os.Getenv(b.env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: %s=%q: %w", b.missing, b.env, p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath(b.name); err == nil {
		return p, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cached := filepath.Join(root, ".cache", "agents", b.name+"-v"+b.version, b.name)
	if _, err := os.Stat(cached); err != nil {
		return "", fmt.Errorf("%w: %s is unset, no %s on PATH, and %s is missing (run %s)", b.missing, b.env, b.name, cached, b.script)
	}
	return cached, nil
}

// require returns the agent, or skips the test when there is none, unless FFT_E2E=1, when
// a missing agent fails it.
func (b agentBinary) require(t testing.TB) string {
	t.Helper()
	p, err := b.find()
	if err == nil {
		return p
	}
	if os.Getenv(EnvE2E) == "1" {
		t.Fatalf("%s=1 but %v", EnvE2E, err)
	}
	t.Skipf("skipping end-to-end test: %v (set %s=1 to make this a failure)", err, EnvE2E)
	return ""
}

// FindNomad returns the Nomad agent to run: $FFT_NOMAD_BIN, else `nomad` on PATH, else the
// one e2e/agents/build.sh caches in <repo>/.cache/agents/nomad-v1.6.1/nomad.
func FindNomad() (string, error) { return nomadBinary.find() }

// RequireNomad returns the Nomad agent, or skips the test when there is none, unless
// FFT_E2E=1, when a missing agent fails it.
func RequireNomad(t testing.TB) string { t.Helper(); return nomadBinary.require(t) }

// FreePorts returns n distinct TCP ports free on 127.0.0.1 right now.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("finding a free port: %v", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
