package live

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// Handler serves the service's HTTP API:
//
//	GET /v1/health   200 {"status":"ok"} while the last round succeeded (or none ran yet), else 503
//	GET /v1/status   the Status as JSON
//	GET /v1/metrics  Prometheus text exposition
func Handler(s *Service) http.Handler {
	mux := http.NewServeMux()
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

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
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
	metric("fft_api_calls_total", "counter", "Nomad API calls made by recorded rounds.", num(float64(st.APICalls)))
	metric("fft_apply_conflicts_total", "counter", "Check-and-set job writes lost to concurrent updates.", num(float64(st.Conflicts)))
	metric("fft_apply_errors_total", "counter", "Failed job writes other than conflicts.", num(float64(st.ApplyErrors)))
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
