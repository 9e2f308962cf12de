package command

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/cli"
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
		{name: "-job of a dispatched job", flag: "default/parent/dispatch-1700000000-abcd1234", want: "default/parent/dispatch-1700000000-abcd1234"},
		{name: "a periodic job from the task", ns: "team", job: "nightly/periodic-1700000000", want: "team/nightly/periodic-1700000000"},
		{name: "-job that is a path step", flag: "default/..", err: "is a path step"},
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

// TestReportHTTP: with -allocator-addr, fftctl report sends the task's
// NOMAD_TOKEN to the progress endpoint and prints the allocator's refusal.
func TestReportHTTP(t *testing.T) {
	var gotPath, gotToken, gotBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotPath, gotToken, gotBody = r.URL.EscapedPath()+"?"+r.URL.RawQuery, r.Header.Get("X-Nomad-Token"), string(b)
		if gotToken != "tok" {
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"error": "token refused"}`))
			return
		}
		_, _ = w.Write([]byte(`{"job": "team/train", "done": 42}`))
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name, job, token string
		code             int
		stderr, wantPath string
	}{
		{"own token", "train", "tok", 0, "", "/v1/progress/team/train?alloc=alloc-1"},
		{"wrong token", "train", "other", 1, "HTTP 403: token refused", "/v1/progress/team/train?alloc=alloc-1"},
		// A dispatched job's slash is percent-encoded: its ID is one path step.
		{"dispatched job", "parent/dispatch-1700000000-abcd1234", "tok", 0, "", "/v1/progress/team/parent%2Fdispatch-1700000000-abcd1234?alloc=alloc-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"NOMAD_NAMESPACE": "team", "NOMAD_JOB_ID": tc.job, "NOMAD_TOKEN": tc.token, "NOMAD_ALLOC_ID": "alloc-1"}
			ui := cli.NewMockUi()
			c := &ReportCommand{Meta: Meta{Ui: ui}, getenv: func(k string) string { return env[k] }}
			if code := c.Run([]string{"-allocator-addr", srv.URL, "42"}); code != tc.code || !strings.Contains(ui.ErrorWriter.String(), tc.stderr) {
				t.Fatalf("exit %d, stderr %q; want %d with %q", code, ui.ErrorWriter.String(), tc.code, tc.stderr)
			}
			if gotPath != tc.wantPath || gotToken != tc.token || gotBody != "42" {
				t.Fatalf("sent %s with token %q and body %q", gotPath, gotToken, gotBody)
			}
		})
	}
}
