package live

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// TaskIdentity is who a verified token belongs to: one task of one
// allocation of a job (the claims of its Nomad workload identity).
type TaskIdentity struct {
	Namespace, JobID, AllocID, Task string
}

// TaskVerifier says which task a token sent with a progress report
// belongs to, or fails. nomadapi.IdentityVerifier is the live one: it has
// Nomad check the task's workload identity.
type TaskVerifier interface {
	VerifyTask(ctx context.Context, token string) (TaskIdentity, error)
}

// ErrTokenRefused means the token proves nothing: malformed, forged,
// expired (its allocation stopped), or Nomad refused it. Any other error
// from a TaskVerifier means it could not tell (Nomad unreachable): retry.
var ErrTokenRefused = errors.New("live: token refused")

// WithTaskVerifier makes the progress endpoint accept a report only with
// a token of one of the job's own tasks (X-Nomad-Token, or Authorization:
// Bearer), verified by v. Without it every report is taken (the default
// for clusters without Nomad ACLs, where Nomad verifies no token).
func WithTaskVerifier(v TaskVerifier) HandlerOption {
	return func(o *handlerOptions) { o.verifier = v }
}

// requestToken is the token sent the way Nomad's own API takes it.
func requestToken(r *http.Request) string {
	if t := strings.TrimSpace(r.Header.Get("X-Nomad-Token")); t != "" {
		return t
	}
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(t)
	}
	return ""
}

// authError is a refused report: its HTTP code and message, and for 429 when to retry.
type authError struct {
	code       int
	msg        string
	retryAfter time.Duration
}

// authorize checks that the request's token belongs to a task of job ns/job.
// It returns the allocation the report comes from ("" without a verifier).
func (o *handlerOptions) authorize(r *http.Request, ns, job string) (string, *authError) {
	if o.verifier == nil {
		return "", nil
	}
	token := requestToken(r)
	if token == "" {
		return "", &authError{code: http.StatusUnauthorized, msg: "no token: send the task's workload identity (secrets/nomad_token from the task's identity { file = true } block, or NOMAD_TOKEN from identity { env = true }) as the X-Nomad-Token header"}
	}
	id, known := o.verified.get(token)
	var err error
	if !known {
		// Each new token costs a Nomad call: bounded over all jobs.
		if ok, wait := o.verifications.take(""); !ok {
			return "", &authError{http.StatusTooManyRequests, "too many new tokens to verify with Nomad; retry later", wait}
		}
		id, err = o.verifier.VerifyTask(r.Context(), token)
		if err == nil {
			o.verified.put(token, id)
		}
	}
	switch {
	case errors.Is(err, ErrTokenRefused):
		// The message starts with ErrTokenRefused's text, less the package.
		return "", &authError{code: http.StatusForbidden, msg: fmt.Sprintf("%s: send the workload identity of a running task of job %q", strings.TrimPrefix(err.Error(), "live: "), ns+"/"+job)}
	case err != nil:
		return "", &authError{code: http.StatusServiceUnavailable, msg: fmt.Sprintf("verifying the token with Nomad failed, retry: %v", err)}
	case id.Namespace != ns || id.JobID != job:
		return "", &authError{code: http.StatusForbidden, msg: fmt.Sprintf("token of a task of job %q (allocation %s) cannot report for job %q: a job reports only for itself", id.Namespace+"/"+id.JobID, id.AllocID, ns+"/"+job)}
	}
	return id.AllocID, nil
}

// jobWork is the work of job id as the ledger this replica last loaded
// holds it (false when it holds none, as on a standby that never led).
func (s *Service) jobWork(id string) (float64, bool) {
	l := s.loop.Ledger()
	if l == nil {
		return 0, false
	}
	rec, ok := l.Jobs[id]
	return rec.Work, ok && rec.Work > 0
}

// AllocIndexer says which job an allocation belongs to, by the job's Nomad create index, so
// that a report is tied to one registration of the job: a job purged and registered again
// under the same ID has a new create index, and the old one's late reports do not count
// for it. nomadapi.AllocIndexer is the live one; it fails with ErrAllocUnknown when Nomad
// has no such allocation (it was garbage collected with its purged job).
type AllocIndexer interface {
	AllocJob(ctx context.Context, namespace, allocID string) (AllocJob, error)
}

// AllocJob is the job an allocation belongs to: its ID and its Nomad create index.
type AllocJob struct {
	JobID       string
	CreateIndex uint64
}

// ErrAllocUnknown means Nomad has no such allocation.
var ErrAllocUnknown = errors.New("live: allocation unknown to Nomad")

// WithAllocIndexer ties each report that comes from an allocation (the verified token's,
// or without WithTaskVerifier the ?alloc= the report names) to that allocation's job create
// index, and serves GET /v1/incarnation.
func WithAllocIndexer(x AllocIndexer) HandlerOption {
	return func(o *handlerOptions) { o.indexer = x }
}

// allocIDRe is what an allocation ID may be: Nomad's are UUIDs. It is checked before an
// unverified ID goes into a Nomad API path.
var allocIDRe = regexp.MustCompile(`^[a-zA-Z0-9-]{1,64}$`)

// allocOf is the allocation a request for job ns/job comes from and its job's create index:
// the verified token's allocation with a TaskVerifier (the query's word is not taken),
// else the one the query names (?alloc=), which must be one of ns/job's. It is "" (and 0)
// when neither says (no verifier and no ?alloc=, or no indexer to check it with).
func (o *handlerOptions) allocOf(r *http.Request, ns, job string) (string, uint64, *authError) {
	alloc, denied := o.authorize(r, ns, job)
	if denied != nil {
		return "", 0, denied
	}
	verified := o.verifier != nil
	if !verified {
		alloc = r.URL.Query().Get("alloc")
		if alloc == "" || o.indexer == nil {
			return "", 0, nil
		}
		if !allocIDRe.MatchString(alloc) {
			return "", 0, &authError{code: http.StatusBadRequest, msg: fmt.Sprintf("?alloc=%q: want a Nomad allocation ID ($NOMAD_ALLOC_ID)", alloc)}
		}
	}
	if alloc == "" || o.indexer == nil {
		return alloc, 0, nil
	}
	// Cached by namespace and allocation: the lookup answers for that namespace only.
	cacheKey := ns + "/" + alloc
	aj, known := o.allocJobs.get(cacheKey)
	if !known {
		if !verified {
			// An unverified allocation costs a Nomad call: bounded with the new tokens.
			if ok, wait := o.verifications.take(""); !ok {
				return "", 0, &authError{http.StatusTooManyRequests, "too many new allocations to look up in Nomad; retry later", wait}
			}
		}
		var err error
		aj, err = o.indexer.AllocJob(r.Context(), ns, alloc)
		switch {
		case errors.Is(err, ErrAllocUnknown):
			return "", 0, &authError{code: http.StatusForbidden, msg: fmt.Sprintf("allocation %s is unknown to Nomad in namespace %q: only a live allocation of job %q reports for it", alloc, ns, ns+"/"+job)}
		case err != nil:
			return "", 0, &authError{code: http.StatusServiceUnavailable, msg: fmt.Sprintf("looking up allocation %s in Nomad failed, retry: %v", alloc, err)}
		}
		o.allocJobs.put(cacheKey, aj)
	}
	if aj.JobID != job {
		return "", 0, &authError{code: http.StatusForbidden, msg: fmt.Sprintf("allocation %s is of job %q, not %q: a job reports only for itself", alloc, ns+"/"+aj.JobID, ns+"/"+job)}
	}
	return alloc, aj.CreateIndex, nil
}
