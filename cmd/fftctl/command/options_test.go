package command

import (
	"flag"
	"strings"
	"testing"
	"time"
)

func TestHelpTextListsTheOptions(t *testing.T) {
	own := func(fs *flag.FlagSet) {
		fs.Bool("json", false, "Print JSON.")
		fs.Duration("round", 10*time.Second, "Round length.")
		fs.String("dir", "", "State `folder`.")
	}
	for _, tc := range []struct {
		opts      options
		want, not []string
	}{
		{nomadOptions, []string{"-address=<string>", "NOMAD_ADDR", "-token=<string>", "-tls-skip-verify\n"}, []string{"-consul-addr", "-namespace"}},
		{consulOptions, []string{"-consul-addr=<string>", "CONSUL_HTTP_ADDR", "-consul-prefix=<string>", `Defaults to "nomad-fft/v2"`}, []string{"-address", "-namespace"}},
		{consulOptions | namespaceOption, []string{"-consul-token=<string>", "-namespace=<string>", "NOMAD_NAMESPACE"}, []string{"-address"}},
		{0, nil, []string{"General Options", "-address", "-consul-addr"}},
	} {
		help := helpText("x [options] ARG", "Does x.\nAnd more.", tc.opts, "X", own)
		for _, w := range append(tc.want, "Usage: fftctl x [options] ARG\n\n  Does x.\n  And more.\n", "X Options:",
			"-json\n    Print JSON.", "-round=<duration>\n    Round length. Defaults to \"10s\".", "-dir=<folder>\n    State folder.\n") {
			if !strings.Contains(help, w) {
				t.Errorf("options %b: help lacks %q:\n%s", tc.opts, w, help)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(help, n) {
				t.Errorf("options %b: help has %q:\n%s", tc.opts, n, help)
			}
		}
		for _, line := range strings.Split(help, "\n") {
			if len(line) > 80 {
				t.Errorf("help line longer than 80 columns: %q", line)
			}
		}
	}
}

func TestWrap(t *testing.T) {
	text := "one two three four five six seven eight nine ten eleven twelve"
	for _, width := range []int{10, 20, 80} {
		got := wrap(text, "  ", width)
		for _, line := range strings.Split(got, "\n") {
			if len(line) > width && len(strings.Fields(line)) > 1 {
				t.Errorf("width %d: line %q is too long", width, line)
			}
			if !strings.HasPrefix(line, "  ") {
				t.Errorf("width %d: line %q lacks the indent", width, line)
			}
		}
		if strings.Join(strings.Fields(got), " ") != text {
			t.Errorf("width %d: words changed: %q", width, got)
		}
	}
}

func TestJobID(t *testing.T) {
	for _, tc := range []struct {
		arg, flagNS, envNS, want, err string
	}{
		{arg: "train", want: "default/train"},
		{arg: "team/train", want: "team/train"},
		{arg: "train", envNS: "team", want: "team/train"},
		{arg: "train", flagNS: "ops", envNS: "team", want: "ops/train"},
		{arg: "batch/periodic-1700000000", flagNS: "ops", want: "ops/batch/periodic-1700000000"},
		{arg: "", err: "expected a job ID"},
		{arg: "/train", err: "expected a job ID"},
		{arg: "team/", err: "expected a job ID"},
	} {
		t.Setenv("NOMAD_NAMESPACE", tc.envNS)
		c := conn{namespace: tc.flagNS}
		got, err := c.jobID(tc.arg)
		if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("jobID(%q) with -namespace %q, NOMAD_NAMESPACE %q = %q, %v; want %q, %q", tc.arg, tc.flagNS, tc.envNS, got, err, tc.want, tc.err)
		}
	}
}
