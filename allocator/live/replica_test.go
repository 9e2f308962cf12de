package live

import (
	"context"
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
