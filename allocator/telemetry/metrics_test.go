package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/live"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// dashboardPath is the Grafana dashboard shipped with the allocator.
const dashboardPath = "../../cmd/fft-allocator/grafana-dashboard.json"

// served runs rounds of a real live.Service over an in-memory cluster, with these metrics as
// its round hook, and returns what GET /v1/metrics serves, parsed by Prometheus' own parser.
func served(t *testing.T, rounds int, opts ...Option) map[string]*dto.MetricFamily {
	t.Helper()
	c := &cluster{
		models: []allocator.Model{{Name: "A100", GPUs: 2}, {Name: "V100", GPUs: 4}},
		jobs: []loop.Job{
			job("a", 2, map[string]float64{"A100": 4, "V100": 1}),
			job("b", 2, map[string]float64{"A100": 2, "V100": 2}),
			job("c", 4, map[string]float64{"V100": 1}),
		},
	}
	var m *Metrics
	svc := live.New(loop.New(c, c, loop.NewMemStore(false)), live.WithRoundHook(func(rec *loop.RoundRecord, err error) { m.ObserveRound(rec, err) }))
	m = New(svc, opts...)
	for range rounds {
		if _, err := svc.RunRound(context.Background()); err != nil {
			t.Fatalf("round: %v", err)
		}
	}
	srv := httptest.NewServer(live.Handler(svc, live.WithMetrics(m.Handler())))
	defer srv.Close()
	return scrape(t, srv.URL+"/v1/metrics")
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing %s as Prometheus text: %v", url, err)
	}
	return fams
}

// value is the sample of family name whose labels include want (a counter, gauge, or a
// histogram's count); ok is false when there is none.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func TestServedMetrics(t *testing.T) {
	fams := served(t, 2)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"fft_rounds_total", nil, 2},
		{"fft_round_duration_seconds", nil, 2},
		{"fft_solve_duration_seconds", nil, 2},
		{"fft_round_phase_duration_seconds", map[string]string{"phase": "solve"}, 2},
		{"fft_round_failures_total", map[string]string{"phase": "observe"}, 0},
		{"fft_api_calls_total", map[string]string{"source": "observe"}, 4},
		{"fft_api_calls_total", map[string]string{"source": "watch"}, 2},
		// K(t) = 6 GPUs busy: c takes the 4 V100 and a or b the 2 A100; round 2 keeps them.
		{"fft_applied_changes_total", map[string]string{"action": "start"}, 2},
		{"fft_applied_changes_total", map[string]string{"action": "park"}, 0},
		{"fft_apply_conflicts_total", nil, 0},
		{"fft_jobs", map[string]string{"state": "running"}, 2},
		{"fft_jobs", map[string]string{"state": "waiting"}, 1},
		{"fft_jobs", map[string]string{"state": "finished"}, 0},
		{"fft_model_gpus", map[string]string{"model": "V100"}, 4},
		{"fft_model_gpus_busy", map[string]string{"model": "A100"}, 2},
		{"fft_model_gpus_busy", map[string]string{"model": "V100"}, 4},
		{"fft_model_gpus_idle", map[string]string{"model": "V100"}, 0},
		{"fft_model_jobs", map[string]string{"model": "A100"}, 1},
		{"fft_model_jobs", map[string]string{"model": "V100"}, 1},
		{"fft_round", nil, 1},
		{"fft_leader", nil, 0},
		{"fft_healthy", nil, 1},
	} {
		if got, ok := value(fams, c.name, c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %g (present %v), want %g", c.name, c.labels, got, ok, c.want)
		}
	}
	if _, ok := fams["fft_job_rho"]; ok {
		t.Errorf("fft_job_rho is served without WithPerJob")
	}
	if got, ok := value(served(t, 1, WithPerJob(true)), "fft_job_rho", map[string]string{"job": "default/c"}); !ok || got < 0 {
		t.Errorf("with WithPerJob: fft_job_rho{job=default/c} = %g, present %v", got, ok)
	}
}

func TestObserveFailedRound(t *testing.T) {
	m := New(staticStatus{})
	m.ObserveRound(nil, &loop.PhaseError{Round: 3, Phase: "apply", Err: errors.New("nomad down")})
	m.ObserveRound(nil, errors.New("loading the ledger: consul down"))
	fams, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	for _, c := range []struct {
		phase string
		want  float64
	}{{"apply", 1}, {"other", 1}, {"observe", 0}} {
		if got, _ := value(byName, "fft_round_failures_total", map[string]string{"phase": c.phase}); got != c.want {
			t.Errorf("fft_round_failures_total{phase=%q} = %g, want %g", c.phase, got, c.want)
		}
	}
	if got, _ := value(byName, "fft_round_duration_seconds", nil); got != 0 {
		t.Errorf("a failed round observed a duration: count %g", got)
	}
}

// TestDashboardMetricsServed checks every metric the Grafana dashboard queries is one the
// allocator serves (a histogram's _bucket, _sum and _count are its family's).
func TestDashboardMetricsServed(t *testing.T) {
	data, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	fams := served(t, 1)
	metricName := regexp.MustCompile(`\b(?:fft|go|process)_[a-zA-Z0-9_]+`)
	used := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			names := metricName.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: query %q uses none of the allocator's metrics", p.Title, tg.Expr)
			}
			for _, n := range names {
				used++
				if !servedName(fams, n) {
					t.Errorf("panel %q: query %q uses %s, which /v1/metrics does not serve", p.Title, tg.Expr, n)
				}
			}
		}
	}
	if used < 20 {
		t.Errorf("the dashboard queries %d metric names; want its panels to cover the service (>= 20)", used)
	}
}

func servedName(fams map[string]*dto.MetricFamily, name string) bool {
	if _, ok := fams[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if f := fams[base]; f != nil && f.GetType() == dto.MetricType_HISTOGRAM {
				return true
			}
		}
	}
	return false
}

// maxSeries bounds what one allocator exports without per-job series, whatever its job
// count: a few dozen families, 5 job states, 4 gauges per GPU model, histogram buckets per
// phase, and the Go runtime's metrics.
const maxSeries = 400

// TestSeriesBounded scrapes a 5,000-job status: without per-job series the count stays under
// maxSeries; with them it grows by at most DefaultPerJobMax series for the most owed jobs,
// plus fft_job_rho_omitted_jobs counting the others.
func TestSeriesBounded(t *testing.T) {
	st := bigStatus(5000)
	active := 0
	for _, j := range st.Jobs {
		if j.Status == loop.StatusWaiting || j.Status == loop.StatusRunning {
			active++
		}
	}
	count := func(opts ...Option) (int, map[string]int) {
		srv := httptest.NewServer(New(staticStatus(st), opts...).Handler())
		defer srv.Close()
		fams := scrape(t, srv.URL)
		total, by := 0, map[string]int{}
		for name, f := range fams {
			n := 0
			for _, m := range f.GetMetric() {
				n++
				if h := m.GetHistogram(); h != nil {
					n += len(h.GetBucket()) + 2 // buckets with +Inf, _sum, _count
				}
			}
			by[name] = n
			total += n
		}
		return total, by
	}
	plain, by := count()
	if plain > maxSeries {
		t.Errorf("%d series for 5,000 jobs without per-job series, want <= %d; by family: %v", plain, maxSeries, top(by))
	}
	perJob, _ := count(WithPerJob(true))
	if d := perJob - plain; d != DefaultPerJobMax+1 {
		t.Errorf("WithPerJob adds %d series for %d active jobs, want %d and the omitted count", d, active, DefaultPerJobMax)
	}
	srv := httptest.NewServer(New(staticStatus(st), WithPerJob(true), WithPerJobMax(10)).Handler())
	defer srv.Close()
	fams := scrape(t, srv.URL)
	if got := len(fams["fft_job_rho"].GetMetric()); got != 10 {
		t.Errorf("WithPerJobMax(10): %d fft_job_rho series", got)
	}
	most := 0.0 // over 50 active jobs have the largest rho
	for _, j := range st.Jobs {
		if j.Status == loop.StatusWaiting || j.Status == loop.StatusRunning {
			most = max(most, j.Rho)
		}
	}
	for _, m := range fams["fft_job_rho"].GetMetric() {
		if m.GetGauge().GetValue() != most {
			t.Errorf("series %v (rho %g) kept: want the 10 most owed jobs (rho %g)", m.GetLabel(), m.GetGauge().GetValue(), most)
		}
	}
	if v, _ := value(fams, "fft_job_rho_omitted_jobs", nil); v != float64(active-10) {
		t.Errorf("fft_job_rho_omitted_jobs = %g, want %d", v, active-10)
	}
	t.Logf("5,000 jobs: %d series, %d with per-job series", plain, perJob)
	if diff := cmp.Diff(map[string]float64{"running": 1250, "waiting": 1250, "finished": 1250, "failed": 1250, "no-fit": 0, "parked": 0},
		jobsByState(t, st)); diff != "" {
		t.Errorf("fft_jobs by state (-want,+got):\n%s", diff)
	}
}

func jobsByState(t *testing.T, st live.Status) map[string]float64 {
	t.Helper()
	srv := httptest.NewServer(New(staticStatus(st)).Handler())
	defer srv.Close()
	fams := scrape(t, srv.URL)
	got := map[string]float64{}
	for _, s := range states {
		got[s], _ = value(fams, "fft_jobs", map[string]string{"state": s})
	}
	return got
}

// top lists the largest families, for a failure message.
func top(by map[string]int) []string {
	var names []string
	for n := range by {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return by[names[i]] > by[names[j]] })
	var out []string
	for _, n := range names[:min(8, len(names))] {
		out = append(out, n)
	}
	return out
}

// TestPerJobMetricsFollowNamespaces: per-job series name jobs, so with them on /v1/metrics
// follows the read auth of /v1/status: no token gets 401, and a token sees the series of the
// jobs of the namespaces it may read only. Without per-job series the metrics name no job and
// stay open to a scraper without a token.
func TestPerJobMetricsFollowNamespaces(t *testing.T) {
	st := bigStatus(200)
	get := func(h http.Handler, token string) (int, map[string]*dto.MetricFamily) {
		srv := httptest.NewServer(h)
		defer srv.Close()
		req, _ := http.NewRequest("GET", srv.URL+"/v1/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return resp.StatusCode, nil
		}
		p := expfmt.NewTextParser(model.LegacyValidation)
		fams, err := p.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, fams
	}
	svc := live.New(loop.New(&loop.Harness{}, &loop.Harness{}, loop.NewMemStore(false)))
	perJob := New(staticStatus(st), WithPerJob(true))
	h := live.Handler(svc, live.WithMetrics(perJob.Handler()), live.WithJobMetrics(), live.WithNamespaceReader(readers{}))
	if code, _ := get(h, ""); code != http.StatusUnauthorized {
		t.Errorf("per-job metrics without a token: %d, want 401", code)
	}
	code, fams := get(h, "tok-team-3")
	if code != 200 || len(fams["fft_job_rho"].GetMetric()) == 0 {
		t.Fatalf("per-job metrics with team-3's token: %d, %d series", code, len(fams["fft_job_rho"].GetMetric()))
	}
	for _, m := range fams["fft_job_rho"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "job" && !strings.HasPrefix(l.GetValue(), "team-3/") {
				t.Errorf("team-3's token sees %s", l.GetValue())
			}
		}
	}
	if _, fams := get(h, "mgmt"); len(fams["fft_job_rho"].GetMetric()) != 100 {
		t.Errorf("a management token sees %d series, want every active job's (100)", len(fams["fft_job_rho"].GetMetric()))
	}
	plain := live.Handler(svc, live.WithMetrics(New(staticStatus(st)).Handler()), live.WithNamespaceReader(readers{}))
	if code, fams := get(plain, ""); code != 200 || fams["fft_jobs"] == nil {
		t.Errorf("metrics without per-job series, no token: %d, want 200 with fft_jobs", code)
	}
}

// readers: "mgmt" reads every namespace, "tok-<ns>" namespace ns.
type readers struct{}

func (readers) ReadableNamespaces(_ context.Context, token string) (bool, []string, error) {
	if token == "mgmt" {
		return true, nil, nil
	}
	if ns, ok := strings.CutPrefix(token, "tok-"); ok {
		return false, []string{ns}, nil
	}
	return false, nil, live.ErrTokenRefused
}
