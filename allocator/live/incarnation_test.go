package live

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// TestIncarnationEndpoint: GET /v1/incarnation/<ns>/<job> answers the create index of the
// job the asking allocation belongs to (the driver keys checkpoints by it), looked up with
// the allocator's own token; the allocation is the verified token's, or without a verifier
// the ?alloc= the driver sends, and it must be one of that job's.
func TestIncarnationEndpoint(t *testing.T) {
	v := fakeVerifier{
		"tok-a1": {Namespace: "default", JobID: "a", AllocID: "alloc-1", Task: "train"},
		"tok-b":  {Namespace: "default", JobID: "b", AllocID: "alloc-3", Task: "train"},
	}
	s := func() *Service { return New(loop.New(&loop.Harness{}, &loop.Harness{}, loop.NewMemStore(false))) }
	verified := Handler(s(), WithTaskVerifier(v), WithAllocIndexer(&fakeIndexer{}))
	open := Handler(s(), WithAllocIndexer(&fakeIndexer{}))
	noIndexer := Handler(s())
	for _, tc := range []struct {
		name     string
		h        http.Handler
		path     string
		token    string
		wantCode int
		wantBody string
	}{
		{"own token", verified, "/v1/incarnation/default/a", "tok-a1", 200, `"create_index": 100`},
		{"own token, the query's alloc is not believed", verified, "/v1/incarnation/default/a?alloc=alloc-2", "tok-a1", 200, `"create_index": 100`},
		{"no token", verified, "/v1/incarnation/default/a?alloc=alloc-1", "", 401, "no token"},
		{"another job's token", verified, "/v1/incarnation/default/a", "tok-b", 403, "a job reports only for itself"},
		{"without auth, the alloc sent", open, "/v1/incarnation/default/a?alloc=alloc-2", "", 200, `"create_index": 200`},
		{"without auth, no alloc", open, "/v1/incarnation/default/a", "", 400, "?alloc="},
		{"without auth, another job's alloc", open, "/v1/incarnation/default/a?alloc=alloc-3", "", 403, `allocation alloc-3 is of job \"default/b\"`},
		{"without auth, an allocation Nomad no longer has", open, "/v1/incarnation/default/a?alloc=alloc-gone", "", 403, "unknown to Nomad"},
		{"without auth, Nomad down", open, "/v1/incarnation/default/a?alloc=alloc-9", "", 503, "retry"},
		{"bad job ID", open, "/v1/incarnation/default/%2E%2E?alloc=alloc-1", "", 400, "path step"},
		{"no Nomad to ask", noIndexer, "/v1/incarnation/default/a?alloc=alloc-1", "", 501, "cannot look up"},
	} {
		req := httptest.NewRequest("GET", tc.path, nil)
		if tc.token != "" {
			req.Header.Set("X-Nomad-Token", tc.token)
		}
		rr := httptest.NewRecorder()
		tc.h.ServeHTTP(rr, req)
		if rr.Code != tc.wantCode || !strings.Contains(rr.Body.String(), tc.wantBody) {
			t.Errorf("%s: %d %s, want %d containing %q", tc.name, rr.Code, rr.Body.String(), tc.wantCode, tc.wantBody)
		}
		if rr.Code == 200 {
			var got struct {
				Job         string `json:"job"`
				Alloc       string `json:"alloc"`
				CreateIndex uint64 `json:"create_index"`
			}
			if err := json.Unmarshal(rr.Body.Bytes(), &got); err != nil || got.Job != "default/a" || got.Alloc == "" {
				t.Errorf("%s: answer %s (%v): want the job and the allocation asked for", tc.name, rr.Body.String(), err)
			}
		}
	}
}

// TestUnverifiedReportTiedToItsAllocation: without a verifier (-progress-auth=none) a report
// that names its allocation (?alloc=, which the driver sends) is stored with that
// allocation's job create index, looked up with the allocator's own token, so a purged
// job's late report cannot count for the job registered again under its ID. An allocation
// of another job, or one Nomad no longer has, is refused; a report naming none is taken as
// before (curl, fftctl report).
func TestUnverifiedReportTiedToItsAllocation(t *testing.T) {
	rs := loop.NewMemStore(false)
	h := Handler(New(loop.New(&loop.Harness{}, &loop.Harness{}, rs)), WithAllocIndexer(&fakeIndexer{}))
	for _, st := range []struct {
		name, path, body string
		wantCode         int
		wantBody         string
	}{
		{"the old job's allocation", "/v1/progress/default/a?alloc=alloc-1", "5", 200, ""},
		{"another job's allocation", "/v1/progress/default/a?alloc=alloc-3", "6", 403, `allocation alloc-3 is of job \"default/b\"`},
		{"an allocation Nomad no longer has", "/v1/progress/default/a?alloc=alloc-gone", "6", 403, "unknown to Nomad"},
	} {
		rr := httptest.NewRecorder()
		h.ServeHTTP(rr, httptest.NewRequest("PUT", st.path, strings.NewReader(st.body)))
		if rr.Code != st.wantCode || !strings.Contains(rr.Body.String(), st.wantBody) {
			t.Errorf("%s: %d %s, want %d containing %q", st.name, rr.Code, rr.Body.String(), st.wantCode, st.wantBody)
		}
	}
	got, _ := rs.Reports(context.Background())
	if r := got["default/a"]; r.Done != 5 || r.Alloc != "alloc-1" || r.JobCreateIndex != 100 {
		t.Errorf("stored %+v, want done 5 from alloc-1 of the job created at 100", r)
	}
}
