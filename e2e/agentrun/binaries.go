package agentrun

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// MainModule is the repository's main module; its go.mod marks the repository root.
const MainModule = "github.com/nomad-fft/nomad-fft"

// Agent is an agent program at the version the repository pins and builds (make agents).
type Agent struct {
	Name, Version string
	// Env names a binary to use instead of looking for one.
	Env string
}

// The agents, at their last MPL-2.0 releases (e2e/agents/build.sh and build-consul.sh).
var (
	Nomad  = Agent{Name: "nomad", Version: "1.6.1", Env: "FFT_NOMAD_BIN"}
	Consul = Agent{Name: "consul", Version: "1.16.1", Env: "FFT_CONSUL_BIN"}
)

// CachePath is where the build scripts put the agent in the repository rooted at root.
func (a Agent) CachePath(root string) string {
	return filepath.Join(root, ".cache", "agents", a.Name+"-v"+a.Version, a.Name)
}

// NotFoundError is an agent found nowhere; it says where Find looked.
type NotFoundError struct {
	agent, looked string
}

func (e *NotFoundError) Error() string { return fmt.Sprintf("no %s agent (%s)", e.agent, e.looked) }

// Finder looks agents up. Its functions are the process's own (DefaultFinder) except in tests.
type Finder struct {
	Getenv   func(string) string
	LookPath func(string) (string, error)
	// Starts are the folders the repository root is looked for above, in order.
	Starts []string
}

// DefaultFinder uses this process's environment and PATH, and looks for the repository above
// the working directory, then above the running program (an fftctl in the repository's bin/).
func DefaultFinder() Finder {
	f := Finder{Getenv: os.Getenv, LookPath: exec.LookPath}
	if wd, err := os.Getwd(); err == nil {
		f.Starts = append(f.Starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		f.Starts = append(f.Starts, filepath.Dir(exe))
	}
	return f
}

// Find returns the agent to run: $Env, else the command on PATH (operators have the agents
// there), else the one the build scripts cache in the repository. A variable naming no
// executable file is an error; an agent found nowhere is a *NotFoundError.
func (f Finder) Find(a Agent) (string, error) {
	if p := f.Getenv(a.Env); p != "" {
		if err := IsExecutable(p); err != nil {
			return "", fmt.Errorf("%s=%q: %w", a.Env, p, err)
		}
		return p, nil
	}
	if p, err := f.LookPath(a.Name); err == nil {
		return p, nil
	}
	cache := "no repository was found above " + strings.Join(f.Starts, " or ") + " to hold .cache/agents"
	if root, ok := RepoRoot(f.Starts...); ok {
		cached := a.CachePath(root)
		if IsExecutable(cached) == nil {
			return cached, nil
		}
		cache = cached + " is missing"
	}
	return "", &NotFoundError{agent: a.Name, looked: fmt.Sprintf("%s is unset, no %s on PATH, %s", a.Env, a.Name, cache)}
}

// RepoRoot finds the main module's root: the first folder, going up from each of starts in
// turn, whose go.mod declares MainModule.
func RepoRoot(starts ...string) (string, bool) {
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

// isMainModule reports whether the go.mod at path declares MainModule. Nested modules (this
// one, e2e/agents/...) have go.mod files of their own on the way up.
func isMainModule(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.TrimSpace(rest) == MainModule
		}
	}
	return false
}

// IsExecutable returns nil when path is an executable file, else why not.
func IsExecutable(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return errors.New(path + " is not an executable file")
	}
	return nil
}
