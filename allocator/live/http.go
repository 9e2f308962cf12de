package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/nomad-fft/nomad-fft/allocator/loop"

	"github.com/nomad-fft/nomad-fft/allocator/jobid"
	"github.com/nomad-fft/nomad-fft/allocator/report"
)

// Handler serves the service's HTTP API:
//
//	GET /v1/health                     200 {"status":"ok"} while the last round succeeded (or none ran yet), else 503;
//	                                   503 {"status":"cannot lead"} while the replica cannot take the leader lock (Service.SetLockError)
//	GET /v1/status                     the Status as JSON (with WithNamespaceReader: a token's namespaces only)
//	GET /v1/metrics                    Prometheus metrics, when WithMetrics gives their handler
//	GET /ui                            the status page, when WithUI gives its handler
//	PUT /v1/progress/{namespace}/{job} a job's progress report (POST works too)
//	GET /v1/incarnation/{namespace}/{job} the create index of the asking allocation's job, with WithAllocIndexer
//
// A progress report's body is the work units the job has done, a plain
// number (42) or JSON ({"done": 42}). The answer is 200 with what was
// stored; 400 with a message naming the field and the fix when the body or
// the path is wrong; 503 when the store failed (retry); 501 when the store
// takes no reports; 429 (with Retry-After) when the job sends more reports
// than WithReportLimits allows, or too many new tokens come to verify. It only writes the store (ProgressReporter), so a
// standby replica takes reports as well as the leader. With
// WithTaskVerifier it also answers 401 without a token and 403 for a token
// that is not one of the job's own tasks, and 409 for a report below the
// stored one from the same allocation (checked against the store, so it
// holds across replicas). A report beyond the job's work is 400.
// From a task:
//
//	curl -fsS -X PUT -H "X-Nomad-Token: $NOMAD_TOKEN" --data 42 http://127.0.0.1:4650/v1/progress/$NOMAD_NAMESPACE/${NOMAD_JOB_ID//\//%2F}
//
// A job ID's slashes (a dispatched or periodic job's "parent/dispatch-…") are sent
// percent-encoded (%2F): the job is one path step. Sent raw, the answer is 400 with the path
// to use.
func Handler(s *Service, opts ...HandlerOption) http.Handler {
	o := handlerOptions{
		perJob:        newBuckets(DefaultReportsPerSecond, DefaultReportBurst),
		verifications: newBuckets(DefaultVerificationsPerSecond, DefaultVerificationBurst),
		verified:      newTokenCache[TaskIdentity](),
		scopes:        newTokenCache[ReadScope](),
		allocJobs:     newTokenCache[AllocJob](),
	}
	for _, opt := range opts {
		opt(&o)
	}
	mux := http.NewServeMux()
	progress := progressHandler(s, &o)
	mux.Handle("PUT /v1/progress/{namespace}/{job}", progress)
	mux.Handle("POST /v1/progress/{namespace}/{job}", progress)
	mux.Handle("GET /v1/incarnation/{namespace}/{job}", incarnationHandler(s, &o))
	// A job ID's slash (a dispatched or periodic child's "parent/dispatch-…") is sent
	// percent-encoded, %2F, to keep the job one path step: said to whoever sends it raw.
	for _, p := range []string{"PUT /v1/progress/", "POST /v1/progress/", "GET /v1/incarnation/"} {
		mux.HandleFunc(p+"{namespace}/{job}/{rest...}", func(w http.ResponseWriter, r *http.Request) {
			method, path, _ := strings.Cut(p, " ")
			job := r.PathValue("job") + "/" + r.PathValue("rest")
			writeError(w, http.StatusBadRequest, fmt.Sprintf("percent-encode the job ID's slashes (%%2F): %s %s%s/%s", method, path, r.PathValue("namespace"), url.PathEscape(job)))
		})
	}
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, _ *http.Request) {
		// A replica that can never lead must not pass for a healthy standby.
		if status, reason := s.Status().Problem(); status != "" {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": status, "error": reason})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		sc, denied := o.readScope(r)
		if denied != nil {
			denied.write(w)
			return
		}
		writeJSON(w, http.StatusOK, sc.Filter(s.Status()))
	})
	if o.metrics != nil {
		mux.HandleFunc("GET /v1/metrics", func(w http.ResponseWriter, r *http.Request) {
			if o.jobMetrics {
				// The series name jobs: read as the status is, with the request's scope.
				sc, denied := o.readScope(r)
				if denied != nil {
					denied.write(w)
					return
				}
				r = r.WithContext(context.WithValue(r.Context(), scopeKey{}, sc))
			}
			o.metrics.ServeHTTP(w, r)
		})
	}
	if o.ui != nil {
		mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
			sc, denied := o.readScope(r)
			if denied != nil {
				denied.write(w)
				return
			}
			o.ui.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), scopeKey{}, sc)))
		})
	}
	return mux
}

// HandlerOption configures Handler.
type HandlerOption func(*handlerOptions)

type handlerOptions struct {
	metrics, ui http.Handler
	// jobMetrics: the metrics name jobs (WithJobMetrics).
	jobMetrics bool
	verifier   TaskVerifier
	// perJob bounds each job's reports, verifications the new tokens sent to Nomad;
	// verified remembers the tokens Nomad verified.
	perJob, verifications *buckets
	verified              *tokenCache[TaskIdentity]
	// readers, when set, restricts the status to the namespaces a token may read;
	// scopes remembers what it said.
	readers NamespaceReader
	scopes  *tokenCache[ReadScope]
	// indexer, when set, says which job (by create index) an allocation is of; allocJobs
	// remembers it (an allocation never changes job).
	indexer   AllocIndexer
	allocJobs *tokenCache[AllocJob]
}

// WithMetrics serves h on GET /v1/metrics (package allocator/telemetry's Prometheus handler,
// which imports this package and so cannot be wired from here).
func WithMetrics(h http.Handler) HandlerOption {
	return func(o *handlerOptions) { o.metrics = h }
}

// WithJobMetrics says the metrics name jobs (fft-allocator -metrics-per-job): GET
// /v1/metrics then follows WithNamespaceReader as /v1/status does (401 without a token), and
// puts the request's read scope in its context (ScopeFrom) for the metrics to keep to.
func WithJobMetrics() HandlerOption {
	return func(o *handlerOptions) { o.jobMetrics = true }
}

// maxProgressBody bounds a progress report's body; a number or a small
// JSON object is far below it.
const maxProgressBody = 1 << 10

// progressUsage is the fix every rejected report is told.
const progressUsage = report.Usage

func progressHandler(s *Service, o *handlerOptions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rep, ok := s.loop.Store().(loop.ProgressReporter)
		if !ok {
			writeError(w, http.StatusNotImplemented, "this allocator's store takes no progress reports")
			return
		}
		ns, job := r.PathValue("namespace"), r.PathValue("job")
		// As Nomad names them, and one Consul key step each: an escaped slash (%2F) or a
		// ".." (%2E%2E) would name another key.
		if err := jobid.Check(ns, job); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("path %v: PUT /v1/progress/<namespace>/<job>", err))
			return
		}
		alloc, jobIndex, ok := o.admit(w, r, s, ns, job, "progress report")
		if !ok {
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxProgressBody))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes: %s", maxProgressBody, progressUsage))
				return
			}
			writeError(w, http.StatusBadRequest, fmt.Sprintf("reading the body: %v", err))
			return
		}
		rp, err := parseProgress(body)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		done := rp.Done
		id := ns + "/" + job
		if work, ok := s.jobWork(id); ok && done > work {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("done = %g is beyond the job's fft.work = %g: report the work units done so far, at most the job's work", done, work))
			return
		}
		err = storeReport(r.Context(), rep, id, alloc, jobIndex, rp)
		var behind *loop.BehindError
		switch {
		case errors.As(err, &behind):
			writeError(w, http.StatusConflict, behind.Error())
			return
		case err != nil:
			s.opts.log.Warn("storing a progress report failed", "job", id, "done", done, "error", err)
			writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("storing the report failed, retry: %v", err))
			return
		}
		s.opts.log.Debug("progress reported", "job", id, "done", done, "alloc", alloc)
		writeJSON(w, http.StatusOK, map[string]any{"job": id, "done": done})
	})
}

// admit authenticates a request of a job's task (allocOf) and takes it from
// the job's rate limit; a refused one is answered, logged as what was refused,
// and admit reports false.
func (o *handlerOptions) admit(w http.ResponseWriter, r *http.Request, s *Service, ns, job, what string) (alloc string, createIndex uint64, ok bool) {
	alloc, createIndex, denied := o.allocOf(r, ns, job)
	if denied == nil {
		denied = o.takeJob(ns, job)
	}
	if denied != nil {
		s.opts.log.Warn(what+" refused", "job", ns+"/"+job, "error", denied.msg)
		denied.write(w)
		return "", 0, false
	}
	return alloc, createIndex, true
}

// takeJob takes one of job ns/job's requests from its rate limit.
func (o *handlerOptions) takeJob(ns, job string) *authError {
	if ok, wait := o.perJob.take(ns + "/" + job); !ok {
		return &authError{code: http.StatusTooManyRequests, retryAfter: wait,
			msg: fmt.Sprintf("job %q sent more than %g reports a second (burst %g); retry later", ns+"/"+job, o.perJob.rate, o.perJob.burst)}
	}
	return nil
}

// incarnationHandler answers which registration of a job an allocation is of: the job's
// Nomad create index, which a job purged and registered again under its ID changes. The
// driver keys a task's checkpoints under checkpoint_root by it.
func incarnationHandler(s *Service, o *handlerOptions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ns, job := r.PathValue("namespace"), r.PathValue("job")
		if err := jobid.Check(ns, job); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("path %v: GET /v1/incarnation/<namespace>/<job>", err))
			return
		}
		if o.indexer == nil {
			writeError(w, http.StatusNotImplemented, "this allocator cannot look up allocations in Nomad")
			return
		}
		if o.verifier == nil && r.URL.Query().Get("alloc") == "" {
			writeError(w, http.StatusBadRequest, "name the asking allocation: GET /v1/incarnation/<namespace>/<job>?alloc=$NOMAD_ALLOC_ID")
			return
		}
		alloc, index, ok := o.admit(w, r, s, ns, job, "incarnation")
		if !ok {
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"job": ns + "/" + job, "alloc": alloc, "create_index": index})
	})
}

// parseProgress reads a progress report's body (package report): a number,
// or a JSON object with "done" and the fields a task driver measured.
func parseProgress(body []byte) (report.Report, error) { return report.Parse(body) }

// write answers the refused request.
func (e *authError) write(w http.ResponseWriter) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(e.retryAfter.Seconds()))))
	}
	writeError(w, e.code, e.msg)
}

// writeError answers a request that failed with {"error": msg}.
func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // read by people and scripts, not embedded in HTML
	_ = enc.Encode(v)
}

// WithUI serves h on GET /ui (package allocator/ui's status page).
func WithUI(h http.Handler) HandlerOption {
	return func(o *handlerOptions) { o.ui = h }
}
