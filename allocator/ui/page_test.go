package ui

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/live"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

type staticStatus live.Status

func (s staticStatus) Status() live.Status { return live.Status(s) }

// record is a round over an A100 x2 and a V100 x4 model with these jobs.
func record(round int, busyA100, busyV100 int, jobs ...loop.JobAudit) *loop.RoundRecord {
	rec := &loop.RoundRecord{Round: round, Start: "2026-12-01T10:00:00Z", Jobs: jobs, Assignment: map[string]string{},
		Models: []allocator.Model{{Name: "A100", GPUs: 2}, {Name: "V100", GPUs: 4}},
		Usage:  map[string]int{"A100": busyA100, "V100": busyV100}}
	for _, j := range jobs {
		if j.Model != "" {
			rec.Assignment[j.ID] = j.Model
		}
	}
	return rec
}

func get(t *testing.T, h http.Handler) (*http.Response, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestPage(t *testing.T) {
	h := NewHistory(0)
	h.ObserveRound(record(1, 2, 0, loop.JobAudit{ID: "default/a", Model: "A100", GPUs: 2, RhoAfter: 0}), nil)
	h.ObserveRound(nil, fmt.Errorf("round 2: observe: nomad down"))
	last := record(2, 2, 4,
		loop.JobAudit{ID: "default/a", Model: "A100", GPUs: 2, RhoAfter: 0.5},
		loop.JobAudit{ID: "default/c", Model: "V100", GPUs: 4, RhoAfter: 0},
		loop.JobAudit{ID: "team-x/<b>", GPUs: 2, RhoAfter: 1.25, Reason: "GPUs are better used by jobs with lower cost"})
	h.ObserveRound(last, nil)
	st := live.Status{Leading: true, Last: last, Jobs: map[string]loop.JobRecord{}}
	for id, s := range map[string]string{"default/a": loop.StatusRunning, "default/c": loop.StatusRunning, "team-x/<b>": loop.StatusWaiting, "default/old": loop.StatusFinished} {
		var r loop.JobRecord
		r.Status = s
		r.Rho = map[string]float64{"default/a": 0.5, "team-x/<b>": 1.25}[id]
		r.User = "ana"
		st.Jobs[id] = r
	}
	resp, body := get(t, Handler(staticStatus(st), h))
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q: want no external assets allowed", csp)
	}
	for _, want := range []string{
		"leading", "last round 2",
		// Models with their use.
		"<td>A100</td><td class=\"n\">2</td><td class=\"n\">2</td><td class=\"n\">0</td><td class=\"n\">1</td>",
		"<td>V100</td><td class=\"n\">4</td><td class=\"n\">4</td><td class=\"n\">0</td><td class=\"n\">1</td>",
		// The waiting job first, escaped, with its reason and rho.
		"team-x/&lt;b&gt;", "GPUs are better used by jobs with lower cost", "1.250",
		// Two recorded rounds plotted (the failed one left no point).
		"2 rounds kept", "<polyline", "GPU utilisation (%)", "Fairness debt rho", "round 1", "round 2",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(body, "default/old") {
		t.Errorf("the queue shows a finished job")
	}
	if i, j := strings.Index(body, "team-x/&lt;b&gt;"), strings.Index(body, "<td>default/a</td>"); i < 0 || j < 0 || i > j {
		t.Errorf("waiting job at %d, running at %d: want the waiting job first", i, j)
	}
	// No external assets: no src or href at all, no script.
	if m := regexp.MustCompile(`(?i)(src=|href=|<script|url\()`).FindString(body); m != "" {
		t.Errorf("page has %q: want no external assets and no scripts", m)
	}
	// The utilisation line: round 1 at 2/6 GPUs (33%), round 2 at 6/6 (100%, the top).
	if pts := polylines(body); len(pts) < 1 || !strings.HasSuffix(pts[0], ",28.0") {
		t.Errorf("utilisation polyline %q: want its last point at the top (y=28)", pts)
	}
}

func polylines(body string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<polyline [^>]*points="([^"]*)"`).FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestPageBoundsTheQueue(t *testing.T) {
	st := live.Status{Jobs: map[string]loop.JobRecord{}}
	for i := range 5000 {
		var r loop.JobRecord
		r.Status = loop.StatusWaiting
		r.Rho = float64(i)
		st.Jobs[fmt.Sprintf("default/j%04d", i)] = r
	}
	_, body := get(t, Handler(staticStatus(st), NewHistory(0)))
	if n := strings.Count(body, `<td class="state-waiting">`); n != MaxQueueRows {
		t.Errorf("%d queue rows, want %d", n, MaxQueueRows)
	}
	if !strings.Contains(body, "4500 more jobs not shown") {
		t.Errorf("page does not say how many jobs it left out")
	}
	if !strings.Contains(body, "default/j4999") || strings.Contains(body, "default/j0000<") {
		t.Errorf("want the most owed jobs (highest rho) shown first")
	}
	if !strings.Contains(body, "no round recorded yet") {
		t.Errorf("empty plots do not say so")
	}
}

func TestHistoryIsBounded(t *testing.T) {
	h := NewHistory(3)
	for r := range 10 {
		h.ObserveRound(record(r, 1, 2), nil)
	}
	pts := h.Points()
	if len(pts) != 3 || pts[0].Round != 7 || pts[2].Round != 9 {
		t.Fatalf("points %+v: want the last 3 rounds", pts)
	}
	if u := pts[0].Utilisation(); u != 0.5 {
		t.Errorf("utilisation %g, want 3/6", u)
	}
}
