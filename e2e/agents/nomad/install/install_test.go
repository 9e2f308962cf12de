package install

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

const (
	modulePath = "github.com/nomad-fft/nomad-fft"
	// testVersion is the release the proxy serves; a fresh module cache per run keeps it from
	// shadowing anything.
	testVersion = "v0.1.0"
	// installTimeout bounds the go install: a few seconds with warm build caches, a few
	// minutes on 2 cores when the build cache is cold.
	installTimeout = 8 * time.Minute
)

// TestGoInstallFromProxy is what an operator types, `go install <module>/cmd/...@v0.1.0`, run
// against a file:// module proxy that serves this checkout as v0.1.0 (dependencies come from
// the local module cache's download folder, else the usual proxy). It fails if the main module
// needs a replace (go install refuses those), and checks each installed binary reports v0.1.0.
func TestGoInstallFromProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: go install builds every binary")
	}
	root := repoRoot(t)
	work := t.TempDir()
	proxy := filepath.Join(work, "proxy")
	serveModule(t, root, proxy, testVersion)

	gopath, gobin := filepath.Join(work, "gopath"), filepath.Join(work, "bin")
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "install", modulePath+"/cmd/...@"+testVersion)
	cmd.Dir = work // outside every module, as an operator's shell would be
	cmd.Env = append(os.Environ(),
		"GOPATH="+gopath,
		"GOBIN="+gobin,
		"GOMODCACHE="+filepath.Join(gopath, "pkg", "mod"),
		"GOPROXY="+proxyList(t, proxy),
		// The checkout is not in the checksum database; its dependencies are checked against
		// the go.sum inside the module zip.
		"GONOSUMDB="+modulePath,
		"GOPRIVATE=", "GONOPROXY=", "GOWORK=off", "GOTOOLCHAIN=local",
		// -trimpath lets the build cache serve the dependencies from a module cache in a new
		// folder each run; -modcacherw lets t.TempDir remove it.
		"GOFLAGS=-trimpath -modcacherw",
	)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install %s/cmd/...@%s: %v\n%s", modulePath, testVersion, err, out)
	}
	t.Logf("go install took %s", time.Since(start).Round(time.Millisecond))

	want := mainPackages(t, root)
	got := entries(t, gobin)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("installed %q, want the checkout's commands %q", got, want)
	}
	for _, name := range got {
		args := []string{"-version"}
		if name == "fftctl" {
			args = []string{"version"}
		}
		out, err := exec.Command(filepath.Join(gobin, name), args...).CombinedOutput()
		line := strings.TrimSpace(string(out))
		if err != nil || !strings.HasPrefix(line, name+" "+testVersion+" (commit ") {
			t.Errorf("%s %s: %v, output %q; want %q", name, strings.Join(args, " "), err, line, name+" "+testVersion+" (commit ...)")
		}
	}
}

// repoRoot is the checkout holding this test (four folders up from its package).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("finding the main module: %v", err)
	}
	return root
}

// serveModule writes the GOPROXY layout (list, .info, .mod, .zip) for the main module at
// version from the checkout's files: tracked and untracked, not ignored, so a local build
// output (bin/, dist/) never enters the zip. The zip omits nested modules, as a real one does.
func serveModule(t *testing.T, root, proxy, version string) {
	t.Helper()
	dir := filepath.Join(proxy, modulePath, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("listing the checkout's files with git: %v", err)
	}
	var files []modzip.File
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		info, err := os.Lstat(filepath.Join(root, rel))
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted in the work tree, or a link (.cache): not module content
		}
		files = append(files, file{root: root, rel: filepath.ToSlash(rel), info: info})
	}
	zf, err := os.Create(filepath.Join(dir, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	if err := modzip.Create(zf, module.Version{Path: modulePath, Version: version}, files); err != nil {
		t.Fatalf("zipping the module: %v", err)
	}
	if err := zf.Close(); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	info := fmt.Sprintf(`{"Version":%q,"Time":%q}`, version, time.Now().UTC().Format(time.RFC3339))
	for name, body := range map[string][]byte{"list": []byte(version + "\n"), version + ".info": []byte(info), version + ".mod": gomod} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// proxyList puts the test proxy first, then the local module cache's download folder (itself a
// proxy layout, so dependencies need no network when cached), then the configured proxies.
func proxyList(t *testing.T, proxy string) string {
	t.Helper()
	env := func(name string) string {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	list := []string{"file://" + filepath.ToSlash(proxy)}
	if dl := filepath.Join(env("GOMODCACHE"), "cache", "download"); dirExists(dl) {
		list = append(list, "file://"+filepath.ToSlash(dl))
	}
	return strings.Join(append(list, env("GOPROXY")), ",")
}

// mainPackages are the names of the checkout's commands: cmd/<name> folders of package main.
func mainPackages(t *testing.T, root string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-C", root, "-f", "{{if eq .Name \"main\"}}{{.ImportPath}}{{end}}", "./cmd/...").Output()
	if err != nil {
		t.Fatalf("listing the commands: %v", err)
	}
	var names []string
	for _, p := range strings.Fields(string(out)) {
		names = append(names, filepath.Base(p))
	}
	sort.Strings(names)
	if len(names) < 3 {
		t.Fatalf("commands %q: want at least fft-allocator, fftctl and nomad-device-fft", names)
	}
	return names
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("reading GOBIN: %v", err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	sort.Strings(names)
	return names
}

func dirExists(p string) bool {
	info, err := os.Stat(p)
	return err == nil && info.IsDir()
}

// file is one checkout file for modzip.Create.
type file struct {
	root, rel string
	info      os.FileInfo
}

func (f file) Path() string                { return f.rel }
func (f file) Lstat() (os.FileInfo, error) { return f.info, nil }
func (f file) Open() (io.ReadCloser, error) {
	return os.Open(filepath.Join(f.root, filepath.FromSlash(f.rel)))
}
