package live

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/placement"
)

// fakeReaders: "tok-x" reads namespace x, "mgmt" everything, "down" is Nomad unreachable.
type fakeReaders struct{}

func (fakeReaders) ReadableNamespaces(_ context.Context, token string) (bool, []string, error) {
	switch {
	case token == "mgmt":
		return true, nil, nil
	case token == "down":
		return false, nil, errors.New("connection refused")
	case strings.HasPrefix(token, "tok-"):
		return false, []string{strings.TrimPrefix(token, "tok-")}, nil
	}
	return false, nil, ErrTokenRefused
}

// TestStatusFollowsNamespaces: with a NamespaceReader, /v1/status and /ui show a token only
// the jobs of the namespaces it may read, and nothing without a token; /v1/health stays
// open. Without one (clusters without ACLs) every job shows, as before; this was the only
// behaviour, even under -progress-auth=nomad.
func TestStatusFollowsNamespaces(t *testing.T) {
	h0 := &loop.Harness{Models: []allocator.Model{{Name: a100, GPUs: 4}}}
	for _, id := range []string{"x/a", "x/b", "y/c"} {
		ns, name, _ := strings.Cut(id, "/")
		j := loop.NewJob(name).TP(a100, 1).Obj()
		j.ID, j.Namespace = id, ns
		h0.Set(j)
	}
	s := New(loop.New(h0, h0, loop.NewMemStore(false)))
	if _, err := s.RunRound(context.Background()); err != nil {
		t.Fatal(err)
	}
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := s.Status()
		if sc, ok := ScopeFrom(r.Context()); ok {
			st = sc.Filter(st)
		}
		for id := range st.Jobs {
			_, _ = w.Write([]byte(id + " "))
		}
	})
	get := func(h http.Handler, path, token string) (int, string) {
		req := httptest.NewRequest("GET", path, nil)
		if token != "" {
			req.Header.Set("X-Nomad-Token", token)
		}
		rr := httptest.NewRecorder()
		h.ServeHTTP(rr, req)
		return rr.Code, rr.Body.String()
	}
	jobsIn := func(body string) string {
		var st Status
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			return "undecodable: " + body
		}
		var ids []string
		for id := range st.Jobs {
			ids = append(ids, id)
		}
		if st.Last != nil {
			for _, l := range st.Last.Jobs {
				ids = append(ids, "line:"+l.ID)
			}
			for id := range st.Last.Assignment {
				ids = append(ids, "assigned:"+id)
			}
		}
		sort.Strings(ids)
		return strings.Join(ids, ",")
	}
	open := Handler(s, WithUI(ui))
	if code, body := get(open, "/v1/status", ""); code != 200 || jobsIn(body) != "assigned:x/a,assigned:x/b,assigned:y/c,line:x/a,line:x/b,line:y/c,x/a,x/b,y/c" {
		t.Errorf("without a NamespaceReader: %d %s", code, jobsIn(body))
	}
	h := Handler(s, WithUI(ui), WithNamespaceReader(fakeReaders{}))
	for _, tc := range []struct {
		path, token string
		code        int
		want        string
	}{
		{"/v1/health", "", 200, `"ok"`},
		{"/v1/status", "", 401, "no token"},
		{"/ui", "", 401, "no token"},
		{"/v1/status", "forged", 403, "token refused"},
		{"/v1/status", "down", 503, "retry"},
		{"/v1/status", "tok-x", 200, "assigned:x/a,assigned:x/b,line:x/a,line:x/b,x/a,x/b"},
		{"/v1/status", "tok-y", 200, "assigned:y/c,line:y/c,y/c"},
		{"/v1/status", "tok-z", 200, ""},
		{"/v1/status", "mgmt", 200, "assigned:x/a,assigned:x/b,assigned:y/c,line:x/a,line:x/b,line:y/c,x/a,x/b,y/c"},
		{"/ui", "tok-y", 200, "y/c "},
	} {
		code, body := get(h, tc.path, tc.token)
		got := body
		if tc.path == "/v1/status" && code == 200 {
			got = jobsIn(body)
		}
		if code != tc.code || (tc.code == 200 && tc.path == "/v1/status" && got != tc.want) || (tc.code != 200 || tc.path != "/v1/status") && !strings.Contains(got, tc.want) {
			t.Errorf("GET %s with %q: %d %s, want %d with %q", tc.path, tc.token, code, got, tc.code, tc.want)
		}
	}
}

// TestFilterHostsAndMoves: a scope sees each host's GPUs, but only its own jobs on them and
// only moves between its own jobs.
func TestFilterHostsAndMoves(t *testing.T) {
	st := Status{Last: &loop.RoundRecord{
		Hosts: []placement.Host{{ID: "n1", Model: a100, GPUs: 4, Jobs: map[string]int{"x/a": 1, "y/c": 2}}},
		Moves: []placement.Move{{Job: "x/a", For: "x/b"}, {Job: "y/c", For: "x/b"}},
	}}
	got := ReadScope{Namespaces: map[string]bool{"x": true}}.Filter(st)
	if h := got.Last.Hosts; len(h) != 1 || h[0].GPUs != 4 || len(h[0].Jobs) != 1 || h[0].Jobs["x/a"] != 1 {
		t.Errorf("hosts %+v, want n1 with x/a only", h)
	}
	if m := got.Last.Moves; len(m) != 1 || m[0].Job != "x/a" {
		t.Errorf("moves %+v, want x/a's only", m)
	}
	if len(st.Last.Hosts[0].Jobs) != 2 {
		t.Error("Filter changed the status it was given")
	}
}
