package sim

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/nomad-fft/nomad-fft/allocator/workload"
)

// Adversaries in the simulator (issue 20): a fraction of the workload's
// jobs lies about itself, one kind of lie each, so that a run with them can
// be set beside the same workload's honest run (metrics.Adversarial).

// AdversaryKind is one lie a job tells.
type AdversaryKind string

// The lies.
const (
	// AdvOverReport reports 99% of its work done, every round.
	AdvOverReport AdversaryKind = "over-report"
	// AdvInflate declares InflateFactor times its true rate on every model
	// and sends no progress reports.
	AdvInflate AdversaryKind = "inflate"
	// AdvPoison reports a hundredth of its true progress: near-zero rates
	// for the estimator (with Config.Learn, its family's factors).
	AdvPoison AdversaryKind = "poison"
	// AdvSplit submits SplitParts jobs of a part of its work each, at its
	// arrival, in its own namespace, in place of one.
	AdvSplit AdversaryKind = "split"
)

// InflateFactor is how much AdvInflate overstates its rates; SplitParts
// how many jobs AdvSplit becomes.
const (
	InflateFactor = 1000
	SplitParts    = 4
)

// AdversaryKinds are the lies, in the order fractions are laid out.
var AdversaryKinds = []AdversaryKind{AdvOverReport, AdvInflate, AdvPoison, AdvSplit}

// Adversary is a kind of lie and the fraction of jobs that tell it.
type Adversary struct {
	Kind     AdversaryKind `json:"kind"`
	Fraction float64       `json:"fraction"`
}

// AdversaryNamespace is the namespace a liar's jobs run in: a tenant of
// their own, apart from the honest jobs' Namespace (tenant identities come
// from namespaces, so the estimator keeps their data apart).
const AdversaryNamespace = "adversary"

// ParseAdversaries reads KIND:FRACTION,... (fractions in (0, 1], summing to
// at most 1).
func ParseAdversaries(s string) ([]Adversary, error) {
	var out []Adversary
	total := 0.0
	seen := map[AdversaryKind]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, f, ok := strings.Cut(part, ":")
		kind := AdversaryKind(strings.TrimSpace(k))
		known := false
		for _, a := range AdversaryKinds {
			known = known || a == kind
		}
		if !known {
			return nil, fmt.Errorf("adversary %q: unknown kind %q (known: %s)", part, k, kindList())
		}
		if seen[kind] {
			return nil, fmt.Errorf("adversary %q: kind %s given twice", part, kind)
		}
		seen[kind] = true
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if !ok || err != nil || !(v > 0 && v <= 1) {
			return nil, fmt.Errorf("adversary %q: expected KIND:FRACTION with a fraction in (0, 1], such as %s:0.1", part, kind)
		}
		total += v
		out = append(out, Adversary{Kind: kind, Fraction: v})
	}
	if total > 1+1e-9 {
		return nil, fmt.Errorf("adversaries %q: the fractions sum to %g, more than 1", s, total)
	}
	return out, nil
}

func kindList() string {
	var names []string
	for _, k := range AdversaryKinds {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}

// liarOf is the lie job idx of the workload tells ("" none): a hash of its
// index, so a job lies alike in every run of the workload whatever the
// policy.
func liarOf(advs []Adversary, idx int) AdversaryKind {
	// splitmix64's finaliser: uniform top bits for consecutive indices.
	z := uint64(idx) + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	u := float64(z>>11) / (1 << 53)
	for _, a := range advs {
		if u < a.Fraction {
			return a.Kind
		}
		u -= a.Fraction
	}
	return ""
}

// PartID names part k of a split job.
func PartID(id string, k int) string { return fmt.Sprintf("%s~%d", id, k) }

// adversarySource hands out the workload's jobs with the lies laid on:
// liars are recorded in the log, and a splitting job becomes its parts.
type adversarySource struct {
	src  workload.Source
	advs []Adversary
	lg   *Log
	n    int
	next []workload.JobSpec
}

func (s *adversarySource) Next() (workload.JobSpec, error) {
	if len(s.next) > 0 {
		j := s.next[0]
		s.next = s.next[1:]
		return j, nil
	}
	j, err := s.src.Next()
	if err == io.EOF || err != nil {
		return j, err
	}
	idx := s.n
	s.n++
	kind := liarOf(s.advs, idx)
	if kind == "" {
		return j, nil
	}
	if s.lg.Liars == nil {
		s.lg.Liars, s.lg.Parent = map[string]AdversaryKind{}, map[string]string{}
	}
	if kind != AdvSplit {
		s.lg.Liars[j.ID] = kind
		return j, nil
	}
	for k := 0; k < SplitParts; k++ {
		p := j
		p.ID, p.Work = PartID(j.ID, k), j.Work/SplitParts
		s.lg.Liars[p.ID], s.lg.Parent[p.ID] = kind, j.ID
		s.next = append(s.next, p)
	}
	first := s.next[0]
	s.next = s.next[1:]
	return first, nil
}

// report is what a liar of kind reports with true progress done of work
// (false: no report). With learn there is no fft.throughput to inflate, so
// AdvInflate overstates its rate through its reports instead (it would
// otherwise never be measured, and be held).
func (k AdversaryKind) report(done, work float64, learn bool) (float64, bool) {
	switch k {
	case AdvOverReport:
		return 0.99 * work, true
	case AdvInflate:
		if learn {
			return min(0.99*work, done*InflateFactor), true
		}
		return 0, false
	case AdvPoison:
		return done / 100, true
	}
	return done, true
}

// TenantPerJob makes every job of the workload its own tenant, and the
// parts of a split job one (Config.TenantOf): with equal tenant shares the
// ledger is the paper's per-job one, except that a split job's parts share
// one job's share.
func TenantPerJob(j workload.JobSpec) string {
	id, _, _ := strings.Cut(j.ID, "~")
	return "job-" + id
}
