package command

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/cli"
	nomad "github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/jobspecs"
)

// Every case fails before Nomad is asked anything: -address points at a
// closed port, so a request would fail with another message.
func TestRunCommandArguments(t *testing.T) {
	dir := t.TempDir()
	jobspec := filepath.Join(dir, "train.nomad.hcl")
	src, err := jobspecs.FS.ReadFile(jobspecs.Train)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jobspec, src, 0o644); err != nil {
		t.Fatal(err)
	}
	badVars := filepath.Join(dir, "bad.vars.hcl")
	if err := os.WriteFile(badVars, []byte("work = = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	typoVars := filepath.Join(dir, "typo.vars.hcl")
	if err := os.WriteFile(typoVars, []byte("wrok = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	closed := "-address=http://127.0.0.1:1"
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{"no jobspec", []string{closed}, "one argument: JOBSPEC"},
		{"two jobspecs", []string{closed, jobspec, jobspec}, "one argument: JOBSPEC"},
		{"missing file", []string{closed, filepath.Join(dir, "nope.hcl")}, "Error reading the jobspec"},
		{"-var without =", []string{closed, "-var", "work", jobspec}, `-var "work": expected NAME=VALUE`},
		{"-var of an undeclared variable", []string{closed, "-var", "wrok=5", jobspec}, `the jobspec declares no variable "wrok"`},
		{"-var-file of an undeclared variable", []string{closed, "-var-file", typoVars, jobspec}, `no variable "wrok"`},
		{"-var-file that does not parse", []string{closed, "-var-file", badVars, jobspec}, "-var-file " + badVars},
		{"missing -var-file", []string{closed, "-var-file", filepath.Join(dir, "none.hcl"), jobspec}, "none.hcl"},
		{"unknown flag", []string{"-nope", jobspec}, "flag provided but not defined: -nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ui := cli.NewMockUi()
			if code := (&RunCommand{Meta: Meta{Ui: ui}}).Run(tc.args); code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if got := ui.ErrorWriter.String(); !strings.Contains(got, tc.err) {
				t.Errorf("stderr:\n%s\nwant it to contain %q", got, tc.err)
			}
			if ui.OutputWriter.String() != "" {
				t.Errorf("stdout %q, want nothing", ui.OutputWriter.String())
			}
		})
	}
}

// jobB builds a parsed job fixture: newJob("train").Meta("fft.work", "10").GPUs(2).Obj().
type jobB struct{ j *nomad.Job }

func newJob(id string) *jobB {
	ns := "default"
	return &jobB{&nomad.Job{ID: &id, Name: &id, Namespace: &ns, Meta: map[string]string{},
		TaskGroups: []*nomad.TaskGroup{{Tasks: []*nomad.Task{{Resources: &nomad.Resources{}}}}}}}
}

func (b *jobB) Meta(k, v string) *jobB { b.j.Meta[k] = v; return b }

func (b *jobB) GPUs(n uint64) *jobB {
	r := b.j.TaskGroups[0].Tasks[0].Resources
	r.Devices = append(r.Devices, &nomad.RequestedDevice{Name: "nvidia/gpu", Count: &n})
	return b
}

func (b *jobB) Obj() *nomad.Job { return b.j }

func TestCheckContract(t *testing.T) {
	good := func() *jobB {
		return newJob("train").Meta("fft.work", "100").Meta("fft.throughput", a100+"=4").GPUs(2)
	}
	for _, tc := range []struct {
		name string
		job  *nomad.Job
		want []string // each in the error; none for a valid job
	}{
		{"valid", good().Obj(), nil},
		{"no fft. meta", newJob("web").Meta("owner", "x").GPUs(1).Obj(), []string{`job "default/web"`, "no fft. meta", "fft.work", "fft.throughput"}},
		{"negative work", good().Meta("fft.work", "-5").Obj(), []string{`"fft.work" = "-5"`, "expected a number > 0"}},
		{"typo and bad throughput", good().Meta("fft.troughput", "x=1").Meta("fft.throughput", "A100").Obj(),
			[]string{`"fft.troughput" = "x=1"`, "this key is unknown", `"fft.throughput" = "A100"`, "MODEL=UNITS_PER_ROUND"}},
		{"no GPU request", newJob("cpu").Meta("fft.work", "1").Meta("fft.throughput", a100+"=1").Obj(),
			[]string{`device "nvidia/gpu" count = "0"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkContract(tc.job)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("a valid job was refused: %v", err)
				}
				return
			}
			var ce *contractError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *contractError", err)
			}
			text := contractErrorText(ce)
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("error text lacks %q:\n%s", w, text)
				}
			}
			if !strings.Contains(text, "nothing was submitted") || !strings.HasSuffix(text, `"The jobspec contract").`) {
				t.Errorf("error text lacks the outcome or the fix:\n%s", text)
			}
		})
	}
}
