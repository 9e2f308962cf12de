package task

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator/httptls"
	"github.com/nomad-fft/nomad-fft/allocator/report"
)

// publisher sends a job's report to the allocator, authenticated by token: the
// reporting task's own Nomad workload identity ("" when the task exposes none), from
// allocation alloc (which an allocator that verifies no token checks with Nomad). It also
// asks the allocator for the create index of alloc's job (see askIncarnation).
type publisher interface {
	Publish(ctx context.Context, namespace, job, alloc, token string, r report.Report) error
	Incarnation(ctx context.Context, namespace, job, alloc, token string) (uint64, error)
}

// httpPublisher PUTs reports to the fft-allocator's progress endpoint.
type httpPublisher struct {
	address string
	client  *http.Client
	// hints name the keys that fix a TLS mismatch.
	hints httptls.Hints
}

// newHTTPPublisher returns the publisher to c's allocator (ParseConfig has checked its TLS
// files; they are read again here).
func newHTTPPublisher(c Config) (*httpPublisher, error) {
	tlsConfig, err := c.allocatorTLS()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return &httpPublisher{address: c.AllocatorAddress,
		client: httptls.NewHTTPClient(tlsConfig, 10*time.Second), hints: c.allocatorHints()}, nil
}

// Publish sends PUT /v1/progress/<namespace>/<job>?alloc=<alloc> with the report as JSON
// and the task's workload identity as X-Nomad-Token, which the allocator's default
// -progress-auth=nomad has Nomad verify: a report counts only for the job whose task sent
// it. The allocation ties the report to the job's registration, also under
// -progress-auth=none. The job ID is percent-encoded: a dispatched job's "/" is %2F.
func (p *httpPublisher) Publish(ctx context.Context, namespace, job, alloc, token string, r report.Report) error {
	body, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding the report: %w", err)
	}
	u := p.address + "/v1/progress/" + url.PathEscape(namespace) + "/" + url.PathEscape(job)
	if alloc != "" {
		u += "?alloc=" + url.QueryEscape(alloc)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("reporting progress to %q: %w", u, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("X-Nomad-Token", token)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("reporting progress to %q: %w", u, httptls.Explain(err, p.hints))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		text := strings.TrimSpace(string(msg))
		if hint := httptls.StatusHint(req.URL.Scheme, resp.StatusCode, msg); hint != "" {
			text += " (" + hint + ")"
		}
		return fmt.Errorf("reporting progress to %q: %s: %s", u, resp.Status, text)
	}
	return nil
}
