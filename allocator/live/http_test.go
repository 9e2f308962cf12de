package live

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
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
	// The metrics themselves are package telemetry's (its tests scrape them); Handler only
	// routes to the handler it is given.
	if code, _ := get("/v1/metrics"); code != http.StatusNotFound {
		t.Errorf("/v1/metrics without WithMetrics: %d, want 404", code)
	}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("fft_test 1\n")) })
	rr := httptest.NewRecorder()
	Handler(s, WithMetrics(metrics)).ServeHTTP(rr, httptest.NewRequest("GET", "/v1/metrics", nil))
	if rr.Code != 200 || rr.Body.String() != "fft_test 1\n" {
		t.Errorf("/v1/metrics with WithMetrics: %d %q", rr.Code, rr.Body.String())
	}
	fc.FailObserve = errors.New("down")
	_, _ = s.RunRound(context.Background())
	if code, body := get("/v1/health"); code != 503 || !strings.Contains(body, "down") {
		t.Errorf("health after a failed round: %d %s", code, body)
	}
	// A replica that cannot take the leader lock is unhealthy before any round fails, and
	// says so first; once it can again, the round's health shows.
	for _, step := range []struct {
		lockErr error
		code    int
		body    string
	}{
		{errors.New("Permission denied: grant the session block"), 503, `"cannot lead"`},
		{nil, 503, `"failing"`},
	} {
		s.SetLockError(step.lockErr)
		if code, body := get("/v1/health"); code != step.code || !strings.Contains(body, step.body) {
			t.Errorf("health with lock error %v: %d %s, want %d with %s", step.lockErr, code, body, step.code, step.body)
		}
	}
	fc.FailObserve = nil
	if _, err := s.RunRound(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, body := get("/v1/health"); code != 200 {
		t.Errorf("health after the lock and a round recovered: %d %s", code, body)
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
			wantCode: 400, wantBody: `is not a JSON progress report`},
		{name: "a driver's report, on a store that keeps the work done only", method: "PUT", path: "/v1/progress/default/train",
			body:     `{"done": 7, "throughput_per_second": 2.5, "gpu_model": "V100", "gpus": 2}`,
			wantCode: 200, wantStored: map[string]float64{"default/train": 7}},
		{name: "two objects", method: "PUT", path: "/v1/progress/default/train", body: `{"done": 1} {"done": 2}`,
			wantCode: 400, wantBody: `text after the object`},
		{name: "too big", method: "PUT", path: "/v1/progress/default/train", body: strings.Repeat(" ", maxProgressBody+1) + "1",
			wantCode: 413, wantBody: "body over 1024 bytes"},
		{name: "a dispatched job, its slash percent-encoded", method: "PUT", path: "/v1/progress/default/parent%2Fdispatch-1700000000-abcd1234", body: "1",
			wantCode: 200, wantBody: `"job": "default/parent/dispatch-1700000000-abcd1234"`, wantStored: map[string]float64{"default/parent/dispatch-1700000000-abcd1234": 1}},
		{name: "a periodic job, its slash percent-encoded", method: "PUT", path: "/v1/progress/default/nightly%2fperiodic-1700000000", body: "2",
			wantCode: 200, wantStored: map[string]float64{"default/nightly/periodic-1700000000": 2}},
		{name: "a job ID's slash sent as it is", method: "PUT", path: "/v1/progress/default/parent/dispatch-1", body: "1",
			wantCode: 400, wantBody: `percent-encode the job ID's slashes (%2F): PUT /v1/progress/default/parent%2Fdispatch-1`},
		{name: "an escaped dot-dot below a parent", method: "PUT", path: "/v1/progress/default/parent%2F%2E%2E", body: "4",
			wantCode: 200, wantStored: map[string]float64{"default/parent/..": 4}},
		{name: "dot-dot namespace (a Consul path step)", method: "PUT", path: "/v1/progress/%2E%2E/ledger", body: "1",
			wantCode: 400, wantBody: `namespace \"..\"`},
		{name: "dot-dot job", method: "PUT", path: "/v1/progress/default/%2E%2E", body: "1",
			wantCode: 400, wantBody: `job ID \"..\" is a path step`},
		{name: "namespace Nomad refuses", method: "PUT", path: "/v1/progress/a_b/train", body: "1",
			wantCode: 400, wantBody: "as Nomad names a namespace"},
		{name: "space in the job", method: "PUT", path: "/v1/progress/default/a%20b", body: "1",
			wantCode: 400, wantBody: "contains a space"},
		{name: "dots inside a job ID", method: "PUT", path: "/v1/progress/default/train.v2", body: "3",
			wantCode: 200, wantStored: map[string]float64{"default/train.v2": 3}},
		{name: "GET is not allowed", method: "GET", path: "/v1/progress/default/train", wantCode: 405},
		{name: "no job", method: "PUT", path: "/v1/progress/default", body: "1", wantCode: 404},
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

// fakeVerifier knows a fixed set of tokens; an unknown one is refused,
// and "down" stands for Nomad being unreachable.
type fakeVerifier map[string]TaskIdentity

func (f fakeVerifier) VerifyTask(_ context.Context, token string) (TaskIdentity, error) {
	if token == "down" {
		return TaskIdentity{}, errors.New("dial tcp 127.0.0.1:4646: connection refused")
	}
	id, ok := f[token]
	if !ok {
		return TaskIdentity{}, ErrTokenRefused
	}
	return id, nil
}

// TestProgressAuthenticated: with a verifier, a report is taken only with
// a token of one of the job's own tasks, and reports stay sane.
func TestProgressAuthenticated(t *testing.T) {
	v := fakeVerifier{
		"tok-a1": {Namespace: "default", JobID: "a", AllocID: "alloc-1", Task: "train"},
		"tok-a2": {Namespace: "default", JobID: "a", AllocID: "alloc-2", Task: "train"},
		"tok-b":  {Namespace: "default", JobID: "b", AllocID: "alloc-3", Task: "train"},
		"tok-ml": {Namespace: "ml", JobID: "a", AllocID: "alloc-4", Task: "train"},
	}
	// Steps run in order against one handler: the later ones depend on
	// the reports the earlier ones stored.
	steps := []struct {
		name, job, header, token, body string
		wantCode                       int
		wantBody                       string
	}{
		{"no token", "a", "", "", "1", 401, "no token"},
		{"unknown token", "a", "X-Nomad-Token", "forged", "1", 403, "token refused"},
		{"Nomad down", "a", "X-Nomad-Token", "down", "1", 503, "retry"},
		{"job b's task for job a", "a", "X-Nomad-Token", "tok-b", "1", 403, `(allocation alloc-3) cannot report for job`},
		{"same job name, other namespace", "a", "X-Nomad-Token", "tok-ml", "1", 403, "a job reports only for itself"},
		{"own task", "a", "X-Nomad-Token", "tok-a1", "5", 200, `"done": 5`},
		{"own task, bearer", "a", "Authorization", "Bearer tok-a1", "6", 200, `"done": 6`},
		{"backwards in one allocation", "a", "X-Nomad-Token", "tok-a1", "4", 409, "below this allocation's last report 6"},
		{"new allocation resumes from a checkpoint", "a", "X-Nomad-Token", "tok-a2", "4", 200, `"done": 4`},
		{"beyond the job's work", "a", "X-Nomad-Token", "tok-a2", "10.5", 400, "beyond the job's fft.work = 10"},
		{"NaN", "a", "X-Nomad-Token", "tok-a2", "NaN", 400, "not a finite number"},
		{"negative", "a", "X-Nomad-Token", "tok-a2", "-1", 400, "not a finite number >= 0"},
		{"all the work", "a", "X-Nomad-Token", "tok-a2", "10", 200, `"done": 10`},
	}
	rs := loop.NewMemStore(false)
	// One round puts job a (10 work units) in the ledger the endpoint checks reports against.
	h0 := &loop.Harness{Models: []allocator.Model{{Name: a100, GPUs: 1}},
		Jobs: map[string]*loop.Job{"default/a": loop.Ptr(loop.NewJob("a").Work(10).TP(a100, 1).Obj())}}
	s := New(loop.New(h0, h0, rs))
	if _, err := s.RunRound(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := Handler(s, WithTaskVerifier(v))
	for _, st := range steps {
		req := httptest.NewRequest("PUT", "/v1/progress/default/"+st.job, strings.NewReader(st.body))
		if st.header != "" {
			req.Header.Set(st.header, st.token)
		}
		rr := httptest.NewRecorder()
		h.ServeHTTP(rr, req)
		if rr.Code != st.wantCode || !strings.Contains(rr.Body.String(), st.wantBody) {
			t.Errorf("%s: %d %s, want %d containing %q", st.name, rr.Code, rr.Body.String(), st.wantCode, st.wantBody)
		}
	}
	got, _ := rs.Progress(context.Background())
	if diff := cmp.Diff(map[string]float64{"default/a": 10}, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("stored reports (-want,+got):\n%s", diff)
	}
}

// FuzzParseProgress: any body is a finite number >= 0 or an error that
// says what the body should be.
func FuzzParseProgress(f *testing.F) {
	for _, s := range []string{"42", " 12.5\n", `{"done": 0}`, "", "ten", "-1", "NaN", "Inf", "1e400", `{"dnoe": 3}`, `{}`, `{"done": "3"}`,
		`{"done": 1} {"done": 2}`, `{"done": null}`, "0x1p-2", "1_000"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rp, err := parseProgress(body)
		if err != nil {
			if !strings.Contains(err.Error(), progressUsage) {
				t.Fatalf("error %q does not say what the body should be", err)
			}
			return
		}
		if done := rp.Done; math.IsNaN(done) || math.IsInf(done, 0) || done < 0 {
			t.Fatalf("accepted %q as %g", body, done)
		}
	})
}

// FuzzHandler sends any method, path, token and body to the API: it never
// panics, answers with one of the documented codes, JSON for every error,
// and stores a report only when it answers 200.
func FuzzHandler(f *testing.F) {
	f.Add("PUT", "/v1/progress/default/a", "tok-a", "42")
	f.Add("POST", "/v1/progress/default/a", "", `{"done": 1}`)
	f.Add("GET", "/v1/status", "", "")
	f.Add("GET", "/v1/health", "", "")
	f.Add("GET", "/v1/metrics", "", "")
	f.Add("DELETE", "/v1/progress/default/a", "tok-a", "")
	f.Add("PUT", "/v1/progress/default/a%2Fb", "tok-a", "1")
	f.Add("PUT", "/v1/progress//a", "tok-a", "1")
	f.Add("PUT", "/v1/progress/default/b", "tok-a", "1")
	f.Add("PUT", "/v1/../v1/progress/default/a", "tok-a", "1")
	documented := map[int]bool{200: true, 301: true, 307: true, 400: true, 401: true, 403: true, 404: true, 405: true, 409: true, 413: true, 429: true, 503: true}
	f.Fuzz(func(t *testing.T, method, path, token, body string) {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \t\r\n#?") || method == "" || strings.ContainsAny(method, " \t\r\n/") {
			return // not a request line a client can send
		}
		rs := loop.NewMemStore(false)
		s := New(loop.New(&loop.Harness{}, &loop.Harness{}, rs))
		h := Handler(s, WithTaskVerifier(fakeVerifier{"tok-a": {Namespace: "default", JobID: "a", AllocID: "x"}}))
		req, err := http.NewRequest(method, "http://allocator"+path, strings.NewReader(body))
		if err != nil {
			return
		}
		if token != "" && !strings.ContainsAny(token, "\r\n") {
			req.Header.Set("X-Nomad-Token", token)
		}
		rr := httptest.NewRecorder()
		h.ServeHTTP(rr, req)
		if !documented[rr.Code] {
			t.Fatalf("%s %s: undocumented code %d: %s", method, path, rr.Code, rr.Body.String())
		}
		if rr.Code >= 400 && rr.Code != 404 && rr.Code != 405 {
			var e struct{ Error string }
			if err := json.Unmarshal(rr.Body.Bytes(), &e); err != nil || e.Error == "" {
				t.Fatalf("%s %s: %d without a JSON error: %q", method, path, rr.Code, rr.Body.String())
			}
		}
		reports, _ := rs.Progress(context.Background())
		if (len(reports) > 0) != (rr.Code == 200 && strings.Contains(path, "progress")) {
			t.Fatalf("%s %s: code %d but stored %v", method, path, rr.Code, reports)
		}
		for id := range reports {
			if id != "default/a" {
				t.Fatalf("%s %s with job a's token stored a report for %q", method, path, id)
			}
		}
	})
}
