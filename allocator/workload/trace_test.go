package workload

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nomad-fft/nomad-fft/allocator"
)

var gavelCluster = []allocator.Model{{Name: "v100", GPUs: 36}, {Name: "p100", GPUs: 36}, {Name: "k80", GPUs: 36}}

func TestParseTraceFiles(t *testing.T) {
	for _, tc := range []struct {
		file    string
		opt     TraceOptions
		jobs    int
		skipped int
		first   JobSpec // ID, Type, GPUs, Work, Arrival checked
	}{
		{"gavel_physical_small.trace", TraceOptions{Cluster: gavelCluster}, 3, 0, JobSpec{}},
		{"gavel_msr_small.trace", TraceOptions{Cluster: gavelCluster, Big: BigSkip}, 3, 1, JobSpec{ID: "j0", Type: "Transformer (batch size 128)", GPUs: 1, Work: 95121}},
		{"gavel_msr_small.trace", TraceOptions{Cluster: gavelCluster, Big: BigExtrapolate}, 4, 0, JobSpec{}},
		{"shockwave_small.trace", TraceOptions{Cluster: gavelCluster}, 3, 0, JobSpec{ID: "j0", Type: "LM (batch size 10)", GPUs: 1, Work: 134583}},
	} {
		tr, err := LoadTrace(filepath.Join("testdata", tc.file), tc.opt)
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		if len(tr.Jobs) != tc.jobs || tr.Skipped != tc.skipped {
			t.Errorf("%s: %d jobs, %d skipped; want %d, %d", tc.file, len(tr.Jobs), tr.Skipped, tc.jobs, tc.skipped)
		}
		if tc.first.ID != "" {
			j := tr.Jobs[0]
			got := JobSpec{ID: j.ID, Type: j.Type, GPUs: j.GPUs, Work: j.Work}
			if d := cmp.Diff(tc.first, got); d != "" {
				t.Errorf("%s: first job (-want,+got):\n%s", tc.file, d)
			}
		}
		for _, j := range tr.Jobs {
			if len(j.Rate) == 0 || j.Work <= 0 {
				t.Errorf("%s: job %s has no rates or no work: %+v", tc.file, j.ID, j)
			}
		}
	}
}

// TestParseTraceRejects: every bad input names file, line and field, and
// in skip mode is counted instead.
func TestParseTraceRejects(t *testing.T) {
	const good = "ResNet-18 (batch size 128)\tcmd\tdir\t--num_steps\t1\t1000\t1\t1\t-1\t0\n"
	small := []allocator.Model{{Name: "v100", GPUs: 4}, {Name: "k80", GPUs: 2}}
	for _, tc := range []struct {
		name, in, field string
		line            int
		fatal           bool // a bad header cannot be skipped
	}{
		{"missing fields", good + "ResNet-18 (batch size 128)\tcmd\t1000\n", "fields", 2, false},
		{"negative steps", "ResNet-18 (batch size 128)\tcmd\tdir\t--num_steps\t1\t-5\t1\t1\t-1\t0\n", "total_steps", 1, false},
		{"negative arrival", "ResNet-18 (batch size 128)\tcmd\tdir\t--num_steps\t1\t100\t1\t1\t-1\t-3\n", "arrival_time", 1, false},
		{"negative duration", "LM (batch size 10)\tc\td\t--steps\t1\t100\t1\tgns\t1\t-1\t-20\t0\n", "duration", 1, false},
		{"unknown job type", "Bogus (batch size 1)\tcmd\tdir\t--num_steps\t1\t100\t1\t1\t-1\t0\n", "job_type", 1, false},
		{"more GPUs than any model", "ResNet-18 (batch size 128)\tcmd\tdir\t--num_steps\t1\t100\t8\t1\t-1\t0\n", "scale_factor", 1, false},
		{"scale factor beyond table", "Transformer (batch size 128)\tc\t-step\t1\t95121\t0\t16\n", "scale_factor", 1, false},
		{"not a number", "ResNet-18 (batch size 128)\tcmd\tdir\t--num_steps\t1\tmany\t1\t1\t-1\t0\n", "total_steps", 1, false},
		{"csv missing value", "id,job_type,arrival_s,gpus,work\na,ResNet-18 (batch size 128),0,1,\n", "work", 2, false},
		{"csv missing column", "id,job_type,arrival_s,work\na,ResNet-18 (batch size 128),0,1\n", "gpus", 1, true},
		{"csv negative rate", "id,job_type,arrival_s,gpus,work,rate:v100\na,x,0,1,10,-1\n", "rate:v100", 2, false},
		{"csv rate too slow for the work", "id,job_type,arrival_s,gpus,work,rate:v100\na,x,0,1,1e15,1e-300\n", "rate:v100", 2, false},
		{"csv rate too fast for the work", "id,job_type,arrival_s,gpus,work,rate:v100\na,x,0,1,1e-9,1\n", "rate:v100", 2, false},
		{"csv work too large", "id,job_type,arrival_s,gpus,work,rate:v100\na,x,0,1,1e16,1\n", "work", 2, false},
		{"csv duplicate id", "id,job_type,arrival_s,gpus,work\na,ResNet-18 (batch size 128),0,1,5\na,ResNet-18 (batch size 128),0,1,5\n", "id", 3, false},
		{"csv too many GPUs", "id,job_type,arrival_s,gpus,work,rate:v100\na,x,0,6,10,3\n", "gpus", 2, false},
	} {
		opt := TraceOptions{Cluster: small}
		_, err := ParseTrace(strings.NewReader(tc.in), "bad.trace", opt)
		var te *TraceError
		if !errors.As(err, &te) {
			t.Errorf("%s: err = %v, want a *TraceError", tc.name, err)
			continue
		}
		if te.File != "bad.trace" || te.Line != tc.line || te.Field != tc.field {
			t.Errorf("%s: error at %s:%d field %q, want bad.trace:%d field %q (%v)", tc.name, te.File, te.Line, te.Field, tc.line, tc.field, err)
		}
		if !strings.Contains(err.Error(), "bad.trace:") || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: message %q does not name file and field", tc.name, err)
		}
		if tc.fatal {
			continue
		}
		opt.Skip = true
		tr, err := ParseTrace(strings.NewReader(tc.in), "bad.trace", opt)
		if err != nil {
			t.Errorf("%s: with Skip: %v", tc.name, err)
			continue
		}
		if tr.Skipped != 1 || len(tr.Warnings) != 1 {
			t.Errorf("%s: with Skip: %d skipped, %d warnings; want 1, 1", tc.name, tr.Skipped, len(tr.Warnings))
		}
	}
}

func TestTraceRoundTrip(t *testing.T) {
	g := NewGenerator(GenConfig{Rate: 2, Seed: 7, MultiGPU: true, Jobs: 50})
	var jobs []JobSpec
	for {
		j, err := g.Next()
		if err != nil {
			break
		}
		jobs = append(jobs, j)
	}
	var buf bytes.Buffer
	if err := WriteTrace(&buf, jobs, []string{"v100", "p100", "k80"}); err != nil {
		t.Fatal(err)
	}
	tr, err := ParseTrace(&buf, "roundtrip.csv", TraceOptions{Cluster: gavelCluster})
	if err != nil {
		t.Fatal(err)
	}
	for k := range jobs {
		jobs[k].Source = ""
		tr.Jobs[k].Source = ""
	}
	if d := cmp.Diff(jobs, tr.Jobs); d != "" {
		t.Errorf("replayed workload differs (-want,+got):\n%s", d)
	}
}

// TestSharedTraces loads every Gavel trace of the shared data folder, when
// it is there: the Philly-derived ones need an explicit rule for their
// scale factors above 8.
func TestSharedTraces(t *testing.T) {
	files, _ := filepath.Glob("/work/shared/data/gavel/traces/*/*.trace")
	more, _ := filepath.Glob("/work/shared/data/gavel/traces/msr/seed=0/*.trace")
	files = append(files, more...)
	if len(files) == 0 {
		t.Skip("shared data folder not present")
	}
	big := []allocator.Model{{Name: "v100", GPUs: 300}, {Name: "p100", GPUs: 300}, {Name: "k80", GPUs: 300}}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			continue
		}
		if _, err := LoadTrace(f, TraceOptions{Cluster: big, Big: BigExtrapolate}); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// FuzzParseTrace: no input panics, and every accepted job is valid.
func FuzzParseTrace(f *testing.F) {
	for _, name := range []string{"gavel_physical_small.trace", "gavel_msr_small.trace", "shockwave_small.trace"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
	}
	f.Add([]byte("id,job_type,arrival_s,gpus,work,rate:v100\na,x,0,1,10,3\nb,ResNet-18 (batch size 128),1e3,2,5,\n"), true)
	f.Add([]byte("id,job_type\n\"unterminated\n"), false)
	f.Add([]byte("A3C\tc\td\t-n\t1\tNaN\t1\t1\t-1\t0\n"), true)
	f.Add([]byte("id,job_type,arrival_s,gpus,work,rate:v100\na,x,0,1,1e15,1e-300\nb,x,0,1,1e-300,1\nc,x,0,1,1e16,1\n"), true)
	f.Fuzz(func(t *testing.T, data []byte, skip bool) {
		tr, err := ParseTrace(bytes.NewReader(data), "fuzz", TraceOptions{Cluster: gavelCluster, Skip: skip, Big: BigExtrapolate})
		if err != nil {
			var te *TraceError
			if !errors.As(err, &te) {
				t.Fatalf("error %v is not a *TraceError", err)
			}
			return
		}
		for _, j := range tr.Jobs {
			if !(j.Work > 0) || j.Arrival < 0 || j.GPUs < 1 || j.GPUs > 36 {
				t.Fatalf("accepted a bad job: %+v", j)
			}
			// Every round the simulator builds from it is in the engine's
			// ranges, at the shortest and the longest round it accepts.
			for _, r := range []float64{allocator.MinRoundSeconds, allocator.MaxRoundSeconds} {
				for m, rate := range j.Rate {
					theta := rate * r
					if theta > allocator.MaxThroughput || allocator.RatioError(j.Work, theta) != "" || j.Work > allocator.MaxWork {
						t.Fatalf("accepted job %+v: on %q at R = %g s, work %g and throughput %g are out of the engine's range", j, m, r, j.Work, theta)
					}
				}
			}
		}
	})
}
