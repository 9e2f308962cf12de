package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	binMu   sync.Mutex
	binDirs = map[string]string{}
	binErrs = map[string]error{}
)

// MainBinary returns the path of a command of the main module (cmd/<name>), built once per
// test binary into a temporary folder, which cleanupPluginDir removes too.
func MainBinary(t testing.TB, name string) string {
	t.Helper()
	binMu.Lock()
	defer binMu.Unlock()
	if dir, ok := binDirs[name]; ok {
		if err := binErrs[name]; err != nil {
			t.Fatalf("building cmd/%s: %v", name, err)
		}
		return filepath.Join(dir, name)
	}
	dir, err := os.MkdirTemp("", "fft-bin-")
	if err == nil {
		err = buildMain(name, filepath.Join(dir, name))
	}
	binDirs[name], binErrs[name] = dir, err
	if err != nil {
		t.Fatalf("building cmd/%s: %v", name, err)
	}
	return filepath.Join(dir, name)
}

// MainBinaries builds several commands of the main module in one go build, which links them
// in parallel, and returns their paths as MainBinary would.
func MainBinaries(t testing.TB, names ...string) []string {
	t.Helper()
	binMu.Lock()
	var todo []string
	for _, name := range names {
		if _, ok := binDirs[name]; !ok {
			todo = append(todo, name)
		}
	}
	if len(todo) > 1 {
		dir, err := os.MkdirTemp("", "fft-bin-")
		if err == nil {
			err = buildMains(todo, dir)
		}
		for _, name := range todo {
			binDirs[name], binErrs[name] = dir, err
		}
	}
	binMu.Unlock()
	out := make([]string, len(names))
	for i, name := range names {
		out[i] = MainBinary(t, name)
	}
	return out
}

func buildMains(names []string, dir string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, name := range names {
		args = append(args, "./cmd/"+name)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s in %s: %w\n%s", strings.Join(args, " "), root, err, output)
	}
	return nil
}

func buildMain(name, out string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-o", out, "./cmd/"+name)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/%s in %s: %w\n%s", name, root, err, output)
	}
	return nil
}

// cleanupBinaries removes the folders MainBinary built (Main calls it).
func cleanupBinaries() {
	binMu.Lock()
	defer binMu.Unlock()
	for _, dir := range binDirs {
		_ = os.RemoveAll(dir)
	}
}

// RunMainTest runs `go test -count=1 -v -run '^name$' ./pkg` in the main module, with env added
// to the environment, and fails t unless that test ran and passed. It is how a test here
// exercises main-module code that this module cannot import (its Nomad API version differs)
// against the agents it started.
func RunMainTest(t testing.TB, pkg, name string, env ...string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "test", "-count=1", "-v", "-run", "^"+name+"$", "./"+pkg)
	cmd.Dir = root
	cmd.Env = append(append(os.Environ(), "GOWORK=off"), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test -run %s ./%s: %v\n%s", name, pkg, err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+name+" ") {
		t.Fatalf("go test -run %s ./%s did not run the test (skipped?):\n%s", name, pkg, out)
	}
	return string(out)
}
