package command

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// reportHTTP sends done for job id ("namespace/job") to the allocator's progress endpoint
// that a names, with token (the task's workload identity) as X-Nomad-Token and the task's
// allocation as ?alloc= when they are set. The job ID is percent-encoded: a dispatched
// job's "/" goes as %2F.
// A refusal returns the allocator's message, a TLS mismatch the setting that fixes it.
func reportHTTP(ctx context.Context, a allocatorConn, id, alloc, token string, done float64) error {
	ns, job, _ := strings.Cut(id, "/")
	base := strings.TrimRight(a.addr, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	u := base + "/v1/progress/" + url.PathEscape(ns) + "/" + url.PathEscape(job)
	if alloc != "" {
		u += "?alloc=" + url.QueryEscape(alloc)
	}
	client, err := a.client(30 * time.Second)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, strings.NewReader(strconv.FormatFloat(done, 'g', -1, 64)))
	if err != nil {
		return fmt.Errorf("-allocator-addr = %q: %w", a.addr, err)
	}
	if token != "" {
		req.Header.Set("X-Nomad-Token", token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return explainTLS(err, a)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	var e struct {
		Error string `json:"error"`
	}
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	if hint := statusHint(req.URL.Scheme, resp.StatusCode, body); hint != "" {
		msg += " (" + hint + ")"
	}
	if resp.StatusCode == http.StatusUnauthorized && token == "" {
		msg += " (NOMAD_TOKEN is not set: give the task an identity { env = true } block)"
	}
	return fmt.Errorf("HTTP %d: %s", resp.StatusCode, msg)
}
