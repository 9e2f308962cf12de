package agentrun

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func TestFind(t *testing.T) {
	// machine is a fake machine: a repository (with a nested module inside, as this one is), a
	// PATH folder, and a program folder outside the repository.
	type machine struct{ repo, path, opt string }
	newMachine := func(t *testing.T) machine {
		root := t.TempDir()
		m := machine{repo: filepath.Join(root, "repo"), path: filepath.Join(root, "path"), opt: filepath.Join(root, "opt")}
		write(t, filepath.Join(m.repo, "go.mod"), "// The main module.\nmodule "+MainModule+"\n\ngo 1.26\n", 0o644)
		write(t, filepath.Join(m.repo, "e2e", "agentrun", "go.mod"), "module "+MainModule+"/e2e/agentrun\n", 0o644)
		for _, d := range []string{m.path, m.opt} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return m
	}
	for _, tc := range []struct {
		name  string
		agent Agent
		// setup prepares the machine and returns the environment and the folders to start from.
		setup func(t *testing.T, m machine) (env map[string]string, starts []string)
		// want is the path found, or wantErr what the error says.
		want    func(m machine) string
		wantErr []string
	}{
		{"the variable first", Nomad, func(t *testing.T, m machine) (map[string]string, []string) {
			write(t, filepath.Join(m.path, "nomad"), "", 0o755)
			write(t, Nomad.CachePath(m.repo), "", 0o755)
			write(t, filepath.Join(m.opt, "my-nomad"), "", 0o755)
			return map[string]string{"FFT_NOMAD_BIN": filepath.Join(m.opt, "my-nomad")}, []string{m.repo}
		}, func(m machine) string { return filepath.Join(m.opt, "my-nomad") }, nil},
		{"PATH before the cache", Consul, func(t *testing.T, m machine) (map[string]string, []string) {
			write(t, filepath.Join(m.path, "consul"), "", 0o755)
			write(t, Consul.CachePath(m.repo), "", 0o755)
			return nil, []string{m.repo}
		}, func(m machine) string { return filepath.Join(m.path, "consul") }, nil},
		{"the cache above a nested module", Consul, func(t *testing.T, m machine) (map[string]string, []string) {
			write(t, Consul.CachePath(m.repo), "", 0o755)
			return nil, []string{filepath.Join(m.repo, "internal", "agentrun")}
		}, func(m machine) string { return filepath.Join(m.repo, ".cache", "agents", "consul-v1.16.1", "consul") }, nil},
		{"the cache above the second start", Nomad, func(t *testing.T, m machine) (map[string]string, []string) {
			write(t, Nomad.CachePath(m.repo), "", 0o755)
			return nil, []string{m.opt, filepath.Join(m.repo, "bin")}
		}, func(m machine) string { return Nomad.CachePath(m.repo) }, nil},
		{"a variable naming nothing", Consul, func(t *testing.T, m machine) (map[string]string, []string) {
			write(t, Consul.CachePath(m.repo), "", 0o755)
			return map[string]string{"FFT_CONSUL_BIN": "/no/such/consul"}, []string{m.repo}
		}, nil, []string{`FFT_CONSUL_BIN="/no/such/consul"`, "no such file"}},
		{"a variable naming a data file", Nomad, func(t *testing.T, m machine) (map[string]string, []string) {
			write(t, filepath.Join(m.opt, "nomad.txt"), "", 0o644)
			return map[string]string{"FFT_NOMAD_BIN": filepath.Join(m.opt, "nomad.txt")}, []string{m.repo}
		}, nil, []string{"nomad.txt is not an executable file"}},
		{"nowhere, in a repository", Nomad, func(t *testing.T, m machine) (map[string]string, []string) {
			return nil, []string{m.repo}
		}, nil, []string{"no nomad agent (FFT_NOMAD_BIN is unset, no nomad on PATH, ", "nomad-v1.6.1/nomad is missing"}},
		{"nowhere, outside a repository", Consul, func(t *testing.T, m machine) (map[string]string, []string) {
			return nil, []string{m.opt}
		}, nil, []string{"no consul agent (FFT_CONSUL_BIN is unset", "no repository was found above"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMachine(t)
			env, starts := tc.setup(t, m)
			f := Finder{
				Getenv: func(k string) string { return env[k] },
				LookPath: func(name string) (string, error) {
					if p := filepath.Join(m.path, name); IsExecutable(p) == nil {
						return p, nil
					}
					return "", exec.ErrNotFound
				},
				Starts: starts,
			}
			got, err := f.Find(tc.agent)
			if tc.want != nil {
				if err != nil || got != tc.want(m) {
					t.Errorf("Find = %q, %v; want %q", got, err, tc.want(m))
				}
				return
			}
			if err == nil {
				t.Fatalf("Find = %q, want an error", got)
			}
			var nf *NotFoundError
			if isNotFound := errors.As(err, &nf); isNotFound != strings.HasPrefix(tc.name, "nowhere") {
				t.Errorf("error %v: *NotFoundError %v, want it only for an agent found nowhere", err, isNotFound)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
		})
	}
}
