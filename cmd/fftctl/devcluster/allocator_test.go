package devcluster

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The proxy the task drivers report to forwards to the replica its target names at the time,
// path and body intact, and answers 503 while there is none.
func TestProxyHandler(t *testing.T) {
	replica := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, _ = io.WriteString(w, r.Method+" "+r.URL.Path+" "+string(body))
	}))
	defer replica.Close()
	for _, tc := range []struct {
		name     string
		target   func(context.Context) (string, error)
		wantCode int
		wantBody string
	}{
		{"forwards to the replica", func(context.Context) (string, error) { return replica.URL, nil },
			http.StatusOK, "PUT /v1/progress/default/job 42"},
		{"no replica", func(context.Context) (string, error) { return "", errors.New("no passing instance") },
			http.StatusServiceUnavailable, "no fft-allocator replica to forward to: no passing instance"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxy := httptest.NewServer(proxyHandler(tc.target))
			defer proxy.Close()
			req, err := http.NewRequest(http.MethodPut, proxy.URL+"/v1/progress/default/job", strings.NewReader("42"))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.wantCode || strings.TrimSpace(string(body)) != tc.wantBody {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, body, tc.wantCode, tc.wantBody)
			}
		})
	}
}
