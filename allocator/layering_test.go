package allocator_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The core (engine, solver, policies, fairness, the round loop, the jobspec contract) takes
// data and returns decisions: it imports no adapter, no Nomad or Consul client and no os.
// Only the adapters (nomadapi, consulstore, the simulated cluster) and the binaries do.
func TestCoreImportsNoAdapter(t *testing.T) {
	core := []string{".", "solver", "policy", "loop", "jobmeta", "../fairness"}
	forbidden := []string{
		"os", "os/exec", "net", "net/http",
		"github.com/hashicorp/nomad/api", "github.com/hashicorp/consul/api",
		"github.com/nomad-fft/nomad-fft/allocator/live", "github.com/nomad-fft/nomad-fft/allocator/nomadapi",
		"github.com/nomad-fft/nomad-fft/allocator/consulstore", "github.com/nomad-fft/nomad-fft/allocator/sim",
	}
	for _, dir := range core {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s: %v", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range ast.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				for _, bad := range forbidden {
					if path == bad {
						t.Errorf("%s imports %s: the core must not talk to the world", f, path)
					}
				}
			}
		}
	}
}
