package command

import (
	"strings"
	"testing"
)

func TestParseWorkDone(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want float64
		ok   bool
	}{
		{"42", 42, true}, {" 3.5 ", 3.5, true}, {"0", 0, true}, {"1e3", 1000, true},
		{"-1", 0, false}, {"NaN", 0, false}, {"+Inf", 0, false}, {"ten", 0, false}, {"", 0, false},
	} {
		got, err := parseWorkDone(tc.arg)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseWorkDone(%q) = %g, %v; want %g (ok %v)", tc.arg, got, err, tc.want, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "WORK_DONE = ") {
			t.Errorf("error %q does not name WORK_DONE", err)
		}
	}
}

func TestReportJob(t *testing.T) {
	for _, tc := range []struct {
		name, flag, ns, job, want, err string
	}{
		{name: "from the task", ns: "team", job: "train", want: "team/train"},
		{name: "-job wins", flag: "ops/eval", ns: "team", job: "train", want: "ops/eval"},
		{name: "no job id", ns: "team", err: "NOMAD_JOB_ID not set: run fftctl report inside the job's Nomad task"},
		{name: "neither", err: "NOMAD_NAMESPACE and NOMAD_JOB_ID not set"},
		{name: "-job without namespace", flag: "train", err: `-job = "train": expected namespace/job`},
		{name: "-job with two slashes", flag: "a/b/c", err: "expected namespace/job"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"NOMAD_NAMESPACE": tc.ns, "NOMAD_JOB_ID": tc.job}
			got, err := reportJob(tc.flag, func(k string) string { return env[k] })
			if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("reportJob = %q, %v; want %q, %q", got, err, tc.want, tc.err)
			}
		})
	}
}
