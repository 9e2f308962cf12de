package live

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// TestServerLimits: a body trickled slower than ReadTimeout allows and a connection left
// idle are closed by the server; they were held for ever with ReadHeaderTimeout alone.
func TestServerLimits(t *testing.T) {
	s := New(loop.New(&loop.Harness{}, &loop.Harness{}, loop.NewMemStore(false)))
	limits := DefaultServerLimits()
	limits.ReadHeaderTimeout, limits.ReadTimeout, limits.IdleTimeout = 300*time.Millisecond, 500*time.Millisecond, 300*time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(Handler(s), limits, nil)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	closedWithin := func(name string, conn net.Conn, within time.Duration) {
		t.Helper()
		_ = conn.SetReadDeadline(time.Now().Add(within))
		start := time.Now()
		_, err := io.ReadAll(conn)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("%s: the server still held the connection after %s", name, within)
			return
		}
		t.Logf("%s: closed by the server after %s", name, time.Since(start).Round(10*time.Millisecond))
	}
	// A trickled body: headers at once, then one byte every 200 ms of a 100-byte body.
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "PUT /v1/progress/default/a HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
	go func() {
		for i := 0; i < 100; i++ {
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	closedWithin("trickled body", conn, 3*time.Second)

	// An idle connection after one request.
	idle, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	fmt.Fprintf(idle, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
	closedWithin("idle keep-alive connection", idle, 3*time.Second)

	// Headers over the limit are refused.
	req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/v1/health", nil)
	req.Header.Set("X-Pad", strings.Repeat("x", limits.MaxHeaderBytes+4096))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("headers over %d bytes: HTTP %d, want 431", limits.MaxHeaderBytes, resp.StatusCode)
		}
	}
}

// countingVerifier counts the tokens it is asked about; every token of the form
// "tok-<job>" is a task of job <job>.
type countingVerifier struct{ calls atomic.Int64 }

func (c *countingVerifier) VerifyTask(_ context.Context, token string) (TaskIdentity, error) {
	c.calls.Add(1)
	job, ok := strings.CutPrefix(token, "tok-")
	if !ok {
		return TaskIdentity{}, ErrTokenRefused
	}
	return TaskIdentity{Namespace: "default", JobID: job, AllocID: "alloc-" + job}, nil
}

// TestReportLimits: a job's reports beyond its rate are answered 429 with Retry-After, and
// other jobs are not slowed; a token Nomad verified is not sent again; new tokens to verify
// are bounded over all jobs, so a flood of JWT-shaped garbage costs a bounded number of
// Nomad calls.
func TestReportLimits(t *testing.T) {
	v := &countingVerifier{}
	s := New(loop.New(&loop.Harness{}, &loop.Harness{}, loop.NewMemStore(false)))
	h := Handler(s, WithTaskVerifier(v), WithReportLimits(0.001, 5, 0.001, 8))
	put := func(job, token string, done int) *httptest.ResponseRecorder {
		req := httptest.NewRequest("PUT", "/v1/progress/default/"+job, strings.NewReader(fmt.Sprint(done)))
		req.Header.Set("X-Nomad-Token", token)
		rr := httptest.NewRecorder()
		h.ServeHTTP(rr, req)
		return rr
	}
	codes := map[int]int{}
	for i := 0; i < 20; i++ {
		codes[put("a", "tok-a", i).Code]++
	}
	if codes[200] != 5 || codes[429] != 15 {
		t.Errorf("20 reports of job a with a burst of 5: codes %v, want 5 taken and 15 refused", codes)
	}
	if rr := put("a", "tok-a", 99); rr.Code != 429 || rr.Header().Get("Retry-After") == "" || !strings.Contains(rr.Body.String(), "reports a second") {
		t.Errorf("a report over the rate: %d %q %s, want 429 with Retry-After", rr.Code, rr.Header().Get("Retry-After"), rr.Body.String())
	}
	if rr := put("b", "tok-b", 1); rr.Code != 200 {
		t.Errorf("job b after job a's flood: %d %s, want 200", rr.Code, rr.Body.String())
	}
	if n := v.calls.Load(); n != 2 {
		t.Errorf("Nomad was asked %d times for two tokens, want 2", n)
	}
	garbage := map[int]int{}
	for i := 0; i < 50; i++ {
		garbage[put("c", fmt.Sprintf("eyJ.garbage-%d.sig", i), 1).Code]++
	}
	if n := v.calls.Load(); n > 8 || garbage[429] < 44 {
		t.Errorf("50 new garbage tokens: %d Nomad calls in all, codes %v; want at most 8 calls (the verification burst)", n, garbage)
	}
}
