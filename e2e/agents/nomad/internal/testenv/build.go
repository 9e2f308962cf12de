package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	binMu   sync.Mutex
	binDirs = map[string]string{}
	binErrs = map[string]error{}
)

// MainBinary returns the path of a command of the main module (cmd/<name>), built once per
// test binary into a temporary folder, which CleanupPluginDir removes too.
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

// CleanupBinaries removes the folders MainBinary built; call it from TestMain.
func CleanupBinaries() {
	binMu.Lock()
	defer binMu.Unlock()
	for _, dir := range binDirs {
		_ = os.RemoveAll(dir)
	}
}
