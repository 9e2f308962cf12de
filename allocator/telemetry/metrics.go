package telemetry

import (
	"errors"
	"net/http"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nomad-fft/nomad-fft/allocator/live"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// namespace prefixes every metric the allocator exports.
const namespace = "fft"

// StatusSource is what the gauges read on each scrape: the service's state.
type StatusSource interface {
	Status() live.Status
}

// Buckets of the duration histograms, in seconds. A round is Nomad and Consul round trips
// plus a solve: tens of milliseconds on a small cluster, seconds at thousands of jobs
// (allocator/solver/README.md, "Speed"), bounded by the round length.
var (
	roundBuckets = prometheus.ExponentialBuckets(0.005, 2, 14)  // 5 ms .. 41 s
	solveBuckets = prometheus.ExponentialBuckets(0.0005, 2, 16) // 0.5 ms .. 16 s
)

// Metrics holds the allocator's Prometheus metrics. Its ObserveRound is the service's round
// hook (live.WithRoundHook); the gauges are read from the StatusSource at scrape time, so
// they are never staler than the service itself.
type Metrics struct {
	reg *prometheus.Registry
	// src, perJob and perJobMax make the per-job series of each request (Handler).
	src       StatusSource
	perJob    bool
	perJobMax int

	rounds        prometheus.Counter
	failures      *prometheus.CounterVec
	early         *prometheus.CounterVec
	roundSeconds  prometheus.Histogram
	phaseSeconds  *prometheus.HistogramVec
	solveSeconds  prometheus.Histogram
	apiCalls      *prometheus.CounterVec
	conflicts     prometheus.Counter
	applyErrors   prometheus.Counter
	appliedByKind *prometheus.CounterVec
}

// Option configures Metrics.
type Option func(*options)

type options struct {
	perJob    bool
	perJobMax int
}

// WithPerJob adds one rho series per active job (fft_job_rho{job=...}), for the
// WithPerJobMax most owed of them, and fft_job_rho_omitted_jobs counting the others. Off by
// default: at thousands of jobs it is the cardinality Prometheus operators forbid; the
// bounded fft_rho_max and fft_rho_sum summarise the same debt. The series name jobs: the
// API serves them under its read auth (live.WithJobMetrics), and a request's read scope
// (live.ScopeFrom) keeps the jobs of the namespaces it may read.
func WithPerJob(on bool) Option { return func(o *options) { o.perJob = on } }

// DefaultPerJobMax is how many fft_job_rho series WithPerJob exports at most.
const DefaultPerJobMax = 200

// WithPerJobMax bounds the fft_job_rho series to the n most owed jobs (largest rho, then
// job ID); n < 1 is DefaultPerJobMax.
func WithPerJobMax(n int) Option { return func(o *options) { o.perJobMax = n } }

// Phases are the round's phases, in order, as the service names them in RoundRecord.Phases.
var Phases = []string{"observe", "build", "solve", "apply", "record"}

// New returns the allocator's metrics, with Go runtime and process metrics, reading gauges
// from src.
func New(src StatusSource, opts ...Option) *Metrics {
	var o options
	for _, f := range opts {
		f(&o)
	}
	if o.perJobMax < 1 {
		o.perJobMax = DefaultPerJobMax
	}
	m := &Metrics{
		src: src, perJob: o.perJob, perJobMax: o.perJobMax,
		reg: prometheus.NewRegistry(),
		rounds: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "rounds_total",
			Help: "Rounds run since start, failed ones included."}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "round_failures_total",
			Help: "Rounds that failed, by the phase that failed (other: loading the ledger, or a recovered panic)."}, []string{"phase"}),
		early: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "early_rounds_total",
			Help: "Recorded rounds run before the schedule, by the kind of change that brought them forward."}, []string{"trigger"}),
		roundSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "round_duration_seconds",
			Help: "Duration of each recorded round, all phases.", Buckets: roundBuckets}),
		phaseSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "round_phase_duration_seconds",
			Help: "Duration of each phase of each recorded round.", Buckets: roundBuckets}, []string{"phase"}),
		solveSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "solve_duration_seconds",
			Help: "Solver time of each recorded round.", Buckets: solveBuckets}),
		apiCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "api_calls_total",
			Help: "Nomad API calls of recorded rounds, by source: observe and apply in the round, watch between rounds."}, []string{"source"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "apply_conflicts_total",
			Help: "Check-and-set job writes lost to concurrent updates (re-read next round)."}),
		applyErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "apply_errors_total",
			Help: "Failed job writes other than conflicts."}),
		appliedByKind: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "applied_changes_total",
			Help: "Changes applied to jobs, by action."}, []string{"action"}),
	}
	// Every label value a dashboard queries exists from the start, at 0.
	for _, p := range Phases {
		m.phaseSeconds.WithLabelValues(p)
		m.failures.WithLabelValues(p)
	}
	m.failures.WithLabelValues("other")
	for _, k := range []loop.TriggerKind{loop.TriggerArrival, loop.TriggerUnheld, loop.TriggerFinish} {
		m.early.WithLabelValues(string(k))
	}
	for _, s := range []string{"observe", "apply", "watch"} {
		m.apiCalls.WithLabelValues(s)
	}
	for _, a := range []loop.Action{loop.ActionStart, loop.ActionMigrate, loop.ActionPark} {
		m.appliedByKind.WithLabelValues(string(a))
	}
	m.reg.MustRegister(m.rounds, m.failures, m.early, m.roundSeconds, m.phaseSeconds, m.solveSeconds,
		m.apiCalls, m.conflicts, m.applyErrors, m.appliedByKind,
		&stateCollector{src: src},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in Prometheus' exposition formats (text, or what the scraper
// negotiates). With WithPerJob the per-job series are gathered for each request, with the
// jobs its read scope allows.
func (m *Metrics) Handler() http.Handler {
	base := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
	if !m.perJob {
		return base
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sc, scoped := live.ScopeFrom(r.Context())
		g := m.gatherer(func(id string) bool { return !scoped || sc.Allows(id) })
		promhttp.HandlerFor(g, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	})
}

// gatherer is every series, the per-job ones (with WithPerJob) of the jobs allows.
func (m *Metrics) gatherer(allows func(id string) bool) prometheus.Gatherer {
	if !m.perJob {
		return m.reg
	}
	jobs := prometheus.NewRegistry()
	jobs.MustRegister(&jobCollector{src: m.src, max: m.perJobMax, allows: allows})
	return prometheus.Gatherers{m.reg, jobs}
}

// Gatherer is every series (per-job ones of every job), for tests and for pushing elsewhere.
func (m *Metrics) Gatherer() prometheus.Gatherer {
	return m.gatherer(func(string) bool { return true })
}

// ObserveRound counts one round: the service calls it after every round with the round's
// record (nil when it failed before recording) and its error.
func (m *Metrics) ObserveRound(rec *loop.RoundRecord, err error) {
	m.rounds.Inc()
	if err != nil {
		m.failures.WithLabelValues(failedPhase(err)).Inc()
		return
	}
	if rec == nil {
		return
	}
	total := 0.0
	for name, d := range rec.Phases {
		m.phaseSeconds.WithLabelValues(name).Observe(d)
		total += d
	}
	m.roundSeconds.Observe(total)
	m.solveSeconds.Observe(rec.SolveSeconds)
	if rec.Trigger != loop.TriggerSchedule && rec.Trigger != loop.TriggerManual && rec.Trigger != "" {
		m.early.WithLabelValues(string(rec.Trigger)).Inc()
	}
	m.apiCalls.WithLabelValues("observe").Add(float64(rec.ObserveCalls))
	m.apiCalls.WithLabelValues("apply").Add(float64(rec.Apply.Calls))
	m.apiCalls.WithLabelValues("watch").Add(float64(rec.WatchCalls))
	m.conflicts.Add(float64(len(rec.Apply.Conflicts)))
	m.applyErrors.Add(float64(len(rec.Apply.Errors)))
	for a, n := range rec.Apply.Applied {
		m.appliedByKind.WithLabelValues(string(a)).Add(float64(n))
	}
}

// failedPhase names the phase a round's error came from, as a bounded label value: "other"
// is a failure before the first phase (loading the ledger) or a recovered panic.
func failedPhase(err error) string {
	var pe *loop.PhaseError
	if errors.As(err, &pe) {
		for _, p := range Phases {
			if pe.Phase == p {
				return p
			}
		}
		return "other"
	}
	return "other"
}

// stateCollector turns the service's Status into gauges at scrape time. Its series are
// bounded by the number of GPU models and job states.
type stateCollector struct {
	src StatusSource
}

// jobCollector is the per-job series of one request: the max most owed active jobs that
// allows, and how many others there are.
type jobCollector struct {
	src    StatusSource
	max    int
	allows func(id string) bool
}

func (c *jobCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descJobRho
	ch <- descJobOmitted
}

func (c *jobCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Status()
	var ids []string
	for id, j := range st.Jobs {
		if (j.Status == loop.StatusWaiting || j.Status == loop.StatusRunning) && c.allows(id) {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(a, b int) bool {
		ra, rb := st.Jobs[ids[a]].Rho, st.Jobs[ids[b]].Rho
		return ra > rb || ra == rb && ids[a] < ids[b]
	})
	kept := ids[:min(len(ids), c.max)]
	for _, id := range kept {
		ch <- prometheus.MustNewConstMetric(descJobRho, prometheus.GaugeValue, st.Jobs[id].Rho, id)
	}
	ch <- prometheus.MustNewConstMetric(descJobOmitted, prometheus.GaugeValue, float64(len(ids)-len(kept)))
}

var (
	descLeader     = prometheus.NewDesc("fft_leader", "1 while this replica holds the leader lock and runs rounds, else 0.", nil, nil)
	descRound      = prometheus.NewDesc("fft_round", "Number of the last recorded round.", nil, nil)
	descRoundTime  = prometheus.NewDesc("fft_last_round_timestamp_seconds", "Start of the last recorded round, Unix seconds.", nil, nil)
	descHealthy    = prometheus.NewDesc("fft_healthy", "1 while the last round succeeded (or none ran yet) and the replica can take the leader lock, as /v1/health; else 0.", nil, nil)
	descJobs       = prometheus.NewDesc("fft_jobs", "Jobs in the ledger, by state.", []string{"state"}, nil)
	descGPUs       = prometheus.NewDesc("fft_model_gpus", "GPUs of each model in the last recorded round.", []string{"model"}, nil)
	descBusy       = prometheus.NewDesc("fft_model_gpus_busy", "GPUs of each model the last round assigned.", []string{"model"}, nil)
	descIdle       = prometheus.NewDesc("fft_model_gpus_idle", "GPUs of each model the last round left idle.", []string{"model"}, nil)
	descModelJobs  = prometheus.NewDesc("fft_model_jobs", "Jobs the last round placed on each model.", []string{"model"}, nil)
	descRhoMax     = prometheus.NewDesc("fft_rho_max", "Largest fairness debt rho over waiting and running jobs.", nil, nil)
	descRhoSum     = prometheus.NewDesc("fft_rho_sum", "Sum of the fairness debt rho over waiting and running jobs.", nil, nil)
	descJobRho     = prometheus.NewDesc("fft_job_rho", "Fairness debt rho of each waiting or running job, the most owed first up to -metrics-per-job-max (per-job series, off by default).", []string{"job"}, nil)
	descJobOmitted = prometheus.NewDesc("fft_job_rho_omitted_jobs", "Waiting or running jobs the reader may see that have no fft_job_rho series (beyond -metrics-per-job-max).", nil, nil)
)

// states are the ledger's job states, each exported even at 0.
var states = []string{loop.StatusWaiting, loop.StatusRunning, loop.StatusFinished, loop.StatusFailed, loop.StatusNoFit, loop.StatusParked}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLeader, descRound, descRoundTime, descHealthy, descJobs, descGPUs, descBusy,
		descIdle, descModelJobs, descRhoMax, descRhoSum} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Status()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(descLeader, boolValue(st.Leading))
	problem, _ := st.Problem()
	gauge(descHealthy, boolValue(problem == ""))

	counts := map[string]int{}
	rhoMax, rhoSum := 0.0, 0.0
	for _, j := range st.Jobs {
		counts[j.Status]++
		if j.Status == loop.StatusWaiting || j.Status == loop.StatusRunning {
			rhoSum += j.Rho
			rhoMax = max(rhoMax, j.Rho)
		}
	}
	for _, s := range states {
		gauge(descJobs, float64(counts[s]), s)
	}
	gauge(descRhoMax, rhoMax)
	gauge(descRhoSum, rhoSum)

	last := st.Last
	if last == nil {
		return
	}
	gauge(descRound, float64(last.Round))
	if t, err := time.Parse(time.RFC3339Nano, last.Start); err == nil {
		gauge(descRoundTime, float64(t.UnixNano())/1e9)
	}
	placed := map[string]int{}
	for _, model := range last.Assignment {
		if model != "" {
			placed[model]++
		}
	}
	for _, md := range last.Models {
		busy := last.Usage[md.Name]
		gauge(descGPUs, float64(md.GPUs), md.Name)
		gauge(descBusy, float64(busy), md.Name)
		gauge(descIdle, float64(md.GPUs-busy), md.Name)
		gauge(descModelJobs, float64(placed[md.Name]), md.Name)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
