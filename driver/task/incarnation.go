package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/nomad/structs"
	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/nomad-fft/nomad-fft/allocator/httptls"
)

// A job's checkpoints under checkpoint_root are kept per registration of the job:
// <root>/<namespace>/<job>/create-index-<N>/<group>/<task>, N the job's Nomad create index.
// A job purged and registered again under its ID (what `nomad job run` of the same file
// does after a purge) has a new create index, so it starts with no checkpoint instead of
// resuming the purged job's. Nomad 1.6.1 tells a driver plugin neither the create index
// (drivers.TaskConfig, the task's environment and its workload identity's claims carry none)
// nor anything else that changes with a new registration, so the driver asks the allocator,
// which reads the task's allocation with its own Nomad token.
const incarnationPrefix = "create-index-"

// incarnationFolder is the folder of one registration of a job, below the job's folder.
func incarnationFolder(index uint64) string {
	return incarnationPrefix + strconv.FormatUint(index, 10)
}

// incarnationRetries are the waits between the driver's tries to ask the allocator at a
// task's start (about 15 s in all, enough for a leader election) before the start fails
// with a recoverable error and Nomad's restart policy tries again. A var for tests.
var incarnationRetries = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}

// allocatorError is an answer of the allocator other than 200.
type allocatorError struct {
	status int
	msg    string
}

func (e *allocatorError) Error() string { return e.msg }

// retryable: the allocator could not tell now (unreachable, failing, rate-limited); any
// other refusal (no identity, another job's allocation) will not change by asking again.
func retryable(err error) bool {
	var ae *allocatorError
	if errors.As(err, &ae) {
		return ae.status >= 500 && ae.status != http.StatusNotImplemented || ae.status == http.StatusTooManyRequests
	}
	return !errors.Is(err, context.Canceled)
}

// Incarnation asks the allocator (GET /v1/incarnation/<namespace>/<job>?alloc=<alloc>,
// with the task's workload identity) for the create index of alloc's job.
func (p *httpPublisher) Incarnation(ctx context.Context, namespace, job, alloc, token string) (uint64, error) {
	u := p.address + "/v1/incarnation/" + url.PathEscape(namespace) + "/" + url.PathEscape(job) + "?alloc=" + url.QueryEscape(alloc)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, fmt.Errorf("asking the allocator for the job's create index at %q: %w", u, err)
	}
	if token != "" {
		req.Header.Set("X-Nomad-Token", token)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("asking the allocator for the job's create index at %q: %w", u, httptls.Explain(err, p.hints))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		text := strings.TrimSpace(string(body))
		if hint := httptls.StatusHint(req.URL.Scheme, resp.StatusCode, body); hint != "" {
			text += " (" + hint + ")"
		}
		return 0, &allocatorError{status: resp.StatusCode, msg: fmt.Sprintf("asking the allocator for the job's create index at %q: %s: %s", u, resp.Status, text)}
	}
	var got struct {
		CreateIndex uint64 `json:"create_index"`
	}
	if err := json.Unmarshal(body, &got); err != nil || got.CreateIndex == 0 {
		return 0, fmt.Errorf("the allocator's answer at %q, %q: want {\"create_index\": N} with N > 0 (%v)", u, body, err)
	}
	return got.CreateIndex, nil
}

// askIncarnation asks the allocator for the create index of the task's job, retrying what
// may pass. Its error is recoverable when retrying later may help: the start then fails and
// Nomad's restart policy starts the task again. It is not when the allocator refused for
// good (a task without a workload identity under -progress-auth=nomad, say): the task fails.
// Either way no checkpoint is guessed: resuming another registration's checkpoint would be a
// silent error, and starting from nothing would throw a job's work away silently.
func askIncarnation(ctx context.Context, pub publisher, cfg *drivers.TaskConfig, token string, logger hclog.Logger) (uint64, error) {
	var err error
	for i := 0; ; i++ {
		var idx uint64
		if idx, err = pub.Incarnation(ctx, cfg.Namespace, cfg.JobID, cfg.AllocID, token); err == nil {
			return idx, nil
		}
		if !retryable(err) || i == len(incarnationRetries) {
			break
		}
		logger.Warn("asking the allocator for the job's create index failed; retrying", "error", err, "wait", incarnationRetries[i])
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(incarnationRetries[i]):
		}
	}
	err = fmt.Errorf("placing the checkpoint under checkpoint_root, which keeps a job's checkpoints per registration of the job: %w", err)
	return 0, structs.NewRecoverableError(err, retryable(err))
}

// removeStaleIncarnations removes the folders of the job's earlier registrations
// (create-index-<M>, M < index), below jobDir: a job with a later create index exists, so
// those were purged and their checkpoints can never be resumed. RemoveAll follows no link.
// Folders of a later index (a Nomad cluster rebuilt from nothing) are left alone.
func removeStaleIncarnations(jobDir string, index uint64, logger hclog.Logger) {
	entries, err := os.ReadDir(jobDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		n, ok := strings.CutPrefix(e.Name(), incarnationPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		old, err := strconv.ParseUint(n, 10, 64)
		if err != nil || old >= index {
			continue
		}
		dir := filepath.Join(jobDir, e.Name())
		if err := os.RemoveAll(dir); err != nil {
			logger.Warn("removing the checkpoints of a purged registration of the job failed", "folder", dir, "error", err)
			continue
		}
		logger.Info("removed the checkpoints of a purged registration of the job", "folder", dir, "create_index", old, "current_create_index", index)
	}
}
