package ui

import (
	"cmp"
	_ "embed"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator/live"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// StatusSource is what the page reads on each request: the service's state.
type StatusSource interface {
	Status() live.Status
}

// MaxQueueRows bounds the queue table; the page says how many it left out.
const MaxQueueRows = 500

//go:embed page.html.tmpl
var pageText string

var pageTemplate = template.Must(template.New("page").Parse(pageText))

// Handler serves the page: GET, HTML with inline CSS and SVG, no scripts and no external
// assets (its Content-Security-Policy forbids them). It refreshes itself every 30 seconds.
func Handler(src StatusSource, h *History) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := src.Status()
		if sc, ok := live.ScopeFrom(r.Context()); ok {
			// The API checked the reader's token: only its namespaces' jobs.
			st = sc.Filter(st)
		}
		v := build(st, h.Points(), time.Now())
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
		if err := pageTemplate.Execute(w, v); err != nil {
			http.Error(w, fmt.Sprintf("rendering the status page: %v", err), http.StatusInternalServerError)
		}
	})
}

// view is what the template shows.
type view struct {
	Now        string
	Leading    bool
	LastError  string
	LockError  string
	Round      int
	RoundStart string
	HasRound   bool
	Counts     []count
	Models     []modelRow
	Queue      []jobRow
	QueueLeft  int
	UtilPlot   template.HTML
	RhoPlot    template.HTML
	Rounds     int
}

type count struct {
	State string
	N     int
}

type modelRow struct {
	Name             string
	GPUs, Busy, Idle int
	Jobs             int
	Percent          int
}

type jobRow struct {
	ID, State, Model, User, Why string
	GPUs                        int
	Rho                         float64
}

// stateOrder sorts the queue: the jobs an operator asks about first.
var stateOrder = map[string]int{loop.StatusWaiting: 0, loop.StatusNoFit: 1, loop.StatusRunning: 2}

func build(st live.Status, points []Point, now time.Time) view {
	v := view{Now: now.UTC().Format(time.RFC3339), Leading: st.Leading, LastError: st.LastError, LockError: st.LockError, Rounds: len(points)}
	counts := map[string]int{}
	for _, j := range st.Jobs {
		counts[j.Status]++
	}
	for _, s := range []string{loop.StatusWaiting, loop.StatusRunning, loop.StatusNoFit, loop.StatusFinished, loop.StatusFailed} {
		v.Counts = append(v.Counts, count{s, counts[s]})
	}
	audit := map[string]loop.JobAudit{}
	last := st.Last
	if last != nil {
		v.HasRound, v.Round, v.RoundStart = true, last.Round, last.Start
		for _, j := range last.Jobs {
			audit[j.ID] = j
		}
		placed := map[string]int{}
		for _, m := range last.Assignment {
			placed[m]++
		}
		for _, m := range last.Models {
			busy := last.Usage[m.Name]
			row := modelRow{Name: m.Name, GPUs: m.GPUs, Busy: busy, Idle: m.GPUs - busy, Jobs: placed[m.Name]}
			if m.GPUs > 0 {
				row.Percent = 100 * busy / m.GPUs
			}
			v.Models = append(v.Models, row)
		}
	}
	for id, j := range st.Jobs {
		if _, active := stateOrder[j.Status]; !active {
			continue
		}
		a := audit[id]
		model := a.Model
		if model == "" && j.Status == loop.StatusRunning {
			model = j.LastModel
		}
		v.Queue = append(v.Queue, jobRow{ID: id, State: j.Status, Model: model, User: j.User, Why: a.Reason,
			GPUs: a.GPUs, Rho: j.Rho})
	}
	slices.SortFunc(v.Queue, func(a, b jobRow) int {
		if c := cmp.Compare(stateOrder[a.State], stateOrder[b.State]); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Rho, a.Rho); c != 0 { // the most owed first
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if len(v.Queue) > MaxQueueRows {
		v.QueueLeft = len(v.Queue) - MaxQueueRows
		v.Queue = v.Queue[:MaxQueueRows]
	}
	util := make([]float64, len(points))
	rhoMax := make([]float64, len(points))
	rhoMean := make([]float64, len(points))
	rounds := make([]int, len(points))
	for i, p := range points {
		util[i], rhoMax[i], rhoMean[i], rounds[i] = 100*p.Utilisation(), p.RhoMax, p.RhoMean, p.Round
	}
	v.UtilPlot = plot("GPU utilisation (%)", rounds, 100, series{"busy GPUs / all GPUs", "#2b7bb9", util})
	v.RhoPlot = plot("Fairness debt rho", rounds, 0, series{"max", "#c0392b", rhoMax}, series{"mean", "#e67e22", rhoMean})
	return v
}
