package live

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/nomad-fft/nomad-fft/allocator/report"
)

// Handler serves the service's HTTP API:
//
//	GET /v1/health                     200 {"status":"ok"} while the last round succeeded (or none ran yet), else 503
//	GET /v1/status                     the Status as JSON
//	GET /v1/metrics                    Prometheus text exposition
//	PUT /v1/progress/{namespace}/{job} a job's progress report (POST works too)
//
// A progress report's body is the work units the job has done, a plain
// number (42) or JSON ({"done": 42}). The answer is 200 with what was
// stored; 400 with a message naming the field and the fix when the body or
// the path is wrong; 503 when the store failed (retry); 501 when the store
// takes no reports. It only writes the store (ProgressReporter), so a
// standby replica takes reports as well as the leader. From a task:
//
//	curl -fsS -X PUT --data 42 http://127.0.0.1:4650/v1/progress/$NOMAD_NAMESPACE/$NOMAD_JOB_ID
func Handler(s *Service) http.Handler {
	mux := http.NewServeMux()
	progress := progressHandler(s)
	mux.Handle("PUT /v1/progress/{namespace}/{job}", progress)
	mux.Handle("POST /v1/progress/{namespace}/{job}", progress)
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, _ *http.Request) {
		st := s.Status()
		if st.LastError != "" {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "failing", "error": st.LastError})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Status())
	})
	mux.HandleFunc("GET /v1/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		writeMetrics(w, s.Status())
	})
	return mux
}

// maxProgressBody bounds a progress report's body; a number or a small
// JSON object is far below it.
const maxProgressBody = 1 << 10

// progressUsage is the fix every rejected report is told.
const progressUsage = report.Usage

func progressHandler(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rep, ok := s.store.(ProgressReporter)
		if !ok {
			writeError(w, http.StatusNotImplemented, "this allocator's store takes no progress reports")
			return
		}
		ns, job := r.PathValue("namespace"), r.PathValue("job")
		for _, seg := range []struct{ name, v string }{{"namespace", ns}, {"job", job}} {
			// An escaped slash (%2F) would make the ID ambiguous.
			if seg.v == "" || strings.Contains(seg.v, "/") {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("path %s %q: expected one non-empty path segment: PUT /v1/progress/<namespace>/<job>", seg.name, seg.v))
				return
			}
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
		if err := storeReport(r.Context(), rep, id, rp); err != nil {
			s.opts.log.Warn("storing a progress report failed", "job", id, "done", done, "error", err)
			writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("storing the report failed, retry: %v", err))
			return
		}
		s.opts.log.Debug("progress reported", "job", id, "done", done)
		writeJSON(w, http.StatusOK, map[string]any{"job": id, "done": done})
	})
}

// parseProgress reads a progress report's body (package report): a number,
// or a JSON object with "done" and the fields a task driver measured.
func parseProgress(body []byte) (report.Report, error) { return report.Parse(body) }

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

// writeMetrics writes the status as Prometheus metrics (text format 0.0.4).
func writeMetrics(w http.ResponseWriter, st Status) {
	metric := func(name, typ, help string, lines ...string) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
		for _, l := range lines {
			fmt.Fprintf(w, "%s%s\n", name, l)
		}
	}
	num := func(v float64) string { return fmt.Sprintf(" %g", v) }
	metric("fft_rounds_total", "counter", "Rounds run since start.", num(float64(st.Rounds)))
	metric("fft_round_failures_total", "counter", "Rounds that failed.", num(float64(st.Failures)))
	metric("fft_early_rounds_total", "counter", "Recorded rounds run before the schedule because a job arrived or finished.", num(float64(st.EarlyRounds)))
	metric("fft_api_calls_total", "counter", "Nomad API calls made by recorded rounds and by the watcher between them.", num(float64(st.APICalls)))
	metric("fft_apply_conflicts_total", "counter", "Check-and-set job writes lost to concurrent updates.", num(float64(st.Conflicts)))
	metric("fft_apply_errors_total", "counter", "Failed job writes other than conflicts.", num(float64(st.ApplyErrors)))
	var applied []string
	for _, a := range []Action{ActionStart, ActionMigrate, ActionPark} {
		applied = append(applied, fmt.Sprintf("{action=%q} %d", a, st.Applied[a]))
	}
	metric("fft_applied_changes_total", "counter", "Changes applied to jobs, by action.", applied...)
	if last := st.Last; last != nil {
		total := 0.0
		for _, d := range last.Phases {
			total += d
		}
		metric("fft_round_duration_seconds", "gauge", "Duration of the last recorded round.", num(total))
		metric("fft_solve_seconds", "gauge", "Solve phase of the last recorded round.", num(last.SolveSeconds))
		metric("fft_round", "gauge", "Number of the last recorded round.", num(float64(last.Round)))
	}
	states := map[string]int{StatusWaiting: 0, StatusRunning: 0, StatusFinished: 0, StatusFailed: 0, StatusNoFit: 0}
	var rho []string
	ids := make([]string, 0, len(st.Jobs))
	for id := range st.Jobs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := st.Jobs[id]
		states[r.Status]++
		if r.Status == StatusWaiting || r.Status == StatusRunning {
			rho = append(rho, fmt.Sprintf("{job=\"%s\"} %g", escape(id), r.Rho))
		}
	}
	var lines []string
	for _, k := range []string{StatusWaiting, StatusRunning, StatusFinished, StatusFailed, StatusNoFit} {
		lines = append(lines, fmt.Sprintf("{state=%q} %d", k, states[k]))
	}
	metric("fft_jobs", "gauge", "Jobs in the ledger by state.", lines...)
	metric("fft_rho", "gauge", "Fairness compensation rho of each active job.", rho...)
}

// escape writes a Prometheus label value: backslash, quote and newline escaped.
func escape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
