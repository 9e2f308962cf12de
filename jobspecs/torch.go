package jobspecs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// TorchTrain is the PyTorch training job on the nomad-fft task driver, torch-train.nomad.hcl;
// it runs python/torch_train.py from the folder its python_dir variable names (WritePython
// puts the embedded copy there).
const TorchTrain = "torch-train.nomad.hcl"

// EnvPython names the Python interpreter TorchPython tries first.
const EnvPython = "FFT_PYTHON"

// ErrNoTorch says no Python interpreter found imports torch.
var ErrNoTorch = errors.New("PyTorch is missing")

// TorchPython finds a Python 3 interpreter that imports torch and returns its path and torch's
// version. It tries $FFT_PYTHON when set (and only it), else python3 on PATH, then
// /usr/bin/python3: Debian's python3-torch is installed for the system Python, which a pyenv
// or virtualenv python3 earlier on PATH does not see. The error says what each one answered
// and how to install PyTorch.
func TorchPython(ctx context.Context) (path, version string, err error) {
	candidates := []string{"python3", "/usr/bin/python3"}
	if p := os.Getenv(EnvPython); p != "" {
		candidates = []string{p}
	}
	var tried []string
	seen := map[string]bool{}
	for _, c := range candidates {
		abs, err := exec.LookPath(c)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: not found", c))
			continue
		}
		if seen[abs] {
			continue
		}
		seen[abs] = true
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		out, err := exec.CommandContext(cctx, abs, "-c", "import torch; print(torch.__version__)").CombinedOutput()
		cancel()
		if err == nil {
			return abs, strings.TrimSpace(string(out)), nil
		}
		tried = append(tried, fmt.Sprintf("%s: %s", abs, lastLine(string(out), err)))
	}
	return "", "", fmt.Errorf("%w: no Python 3 here imports torch (%s); install it with `apt-get install python3-torch` (Debian, Ubuntu) or `pip install torch`, or set %s to a Python that has it",
		ErrNoTorch, strings.Join(tried, "; "), EnvPython)
}

func lastLine(out string, err error) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
		return l
	}
	return err.Error()
}

// WritePython writes the embedded python folder (fft_train.py, torch_train.py) into dir, for
// a job's python_dir on a machine without this repository.
func WritePython(dir string) error {
	entries, err := PythonFS.ReadDir("python")
	if err != nil {
		return fmt.Errorf("listing the embedded python files: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("writing the python files: %w", err)
	}
	for _, e := range entries {
		b, err := PythonFS.ReadFile("python/" + e.Name())
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644)
		}
		if err != nil {
			return fmt.Errorf("writing the python file %s: %w", e.Name(), err)
		}
	}
	return nil
}
