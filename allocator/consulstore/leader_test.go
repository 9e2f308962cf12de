package consulstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/nomad-fft/nomad-fft/allocator/live"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// fakeLockConsul answers the calls of Consul's lock API: with denied set it refuses the token
// as Consul does a policy without the session block, else the leader key is held by another
// replica's session.
type fakeLockConsul struct{ denied atomic.Bool }

func (f *fakeLockConsul) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.denied.Load() && (strings.HasPrefix(r.URL.Path, "/v1/session/create") || strings.HasPrefix(r.URL.Path, "/v1/kv/")) {
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `Permission denied: token with AccessorID 'f00d' lacks permission 'session:write' on "node-1"`)
		return
	}
	switch {
	case strings.HasPrefix(r.URL.Path, "/v1/session/create"):
		_ = json.NewEncoder(w).Encode(map[string]string{"ID": "mine"})
	case strings.HasPrefix(r.URL.Path, "/v1/session/renew/"):
		_ = json.NewEncoder(w).Encode([]map[string]string{{"ID": "mine"}})
	case strings.HasPrefix(r.URL.Path, "/v1/session/destroy/"):
		_, _ = io.WriteString(w, "true")
	case strings.HasPrefix(r.URL.Path, "/v1/kv/"):
		if r.URL.Query().Get("index") != "" { // a blocking query: nothing changes
			select {
			case <-r.Context().Done():
			case <-time.After(300 * time.Millisecond):
			}
		}
		w.Header().Set("X-Consul-Index", "5")
		_ = json.NewEncoder(w).Encode([]*api.KVPair{{Key: strings.TrimPrefix(r.URL.Path, "/v1/kv/"), Value: []byte("other"),
			Flags: api.LockFlagValue, Session: "theirs", ModifyIndex: 5}})
	default:
		http.NotFound(w, r)
	}
}

// TestLeadHealth: a standby waiting behind a leader answers /v1/health 200; one whose token
// Consul refuses 503 with the policy to grant, said once in the log however often it retries;
// once the token is fixed, 200 again.
func TestLeadHealth(t *testing.T) {
	fake := &fakeLockConsul{}
	consul := httptest.NewServer(fake)
	defer consul.Close()
	c, err := api.NewClient(&api.Config{Address: consul.URL})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var logged []string
	store := New(c, "test/health/v1").WithLog(func(msg string, kv ...any) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, fmt.Sprint(append([]any{msg}, kv...)...))
	})
	svc := live.New(loop.New(nil, nil, store))
	store.WithLockHealth(svc.SetLockError)
	api := httptest.NewServer(live.Handler(svc))
	defer api.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- store.Lead(ctx, "replica-b", MinLeaderTTL, func(context.Context) { t.Error("led a lock another replica holds") })
	}()
	defer func() {
		cancel()
		<-done
	}()

	health := func() (int, string) {
		resp, err := http.Get(api.URL + "/v1/health")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, step := range []struct {
		name   string
		denied bool
		code   int
		body   string
	}{
		{"held by another replica", false, http.StatusOK, `"ok"`},
		{"permission denied", true, http.StatusServiceUnavailable, "session block"},
		{"recovered", false, http.StatusOK, `"ok"`},
	} {
		fake.denied.Store(step.denied)
		// Past the settle time and a few retries, the answer is the step's and stays so.
		deadline := time.Now().Add(lockSettle + 5*time.Second)
		for {
			code, body := health()
			if code == step.code && strings.Contains(body, step.body) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: /v1/health = %d %s, want %d with %q", step.name, code, body, step.code, step.body)
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(lockSettle)
		if code, body := health(); code != step.code || !strings.Contains(body, step.body) {
			t.Errorf("%s: then /v1/health = %d %s, want %d with %q", step.name, code, body, step.code, step.body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// Retried every second, each refusal (the lock's read, then its session) is logged once.
	seen, refusals := map[string]bool{}, 0
	for _, l := range logged {
		if strings.Contains(l, "cannot take the leader lock") {
			refusals++
			if seen[l] {
				t.Errorf("logged twice: %s", l)
			}
			seen[l] = true
		}
	}
	if refusals == 0 || refusals > 2 {
		t.Errorf("logged %d refusals, want one or two (the read's and the session's):\n%s", refusals, strings.Join(logged, "\n"))
	}
}

// TestLockHealth: a refusal is reported at once, other failures only past the lock's TTL;
// each change once; a late verdict on an earlier attempt changes nothing.
func TestLockHealth(t *testing.T) {
	denied := errors.New("Unexpected response code: 403 (Permission denied: lacks session:write)")
	noToken := errors.New("Unexpected response code: 403 (ACL not found)")
	down := errors.New("dial tcp 127.0.0.1:8500: connect: connection refused")
	type event struct {
		at  time.Duration // since the start
		err error         // nil: the attempt waits behind a holder or holds the lock
	}
	for _, tc := range []struct {
		name    string
		events  []event
		reports []string // what the health function heard, "ok" for nil
		logs    int
	}{
		{"waiting behind a holder", []event{{0, nil}}, nil, 0},
		{"permission denied", []event{{0, denied}, {time.Second, denied}, {2 * time.Second, denied}}, []string{"Permission denied"}, 1},
		{"ACL not found", []event{{0, noToken}}, []string{"ACL not found"}, 1},
		{"recovered", []event{{0, denied}, {time.Second, nil}, {2 * time.Second, nil}}, []string{"Permission denied", "ok"}, 1},
		{"unreachable within the TTL", []event{{0, down}, {5 * time.Second, down}, {9 * time.Second, nil}}, nil, 1},
		{"unreachable past the TTL", []event{{0, down}, {5 * time.Second, down}, {10 * time.Second, down}, {11 * time.Second, down}, {12 * time.Second, nil}},
			[]string{"connection refused", "ok"}, 1},
		{"a new failure after recovering starts afresh", []event{{0, down}, {9 * time.Second, nil}, {10 * time.Second, down}, {15 * time.Second, down}}, nil, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Unix(0, 0)
			var now time.Time
			var reports []string
			h := &lockHealth{ttl: MinLeaderTTL, now: func() time.Time { return now }, report: func(err error) {
				if err == nil {
					reports = append(reports, "ok")
					return
				}
				reports = append(reports, err.Error())
			}}
			logs := 0
			for _, e := range tc.events {
				now = start.Add(e.at)
				a := h.try()
				if e.err == nil {
					h.ok(a)
					continue
				}
				if h.failed(a, e.err) {
					logs++
				}
			}
			if len(reports) != len(tc.reports) {
				t.Fatalf("reports %q, want %q", reports, tc.reports)
			}
			for i := range reports {
				if !strings.Contains(reports[i], tc.reports[i]) {
					t.Errorf("report %d %q, want %q", i, reports[i], tc.reports[i])
				}
			}
			if logs != tc.logs {
				t.Errorf("%d log lines, want %d", logs, tc.logs)
			}
		})
	}
	// The settle timer's verdict on an attempt that has since failed is ignored.
	h := &lockHealth{ttl: MinLeaderTTL, now: time.Now}
	old := h.try()
	h.failed(h.try(), denied)
	if h.ok(old) || h.reported == "" {
		t.Errorf("a late ok of attempt %d cleared the failure of attempt %d", old, h.attempt)
	}
}
