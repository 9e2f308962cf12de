package live

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// TestMonotonicAcrossReplicas: "never backwards within one allocation" is checked against
// the stored report, so a report sent through another replica (a standby, or the leader
// after a failover) cannot go below it either.
func TestMonotonicAcrossReplicas(t *testing.T) {
	v := fakeVerifier{
		"tok-a1": {Namespace: "default", JobID: "a", AllocID: "alloc-1", Task: "train"},
		"tok-a2": {Namespace: "default", JobID: "a", AllocID: "alloc-2", Task: "train"},
	}
	rs := loop.NewMemStore(false)
	replica := func() *Service { return New(loop.New(&loop.Harness{}, &loop.Harness{}, rs)) }
	h1, h2 := Handler(replica(), WithTaskVerifier(v)), Handler(replica(), WithTaskVerifier(v))
	for _, st := range []struct {
		name     string
		replica  int
		token    string
		body     string
		wantCode int
		wantBody string
	}{
		{name: "first report, replica 1", replica: 1, token: "tok-a1", body: "6", wantCode: 200},
		{name: "lower, same allocation, replica 2", replica: 2, token: "tok-a1", body: "4", wantCode: 409, wantBody: "below this allocation's last report 6"},
		{name: "higher, replica 2", replica: 2, token: "tok-a1", body: `{"done": 7, "gpu_model": "V100"}`, wantCode: 200},
		{name: "lower again, replica 1", replica: 1, token: "tok-a1", body: "6.5", wantCode: 409, wantBody: "last report 7"},
		{name: "a new allocation resumes lower, replica 1", replica: 1, token: "tok-a2", body: "3", wantCode: 200},
		{name: "the old allocation's late report, replica 2", replica: 2, token: "tok-a1", body: "8", wantCode: 200},
	} {
		h := h1
		if st.replica == 2 {
			h = h2
		}
		req := httptest.NewRequest("PUT", "/v1/progress/default/a", strings.NewReader(st.body))
		req.Header.Set("X-Nomad-Token", st.token)
		rr := httptest.NewRecorder()
		h.ServeHTTP(rr, req)
		if rr.Code != st.wantCode || !strings.Contains(rr.Body.String(), st.wantBody) {
			t.Errorf("%s: %d %s, want %d containing %q", st.name, rr.Code, rr.Body.String(), st.wantCode, st.wantBody)
		}
	}
	got, _ := rs.Reports(context.Background())
	if r := got["default/a"]; r.Done != 8 || r.Alloc != "alloc-1" {
		t.Errorf("stored report %+v, want done 8 from alloc-1", r)
	}
}

// fakeIndexer: allocations "alloc-1" and "alloc-2" are of job a created at index 100 and
// 200, "alloc-3" of job b; Nomad has no "alloc-gone" and cannot be reached for any other.
type fakeIndexer struct{ calls int }

func (f *fakeIndexer) AllocJob(_ context.Context, ns, alloc string) (AllocJob, error) {
	f.calls++
	switch alloc {
	case "alloc-1":
		return AllocJob{JobID: "a", CreateIndex: 100}, nil
	case "alloc-2":
		return AllocJob{JobID: "a", CreateIndex: 200}, nil
	case "alloc-3":
		return AllocJob{JobID: "b", CreateIndex: 300}, nil
	case "alloc-gone":
		return AllocJob{}, ErrAllocUnknown
	}
	return AllocJob{}, errors.New("dial tcp 127.0.0.1:4646: connection refused")
}

// TestReportTiedToItsJob: a verified report is stored with its allocation's job create
// index (looked up once per allocation), whatever the client claims.
func TestReportTiedToItsJob(t *testing.T) {
	v := fakeVerifier{"tok-a1": {Namespace: "default", JobID: "a", AllocID: "alloc-1"}, "tok-a9": {Namespace: "default", JobID: "a", AllocID: "alloc-9"}}
	rs := loop.NewMemStore(false)
	x := &fakeIndexer{}
	h := Handler(New(loop.New(&loop.Harness{}, &loop.Harness{}, rs)), WithTaskVerifier(v), WithAllocIndexer(x))
	for i, body := range []string{"1", `{"done": 2, "job_create_index": 999, "alloc": "forged"}`} {
		req := httptest.NewRequest("PUT", "/v1/progress/default/a", strings.NewReader(body))
		req.Header.Set("X-Nomad-Token", "tok-a1")
		rr := httptest.NewRecorder()
		h.ServeHTTP(rr, req)
		if rr.Code != 200 {
			t.Fatalf("report %d: %d %s", i, rr.Code, rr.Body.String())
		}
	}
	got, _ := rs.Reports(context.Background())
	if r := got["default/a"]; r.Done != 2 || r.Alloc != "alloc-1" || r.JobCreateIndex != 100 || x.calls != 1 {
		t.Errorf("stored %+v after %d lookups, want done 2 from alloc-1 of the job created at 100, one lookup", r, x.calls)
	}
	req := httptest.NewRequest("PUT", "/v1/progress/default/a", strings.NewReader("3"))
	req.Header.Set("X-Nomad-Token", "tok-a9")
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, req)
	if rr.Code != 503 || !strings.Contains(rr.Body.String(), "retry") {
		t.Errorf("an allocation Nomad cannot find: %d %s, want 503", rr.Code, rr.Body.String())
	}
}
