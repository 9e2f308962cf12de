package devcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nomad-fft/nomad-fft/e2e/agentrun"
)

// Binaries are the programs a dev cluster runs. The agents come from
// $FFT_NOMAD_BIN and $FFT_CONSUL_BIN, else PATH, else the repository's
// .cache/agents (make agents). The device plugin, the task driver and the
// allocator come from $FFT_PLUGIN_BIN, $FFT_DRIVER_BIN and
// $FFT_ALLOCATOR_BIN, else next to the running program (make build puts
// them in bin/), else they are built from the repository into the state
// folder.
type Binaries struct {
	Nomad, Consul, Plugin, Driver, Allocator string
}

// The variables that name prebuilt binaries of the repository's commands.
const (
	EnvPluginBin    = "FFT_PLUGIN_BIN"
	EnvDriverBin    = "FFT_DRIVER_BIN"
	EnvAllocatorBin = "FFT_ALLOCATOR_BIN"
	allocatorName   = "fft-allocator"
	// DriverName is the task driver's executable (its plugin block label).
	DriverName = "nomad-driver-fft"
)

// ErrMissing means a binary was found nowhere; the error says where it
// looked and how to get it.
var ErrMissing = errors.New("devcluster: binary not found")

// finder looks binaries up; its functions are the process's own except in
// tests.
type finder struct {
	// agents finds the agents; its Getenv and repository starts serve the
	// commands too.
	agents     agentrun.Finder
	executable func() (string, error)
	// build runs `go build -o out ./cmd/<name>` in the repository root.
	build func(ctx context.Context, root, name, out string) error
}

func defaultFinder() finder {
	return finder{agents: agentrun.DefaultFinder(), executable: os.Executable, build: goBuild}
}

// resolve fills the empty fields of b as Binaries says, building into
// buildDir; progress hears about each build.
func (f finder) resolve(ctx context.Context, b Binaries, buildDir string, progress func(string)) (Binaries, error) {
	var missing []string
	for _, a := range []struct {
		dst   *string
		agent agentrun.Agent
	}{
		{&b.Nomad, agentrun.Nomad},
		{&b.Consul, agentrun.Consul},
	} {
		if *a.dst != "" {
			continue
		}
		p, err := f.agents.Find(a.agent)
		var notFound *agentrun.NotFoundError
		switch {
		case errors.As(err, &notFound):
			// Both agents' absence is told at once, with how to build them.
			missing = append(missing, notFound.Error())
		case err != nil:
			return b, fmt.Errorf("%w: %w", ErrMissing, err)
		}
		*a.dst = p
	}
	if len(missing) > 0 {
		return b, fmt.Errorf("%w: %s; run `make agents` in the repository: it builds Nomad %s and Consul %s from their MPL modules into .cache/ (about 16 minutes on 2 cores the first time)",
			ErrMissing, strings.Join(missing, "; "), agentrun.Nomad.Version, agentrun.Consul.Version)
	}
	for _, c := range []struct {
		dst       *string
		name, env string
	}{
		{&b.Plugin, agentrun.PluginName, EnvPluginBin},
		{&b.Driver, DriverName, EnvDriverBin},
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

// command finds one of the repository's commands: $env, else next to the
// running program, else built into buildDir.
func (f finder) command(ctx context.Context, name, env, buildDir string, progress func(string)) (string, error) {
	if p := f.agents.Getenv(env); p != "" {
		if err := agentrun.IsExecutable(p); err != nil {
			return "", fmt.Errorf("%w: %s=%q: %w", ErrMissing, env, p, err)
		}
		return p, nil
	}
	if exe, err := f.executable(); err == nil {
		if p := filepath.Join(filepath.Dir(exe), name); agentrun.IsExecutable(p) == nil {
			return p, nil
		}
	}
	root, ok := agentrun.RepoRoot(f.agents.Starts...)
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
