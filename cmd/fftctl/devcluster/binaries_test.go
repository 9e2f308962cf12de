package devcluster

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nomad-fft/nomad-fft/e2e/agentrun"
)

// tree is a fake machine: a repository, a folder with fftctl and maybe its
// siblings, and a record of builds. Its PATH holds no agents: the order in
// which agents are looked for is agentrun's (and tested there).
type tree struct {
	repo, binDir string
	env          map[string]string
	built        []string
}

func newTree(t *testing.T) *tree {
	root := t.TempDir()
	tr := &tree{repo: filepath.Join(root, "repo"), binDir: filepath.Join(root, "opt"), env: map[string]string{}}
	for _, d := range []string{tr.repo, tr.binDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(tr.repo, "go.mod"), "module "+agentrun.MainModule+"\n\ngo 1.26\n", 0o644)
	write(t, filepath.Join(tr.binDir, "fftctl"), "", 0o755)
	return tr
}

func write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func (tr *tree) finder(wd string) finder {
	return finder{
		agents: agentrun.Finder{
			Getenv:   func(k string) string { return tr.env[k] },
			LookPath: func(string) (string, error) { return "", exec.ErrNotFound },
			// As DefaultFinder: the working directory, then fftctl's folder.
			Starts: []string{wd, tr.binDir},
		},
		executable: func() (string, error) { return filepath.Join(tr.binDir, "fftctl"), nil },
		build: func(_ context.Context, root, name, out string) error {
			tr.built = append(tr.built, name+" from "+root)
			return os.WriteFile(out, nil, 0o755)
		},
	}
}

func (tr *tree) cachedAgent(t *testing.T, a agentrun.Agent) string {
	p := a.CachePath(tr.repo)
	write(t, p, "", 0o755)
	return p
}

func TestResolveBinaries(t *testing.T) {
	t.Run("variables, then next to fftctl", func(t *testing.T) {
		tr := newTree(t)
		consulBin := tr.cachedAgent(t, agentrun.Consul)
		for _, name := range []string{"nomad", agentrun.PluginName, DriverName, allocatorName} {
			write(t, filepath.Join(tr.binDir, name), "", 0o755)
		}
		custom := t.TempDir()
		for _, name := range []string{"my-nomad", "my-plugin"} {
			write(t, filepath.Join(custom, name), "", 0o755)
		}
		tr.env[agentrun.Nomad.Env] = filepath.Join(custom, "my-nomad")
		tr.env[EnvPluginBin] = filepath.Join(custom, "my-plugin")
		b, err := tr.finder(tr.repo).resolve(context.Background(), Binaries{}, t.TempDir(), func(string) {})
		if err != nil {
			t.Fatal(err)
		}
		want := Binaries{Nomad: filepath.Join(custom, "my-nomad"), Consul: consulBin,
			Plugin: filepath.Join(custom, "my-plugin"), Driver: filepath.Join(tr.binDir, DriverName), Allocator: filepath.Join(tr.binDir, allocatorName)}
		if b != want {
			t.Errorf("resolve = %+v, want %+v", b, want)
		}
	})
	t.Run("repository cache and builds", func(t *testing.T) {
		tr := newTree(t)
		nomadBin := tr.cachedAgent(t, agentrun.Nomad)
		consulBin := tr.cachedAgent(t, agentrun.Consul)
		buildDir := t.TempDir()
		var progress []string
		// From a folder inside the repository, with nothing next to fftctl.
		b, err := tr.finder(filepath.Join(tr.repo, "jobspecs")).resolve(context.Background(), Binaries{}, buildDir, func(m string) { progress = append(progress, m) })
		if err != nil {
			t.Fatal(err)
		}
		want := Binaries{Nomad: nomadBin, Consul: consulBin, Plugin: filepath.Join(buildDir, agentrun.PluginName),
			Driver: filepath.Join(buildDir, DriverName), Allocator: filepath.Join(buildDir, allocatorName)}
		if b != want {
			t.Errorf("resolve = %+v, want %+v", b, want)
		}
		if len(tr.built) != 3 || !strings.HasSuffix(tr.built[0], " from "+tr.repo) || len(progress) != 3 {
			t.Errorf("builds %v, progress %v; want the plugin, the driver and the allocator built in the repository, each announced", tr.built, progress)
		}
	})
	t.Run("given binaries are kept", func(t *testing.T) {
		tr := newTree(t)
		given := Binaries{Nomad: "/n", Consul: "/c", Plugin: "/p", Driver: "/d", Allocator: "/a"}
		b, err := tr.finder(t.TempDir()).resolve(context.Background(), given, t.TempDir(), func(string) {})
		if err != nil || b != given {
			t.Errorf("resolve = %+v, %v; want %+v untouched", b, err, given)
		}
	})
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, tr *tree)
		wd    func(tr *tree) string
		want  []string
	}{
		{"no agents anywhere", func(*testing.T, *tree) {}, func(tr *tree) string { return tr.repo },
			[]string{"no nomad agent (" + agentrun.Nomad.Env + " is unset, no nomad on PATH, ", "no consul agent", "make agents", "about 16 minutes"}},
		{"an agent variable naming nothing", func(t *testing.T, tr *tree) {
			tr.env[agentrun.Consul.Env] = "/no/such/consul"
			tr.cachedAgent(t, agentrun.Nomad)
		}, func(tr *tree) string { return tr.repo }, []string{agentrun.Consul.Env + `="/no/such/consul"`}},
		{"no repository to build from", func(t *testing.T, tr *tree) {
			tr.env[agentrun.Nomad.Env] = tr.cachedAgent(t, agentrun.Nomad)
			tr.env[agentrun.Consul.Env] = tr.cachedAgent(t, agentrun.Consul)
			os.Remove(filepath.Join(tr.repo, "go.mod"))
		}, func(*tree) string { return os.TempDir() }, []string{"no nomad-device-fft", EnvPluginBin, "make build"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTree(t)
			tc.setup(t, tr)
			_, err := tr.finder(tc.wd(tr)).resolve(context.Background(), Binaries{}, t.TempDir(), func(string) {})
			if !errors.Is(err, ErrMissing) {
				t.Fatalf("err = %v, want ErrMissing", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}
