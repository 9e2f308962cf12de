package devcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Binaries are the programs a dev cluster runs. The agents come from
// $FFT_NOMAD_BIN and $FFT_CONSUL_BIN, else PATH, else the repository's
// .cache/agents (make agents). The plugin and the allocator come from
// $FFT_PLUGIN_BIN and $FFT_ALLOCATOR_BIN, else next to the running
// program (make build puts all three in bin/), else they are built from the
// repository into the state folder.
type Binaries struct {
	Nomad, Consul, Plugin, Allocator string
}

// The variables that name prebuilt binaries, and the agent versions the
// repository builds (make agents).
const (
	EnvNomadBin     = "FFT_NOMAD_BIN"
	EnvConsulBin    = "FFT_CONSUL_BIN"
	EnvPluginBin    = "FFT_PLUGIN_BIN"
	EnvAllocatorBin = "FFT_ALLOCATOR_BIN"
	NomadVersion    = "1.6.1"
	ConsulVersion   = "1.16.1"
	// PluginName is the plugin's file name, which is also the label of its
	// plugin block in the client configuration.
	PluginName    = "nomad-device-fft"
	allocatorName = "fft-allocator"
	mainModule    = "github.com/nomad-fft/nomad-fft"
)

// ErrMissing means a binary was found nowhere; the error says where it
// looked and how to get it.
var ErrMissing = errors.New("devcluster: binary not found")

// finder looks binaries up; its functions are the process's own except in
// tests.
type finder struct {
	getenv     func(string) string
	lookPath   func(string) (string, error)
	executable func() (string, error)
	getwd      func() (string, error)
	// build runs `go build -o out ./cmd/<name>` in the repository root.
	build func(ctx context.Context, root, name, out string) error
}

func defaultFinder() finder {
	return finder{getenv: os.Getenv, lookPath: exec.LookPath, executable: os.Executable, getwd: os.Getwd, build: goBuild}
}

// resolve fills the empty fields of b as Binaries says, building into
// buildDir; progress hears about each build.
func (f finder) resolve(ctx context.Context, b Binaries, buildDir string, progress func(string)) (Binaries, error) {
	var missing []string
	for _, a := range []struct {
		dst                *string
		name, version, env string
	}{
		{&b.Nomad, "nomad", NomadVersion, EnvNomadBin},
		{&b.Consul, "consul", ConsulVersion, EnvConsulBin},
	} {
		if *a.dst != "" {
			continue
		}
		p, why, err := f.agent(a.name, a.version, a.env)
		if err != nil {
			return b, err
		}
		if why != "" {
			missing = append(missing, why)
		}
		*a.dst = p
	}
	if len(missing) > 0 {
		return b, fmt.Errorf("%w: %s; run `make agents` in the repository: it builds Nomad %s and Consul %s from their MPL modules into .cache/ (about 16 minutes on 2 cores the first time)",
			ErrMissing, strings.Join(missing, "; "), NomadVersion, ConsulVersion)
	}
	for _, c := range []struct {
		dst       *string
		name, env string
	}{
		{&b.Plugin, PluginName, EnvPluginBin},
		{&b.Allocator, allocatorName, EnvAllocatorBin},
	} {
		if *c.dst == "" {
			p, err := f.command(ctx, c.name, c.env, buildDir, progress)
			if err != nil {
				return b, err
			}
			*c.dst = p
		}
	}
	return b, nil
}

// agent finds an agent: $env, else PATH, else the repository's cache. When
// there is none it returns why; a variable naming no program is an error.
func (f finder) agent(name, version, env string) (path, missing string, err error) {
	if p := f.getenv(env); p != "" {
		if err := isExecutable(p); err != nil {
			return "", "", fmt.Errorf("%w: %s=%q: %w", ErrMissing, env, p, err)
		}
		return p, "", nil
	}
	if p, err := f.lookPath(name); err == nil {
		return p, "", nil
	}
	cache := "no repository was found above the working directory or fftctl to hold .cache/agents"
	if root, ok := f.repoRoot(); ok {
		cached := filepath.Join(root, ".cache", "agents", name+"-v"+version, name)
		if isExecutable(cached) == nil {
			return cached, "", nil
		}
		cache = cached + " is missing"
	}
	return "", fmt.Sprintf("no %s agent (%s is unset, no %s on PATH, %s)", name, env, name, cache), nil
}

// command finds one of the repository's commands: $env, else next to the
// running program, else built into buildDir.
func (f finder) command(ctx context.Context, name, env, buildDir string, progress func(string)) (string, error) {
	if p := f.getenv(env); p != "" {
		if err := isExecutable(p); err != nil {
			return "", fmt.Errorf("%w: %s=%q: %w", ErrMissing, env, p, err)
		}
		return p, nil
	}
	if exe, err := f.executable(); err == nil {
		if p := filepath.Join(filepath.Dir(exe), name); isExecutable(p) == nil {
			return p, nil
		}
	}
	root, ok := f.repoRoot()
	if !ok {
		return "", fmt.Errorf("%w: no %s: %s is unset, it is not next to fftctl, and no repository was found above the working directory to build it from (run `make build` there, or set %s)",
			ErrMissing, name, env, env)
	}
	out := filepath.Join(buildDir, name)
	progress(fmt.Sprintf("Building %s from %s (go build; the first build takes a minute or two)", name, root))
	if err := f.build(ctx, root, name, out); err != nil {
		return "", err
	}
	return out, nil
}

// repoRoot finds the main module's root above the working directory, else
// above the running program.
func (f finder) repoRoot() (string, bool) {
	var starts []string
	if wd, err := f.getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := f.executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, dir := range starts {
		for {
			if isMainModule(filepath.Join(dir, "go.mod")) {
				return dir, true
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", false
}

func isMainModule(gomod string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.TrimSpace(rest) == mainModule
		}
	}
	return false
}

func isExecutable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}

func goBuild(ctx context.Context, root, name, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/"+name)
	cmd.Dir = root
	// The plugin's NVML binding needs cgo; its headers warn on new compilers.
	cmd.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s (go build -o %s ./cmd/%s in %s): %w\n%s", name, out, name, root, err, output)
	}
	return nil
}
