package command

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator/workload"
)

// The 8-model table: a cluster of Gavel's and the synthetic models runs,
// the burst arrives at 0, and the written workload carries every model's
// rate.
func TestSimulateGavel8(t *testing.T) {
	dir := t.TempDir()
	var spec []string
	for _, m := range workload.Gavel8Throughputs().Models {
		spec = append(spec, m+"=8")
	}
	code, out, errb := simulate("-policies", "fifo", "-reference", "none", "-throughputs", "gavel-8", "-cluster", strings.Join(spec, ","),
		"-jobs", "24", "-burst", "16", "-rates", "2", "-plots=false", "-quiet", "-json", "-out", dir)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errb)
	}
	var s struct {
		Finished int `json:"finished"`
		Active   struct {
			Max float64 `json:"max"`
		} `json:"active"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out)
	}
	if s.Finished != 24 || s.Active.Max < 16 {
		t.Errorf("finished %d, most active %v; want 24 and >= 16 (the burst)", s.Finished, s.Active.Max)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "workload-r2-s0.csv"))
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(string(raw), "\n")
	for _, m := range workload.SyntheticModels {
		if !strings.Contains(head, "rate:"+m.Name) {
			t.Errorf("workload header %q lacks rate:%s", head, m.Name)
		}
	}
}
