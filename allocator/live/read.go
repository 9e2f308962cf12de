package live

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/placement"
)

// NamespaceReader says which Nomad namespaces a token may read jobs in. all is true for a
// token that reads every namespace (a management token, or any token when Nomad has no
// ACLs). nomadapi.NamespaceReader is the live one.
type NamespaceReader interface {
	ReadableNamespaces(ctx context.Context, token string) (all bool, namespaces []string, err error)
}

// ReadScope is what one request may read of the status: every namespace, or those named.
type ReadScope struct {
	All        bool
	Namespaces map[string]bool
}

// Allows reports whether the scope reads job id ("namespace/job").
func (sc ReadScope) Allows(id string) bool {
	if sc.All {
		return true
	}
	ns, _, _ := strings.Cut(id, "/")
	return sc.Namespaces[ns]
}

// Filter is st with only the jobs the scope reads: the ledger's records and the last
// round's lines, assignment, invalid jobs, triggers, apply results, hosts' jobs and moves.
// Totals over the cluster (rounds, GPU usage per model, GPUs per host) stay.
func (sc ReadScope) Filter(st Status) Status {
	if sc.All {
		return st
	}
	st.Jobs = maps.Clone(st.Jobs)
	maps.DeleteFunc(st.Jobs, func(id string, _ loop.JobRecord) bool { return !sc.Allows(id) })
	if st.Last != nil {
		rec := *st.Last
		rec.Jobs = nil
		for _, l := range st.Last.Jobs {
			if sc.Allows(l.ID) {
				rec.Jobs = append(rec.Jobs, l)
			}
		}
		rec.Assignment = maps.Clone(rec.Assignment)
		maps.DeleteFunc(rec.Assignment, func(id, _ string) bool { return !sc.Allows(id) })
		rec.Invalid = nil
		for _, inv := range st.Last.Invalid {
			if sc.Allows(inv.ID) {
				rec.Invalid = append(rec.Invalid, inv)
			}
		}
		rec.TriggerJobs = nil
		for _, id := range st.Last.TriggerJobs {
			if sc.Allows(id) {
				rec.TriggerJobs = append(rec.TriggerJobs, id)
			}
		}
		rec.Apply.Conflicts = nil
		for _, id := range st.Last.Apply.Conflicts {
			if sc.Allows(id) {
				rec.Apply.Conflicts = append(rec.Apply.Conflicts, id)
			}
		}
		// Apply errors are lines that name a job ("<action> <job>: <error>"): kept when
		// their job is readable.
		rec.Apply.Errors = nil
		for _, e := range st.Last.Apply.Errors {
			if f := strings.Fields(e); len(f) >= 2 && sc.Allows(strings.TrimSuffix(f[1], ":")) {
				rec.Apply.Errors = append(rec.Apply.Errors, e)
			}
		}
		// Hosts stay (GPUs per node are cluster totals), less the jobs the scope cannot read;
		// a move is kept when both its job and the job it made room for are readable.
		rec.Hosts = make([]placement.Host, len(st.Last.Hosts))
		for k, h := range st.Last.Hosts {
			h.Jobs = maps.Clone(h.Jobs)
			maps.DeleteFunc(h.Jobs, func(id string, _ int) bool { return !sc.Allows(id) })
			rec.Hosts[k] = h
		}
		rec.Moves = nil
		for _, m := range st.Last.Moves {
			if sc.Allows(m.Job) && sc.Allows(m.For) {
				rec.Moves = append(rec.Moves, m)
			}
		}
		rec.Tenants = nil
		st.Last = &rec
	}
	// LastError and LockError stay: /v1/health, open to all for Consul's check, shows it anyway.
	return st
}

type scopeKey struct{}

// ScopeFrom returns the read scope the API put in a request's context, and false when the
// request carries none (reads are not restricted).
func ScopeFrom(ctx context.Context) (ReadScope, bool) {
	sc, ok := ctx.Value(scopeKey{}).(ReadScope)
	return sc, ok
}

// WithNamespaceReader makes GET /v1/status and /ui need a Nomad token (X-Nomad-Token, or
// Authorization: Bearer) and show only the jobs of the namespaces it may read; without a
// token they answer 401 and only /v1/health is open. Without this option every reader
// sees every job: for clusters without Nomad ACLs (fft-allocator -read-auth=none).
func WithNamespaceReader(r NamespaceReader) HandlerOption {
	return func(o *handlerOptions) { o.readers = r }
}

// readScope is what the request may read, or why it may read nothing.
func (o *handlerOptions) readScope(r *http.Request) (ReadScope, *authError) {
	if o.readers == nil {
		return ReadScope{All: true}, nil
	}
	token := requestToken(r)
	if token == "" {
		return ReadScope{}, &authError{code: http.StatusUnauthorized, msg: "no token: send a Nomad ACL token as the X-Nomad-Token header; the status shows the jobs of the namespaces it may read (without one only /v1/health answers)"}
	}
	if sc, ok := o.scopes.get(token); ok {
		return sc, nil
	}
	if ok, wait := o.verifications.take(""); !ok {
		return ReadScope{}, &authError{code: http.StatusTooManyRequests, msg: "too many new tokens to check with Nomad; retry later", retryAfter: wait}
	}
	all, nss, err := o.readers.ReadableNamespaces(r.Context(), token)
	switch {
	case errors.Is(err, ErrTokenRefused):
		return ReadScope{}, &authError{code: http.StatusForbidden, msg: strings.TrimPrefix(err.Error(), "live: ")}
	case err != nil:
		return ReadScope{}, &authError{code: http.StatusServiceUnavailable, msg: fmt.Sprintf("asking Nomad what the token may read failed, retry: %v", err)}
	}
	sc := ReadScope{All: all, Namespaces: map[string]bool{}}
	for _, ns := range nss {
		sc.Namespaces[ns] = true
	}
	o.scopes.put(token, sc)
	return sc, nil
}
