package live

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

const a100 = "NVIDIA A100-SXM4-40GB"

func TestHandler(t *testing.T) {
	fc := &loop.Harness{Models: []allocator.Model{{Name: a100, GPUs: 1}},
		Jobs: map[string]*loop.Job{"default/a": loop.Ptr(loop.NewJob("a").TP(a100, 1).Obj())}}
	s := New(loop.New(fc, fc, loop.NewMemStore(false)))
	h := Handler(s)
	get := func(path string) (int, string) {
		rr := httptest.NewRecorder()
		h.ServeHTTP(rr, httptest.NewRequest("GET", path, nil))
		return rr.Code, rr.Body.String()
	}
	if code, body := get("/v1/health"); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Errorf("health before any round: %d %s", code, body)
	}
	if _, err := s.RunRound(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, body := get("/v1/status"); code != 200 || !strings.Contains(body, `"next_round": 1`) || !strings.Contains(body, `"default/a"`) {
		t.Errorf("status: %d %s", code, body)
	}
	code, body := get("/v1/metrics")
	for _, want := range []string{"fft_rounds_total 1", `fft_jobs{state="running"} 1`, `fft_rho{job="default/a"}`, "fft_solve_seconds",
		`fft_applied_changes_total{action="start"} 1`, `fft_applied_changes_total{action="park"} 0`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	fc.FailObserve = errors.New("down")
	_, _ = s.RunRound(context.Background())
	if code, body := get("/v1/health"); code != 503 || !strings.Contains(body, "down") {
		t.Errorf("health after a failed round: %d %s", code, body)
	}
}

// noReports is a store that takes no progress reports.
type noReports struct{ loop.Store }

func TestProgressEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name, method, path, body string
		storeErr                 error
		noReporter               bool
		wantCode                 int
		// wantBody must appear in the answer; wantStored is what the store holds after.
		wantBody   string
		wantStored map[string]float64
	}{
		{name: "number", method: "PUT", path: "/v1/progress/default/train", body: "42",
			wantCode: 200, wantBody: `"job": "default/train"`, wantStored: map[string]float64{"default/train": 42}},
		{name: "number with newline (curl --data-binary)", method: "PUT", path: "/v1/progress/ml/train", body: " 12.5\n",
			wantCode: 200, wantBody: `"done": 12.5`, wantStored: map[string]float64{"ml/train": 12.5}},
		{name: "JSON, POST", method: "POST", path: "/v1/progress/default/train", body: `{"done": 0}`,
			wantCode: 200, wantStored: map[string]float64{"default/train": 0}},
		{name: "empty body", method: "PUT", path: "/v1/progress/default/train",
			wantCode: 400, wantBody: `empty body: the body is the work units done, a number >= 0 such as 42 or JSON {\"done\": 42}`},
		{name: "text", method: "PUT", path: "/v1/progress/default/train", body: "ten",
			wantCode: 400, wantBody: `body \"ten\" is not a number: the body is the work units done`},
		{name: "negative", method: "PUT", path: "/v1/progress/default/train", body: "-1",
			wantCode: 400, wantBody: `done = -1 is not a finite number >= 0: the body is`},
		{name: "NaN", method: "PUT", path: "/v1/progress/default/train", body: "NaN",
			wantCode: 400, wantBody: `done = NaN`},
		{name: "JSON typo", method: "PUT", path: "/v1/progress/default/train", body: `{"dnoe": 3}`,
			wantCode: 400, wantBody: `unknown field \"dnoe\"`},
		{name: "JSON without done", method: "PUT", path: "/v1/progress/default/train", body: `{}`,
			wantCode: 400, wantBody: `has no field \"done\"`},
		{name: "JSON string", method: "PUT", path: "/v1/progress/default/train", body: `{"done": "3"}`,
			wantCode: 400, wantBody: `not a JSON object with the one field \"done\"`},
		{name: "two objects", method: "PUT", path: "/v1/progress/default/train", body: `{"done": 1} {"done": 2}`,
			wantCode: 400, wantBody: `text after the object`},
		{name: "too big", method: "PUT", path: "/v1/progress/default/train", body: strings.Repeat(" ", maxProgressBody+1) + "1",
			wantCode: 413, wantBody: "body over 1024 bytes"},
		{name: "escaped slash in the job", method: "PUT", path: "/v1/progress/default/a%2Fb", body: "1",
			wantCode: 400, wantBody: `path job \"a/b\": expected one non-empty path segment`},
		{name: "GET is not allowed", method: "GET", path: "/v1/progress/default/train", wantCode: 405},
		{name: "no job", method: "PUT", path: "/v1/progress/default", body: "1", wantCode: 404},
		{name: "too many segments", method: "PUT", path: "/v1/progress/default/a/b", body: "1", wantCode: 404},
		{name: "store down", method: "PUT", path: "/v1/progress/default/train", body: "1", storeErr: errors.New("connection refused"),
			wantCode: 503, wantBody: "storing the report failed, retry: connection refused"},
		{name: "store takes no reports", method: "PUT", path: "/v1/progress/default/train", body: "1", noReporter: true,
			wantCode: 501, wantBody: "takes no progress reports"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := loop.NewMemStore(false)
			rs.Err = tc.storeErr
			var store loop.Store = rs
			if tc.noReporter {
				store = noReports{rs}
			}
			// The service never leads here: a standby takes reports too.
			s := New(loop.New(&loop.Harness{}, &loop.Harness{}, store))
			rr := httptest.NewRecorder()
			Handler(s).ServeHTTP(rr, httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body)))
			if rr.Code != tc.wantCode || !strings.Contains(rr.Body.String(), tc.wantBody) {
				t.Errorf("%s %s %q: %d %s, want %d containing %q", tc.method, tc.path, tc.body, rr.Code, rr.Body.String(), tc.wantCode, tc.wantBody)
			}
			if tc.wantCode == 405 && !strings.Contains(rr.Header().Get("Allow"), "PUT") {
				t.Errorf("405 without PUT in Allow: %q", rr.Header().Get("Allow"))
			}
			got, _ := rs.Progress(context.Background())
			if diff := cmp.Diff(tc.wantStored, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("stored reports (-want,+got):\n%s", diff)
			}
		})
	}
}
