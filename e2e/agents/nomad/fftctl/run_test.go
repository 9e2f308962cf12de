package fftctl

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

const gateAttribute = "${meta.fft_gate}"

func get(url string) ([]byte, int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, resp.StatusCode, err
}

func trainJobspec(t *testing.T) (string, string) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "jobspecs", "fft-train.nomad.hcl")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, string(b)
}

func gates(job *api.Job) int {
	n := 0
	for _, c := range job.Constraints {
		if c.LTarget == gateAttribute {
			n++
		}
	}
	return n
}

// On the dev cluster without its workload: fftctl run refuses a jobspec with bad fft. meta
// (naming the key, submitting nothing) and registers a good one held behind the gate; a
// training task that
// calls fftctl report moves the job's progress in the ledger that fftctl status, explain and
// audit read; and Ctrl-C stops everything.
func TestRunReportAndInspect(t *testing.T) {
	d := startDev(t, "-round", "2s", "-no-workload")
	nc, err := api.NewClient(&api.Config{Address: d.NomadAddr})
	if err != nil {
		t.Fatal(err)
	}
	path, src := trainJobspec(t)
	at := []string{"-address", d.NomadAddr}

	// Bad meta, from a -var and from the file itself: refused, naming the key; nothing registered.
	code, out, errs := d.ctl(t, append(append([]string{"run"}, at...), "-var", "work=-5", path)...)
	if code != 1 || !strings.Contains(errs, `job meta "fft.work" = "-5": expected a number > 0`) || !strings.Contains(errs, "nothing was submitted") {
		t.Errorf("fftctl run -var work=-5: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	typo := filepath.Join(t.TempDir(), "typo.nomad.hcl")
	if err := os.WriteFile(typo, []byte(strings.Replace(src, `"fft.user"`, `"fft.usr"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := d.ctl(t, append(append([]string{"run"}, at...), typo)...); code != 1 || !strings.Contains(errs, `"fft.usr" = "alice"`) {
		t.Errorf("fftctl run of a jobspec with fft.usr: exit %d, stderr %s", code, errs)
	}
	if _, _, err := nc.Jobs().Info("fft-train", nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a refused jobspec was registered (%v)", err)
	}

	// A good jobspec, which holds no gate of its own: registered with the gate, once.
	if gateBlock := regexp.MustCompile(`(?m)^\s*constraint \{\s*\n\s*attribute\s*=\s*"\$\{meta\.fft_gate\}"`); gateBlock.MatchString(src) {
		t.Fatal("the example jobspec now holds the gate; this test wants one without it")
	}
	code, out, errs = d.ctl(t, append(append([]string{"run"}, at...), "-var", "gpu_count=1", path)...)
	evalID := regexp.MustCompile(`Evaluation ID: ([0-9a-f-]{36})`).FindStringSubmatch(out)
	if code != 0 || evalID == nil || !strings.Contains(out, `Job "default/fft-train" registered, held for FFT`) {
		t.Fatalf("fftctl run: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	if _, _, err := nc.Evaluations().Info(evalID[1], nil); err != nil {
		t.Errorf("the evaluation fftctl run printed: %v", err)
	}
	versions, _, _, err := nc.Jobs().Versions("fft-train", false, nil)
	if err != nil || len(versions) == 0 {
		t.Fatalf("versions of fft-train: %v", err)
	}
	first := versions[len(versions)-1]
	if *first.Version != 0 || gates(first) != 1 {
		t.Errorf("version %d as registered has %d gate constraints, want 1", *first.Version, gates(first))
	}

	// A training task reporting progress. It declares 100 units a round, more than it does
	// (1000 units in 30 s: about 67 a 2 s round), so its reports are believed: they stay
	// within what the declared rate allows over the time it ran (issue 20's cap; a job that
	// declares less than it does is credited no more than it declared).
	fftctl := testenv.MainBinary(t, "fftctl")
	job, err := nc.Jobs().ParseHCLOpts(&api.JobsParseRequest{JobHCL: src, Variables: fmt.Sprintf(`
work        = "1000"
seconds     = 30
gpu_count   = 1
throughput  = "NVIDIA A100-SXM4-40GB=100,Tesla V100-SXM2-16GB=100,NVIDIA H100 80GB HBM3=100"
fftctl      = %q
consul_addr = %q
`, fftctl, d.ConsulAddr)})
	if err != nil {
		t.Fatal(err)
	}
	id := "reporter"
	job.ID, job.Name = &id, &id
	if _, _, err := nc.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
	var done float64
	testenv.Eventually(t, 90*time.Second, time.Second, "the ledger holds the reporter's reported progress", func() error {
		for _, j := range d.statusJSON(t).Jobs {
			if j.ID == "default/reporter" {
				done = j.Done
				// A report every 2 s adds about 67 (the estimate between reports 100 a round).
				if j.Done >= 60 && j.Status == "running" {
					return nil
				}
				return fmt.Errorf("reporter: %s, done %g after %d rounds", j.Status, j.Done, j.RoundsRun)
			}
		}
		return fmt.Errorf("no ledger entry for default/reporter yet")
	})
	t.Logf("the ledger shows %g units done for default/reporter", done)

	consulAt := []string{"-consul-addr", d.ConsulAddr}
	code, out, errs = d.ctl(t, append(append([]string{"explain"}, consulAt...), "reporter")...)
	if code != 0 || !strings.Contains(out, "Decision   = runs on ") || !strings.Contains(out, "Options (cost") {
		t.Errorf("fftctl explain reporter: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = d.ctl(t, append(append([]string{"audit"}, consulAt...), "default/reporter")...)
	if code != 0 || !strings.Contains(out, "start") {
		t.Errorf("fftctl audit default/reporter: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = d.ctl(t, append([]string{"status"}, consulAt...)...)
	if code != 0 || !strings.Contains(out, "default/reporter") || !strings.Contains(out, "GPU Models") {
		t.Errorf("fftctl status: exit %d\n%s", code, out)
	}

	// Ctrl-C: fftctl dev stops everything and exits 0.
	d.interrupt()
	if code := d.wait(t, 2*time.Minute); code != 0 {
		t.Errorf("fftctl dev exited %d after Ctrl-C:\n%s", code, d.output())
	}
	if left := leftovers(d.Dir); len(left) > 0 {
		t.Errorf("fftctl dev left behind:\n%s", strings.Join(left, "\n"))
	}
}
