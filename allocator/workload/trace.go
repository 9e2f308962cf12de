package workload

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/nomad-fft/nomad-fft/allocator"
)

// TraceError names the file, line and field of a bad trace entry.
type TraceError struct {
	File  string
	Line  int
	Field string
	Value string
	Want  string
}

func (e *TraceError) Error() string {
	return fmt.Sprintf("%s:%d: field %q = %q: %s", e.File, e.Line, e.Field, e.Value, e.Want)
}

// BigJobs says what to do with a job whose GPU count has no row in the
// throughput table (Gavel's Philly-derived traces have scale factors such
// as 3, 7, 16, 24, 32 and 64; the table has 1, 2, 4 and 8).
type BigJobs int

const (
	// BigReject fails the load with a TraceError (the default).
	BigReject BigJobs = iota
	// BigSkip drops the job and counts a warning.
	BigSkip
	// BigExtrapolate gives the job the rate of the largest GPU count d0 <= d
	// in the table scaled linearly, rate(d) = rate(d0) * d / d0 (perfect
	// scaling beyond the table: our documented rule). It also covers
	// counts the table lacks below its maximum, such as 3 or 7.
	BigExtrapolate
)

// ParseBigJobs reads "reject", "skip" or "extrapolate".
func ParseBigJobs(s string) (BigJobs, error) {
	switch s {
	case "reject", "":
		return BigReject, nil
	case "skip":
		return BigSkip, nil
	case "extrapolate":
		return BigExtrapolate, nil
	}
	return 0, fmt.Errorf("unknown big-job rule %q: want reject, skip or extrapolate", s)
}

// TraceOptions control loading a trace.
type TraceOptions struct {
	Table *Throughputs
	// Cluster is used to reject jobs that need more GPUs than any model
	// has, or that fit no model.
	Cluster []allocator.Model
	// Skip drops bad jobs with a counted warning instead of failing.
	Skip bool
	Big  BigJobs
}

// Trace is a loaded trace: jobs sorted by arrival, plus the warnings for
// jobs skipped.
type Trace struct {
	Jobs     []JobSpec
	Skipped  int
	Warnings []string
}

// LoadTrace reads a trace file; see ParseTrace for the formats.
func LoadTrace(path string, opt TraceOptions) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening trace: %w", err)
	}
	defer f.Close()
	return ParseTrace(f, path, opt)
}

// ParseTrace reads Gavel's trace formats (tab-separated; detected by field
// count: 10 fields = current Gavel, 7 = Gavel's old msr format, 12 =
// Shockwave's) or our CSV (first line a header starting with "id,"):
//
//	id,job_type,arrival_s,gpus,work[,rate:<model>...]
//
// where work is total steps and rate:<model> columns (steps/s with all the
// job's GPUs) override the throughput table; without them job_type must be
// in the table. name is used in errors.
func ParseTrace(r io.Reader, name string, opt TraceOptions) (*Trace, error) {
	if opt.Table == nil {
		opt.Table = GavelThroughputs()
	}
	br := bufio.NewReader(r)
	head, _ := br.Peek(3)
	p := &traceParser{name: name, opt: opt, tr: &Trace{}}
	var err error
	if string(head) == "id," {
		p.csvMode = true
		err = p.csv(br)
	} else {
		err = p.tsv(br)
	}
	if err != nil {
		return nil, err
	}
	sort.SliceStable(p.tr.Jobs, func(a, b int) bool { return p.tr.Jobs[a].Arrival < p.tr.Jobs[b].Arrival })
	for k := range p.tr.Jobs {
		p.tr.Jobs[k].Index = k
	}
	return p.tr, nil
}

type traceParser struct {
	name    string
	opt     TraceOptions
	tr      *Trace
	csvMode bool
}

// field is the name a field has in the format being read.
func (p *traceParser) field(tsv, csv string) string {
	if p.csvMode {
		return csv
	}
	return tsv
}

// bad either returns the error or, in skip mode, counts it and returns nil.
func (p *traceParser) bad(e *TraceError) error {
	if !p.opt.Skip {
		return e
	}
	p.tr.Skipped++
	if len(p.tr.Warnings) < 20 {
		p.tr.Warnings = append(p.tr.Warnings, e.Error())
	}
	return nil
}

// maxLine bounds one trace line (Gavel's commands are a few hundred bytes).
const maxLine = 1 << 20

func (p *traceParser) tsv(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxLine)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" {
			continue
		}
		f := strings.Split(text, "\t")
		var typ, steps, sf, arr string
		switch len(f) {
		case 10: // job_type command workdir num_steps_arg needs_data_dir total_steps scale_factor priority SLO arrival
			typ, steps, sf, arr = f[0], f[5], f[6], f[9]
		case 7: // job_type command num_steps_arg needs_data_dir total_steps arrival scale_factor
			typ, steps, arr, sf = f[0], f[4], f[5], f[6]
		case 12: // Shockwave: ... total_steps scale_factor mode priority SLO duration arrival
			typ, steps, sf, arr = f[0], f[5], f[6], f[11]
			if d, err := strconv.ParseFloat(f[10], 64); err != nil || d < 0 || math.IsNaN(d) {
				if err := p.bad(&TraceError{p.name, line, "duration", f[10], "want a number of seconds >= 0"}); err != nil {
					return err
				}
				continue
			}
		default:
			if err := p.bad(&TraceError{p.name, line, "fields", strconv.Itoa(len(f)), "want 10 (Gavel), 7 (Gavel msr) or 12 (Shockwave) tab-separated fields"}); err != nil {
				return err
			}
			continue
		}
		if err := p.add(line, fmt.Sprintf("j%d", len(p.tr.Jobs)+p.tr.Skipped), typ, arr, sf, steps, nil); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return &TraceError{p.name, line + 1, "line", "", "unreadable: " + err.Error()}
	}
	return nil
}

func (p *traceParser) csv(r io.Reader) error {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		return &TraceError{p.name, 1, "header", "", "unreadable: " + err.Error()}
	}
	col := map[string]int{}
	rateCols := map[string]int{}
	for k, h := range header {
		h = strings.TrimSpace(h)
		col[h] = k
		if m, ok := strings.CutPrefix(h, "rate:"); ok {
			rateCols[m] = k
		}
	}
	for _, need := range []string{"id", "job_type", "arrival_s", "gpus", "work"} {
		if _, ok := col[need]; !ok {
			return &TraceError{p.name, 1, need, "", "missing column in header"}
		}
	}
	line := 1
	ids := map[string]bool{}
	for {
		rec, err := cr.Read()
		line++
		if err == io.EOF {
			return nil
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				line = pe.Line
			}
			if err := p.bad(&TraceError{p.name, line, "line", "", "malformed CSV: " + err.Error()}); err != nil {
				return err
			}
			continue
		}
		get := func(name string) (string, bool) {
			k, ok := col[name]
			if !ok || k >= len(rec) {
				return "", false
			}
			return strings.TrimSpace(rec[k]), true
		}
		missing := ""
		for _, need := range []string{"id", "job_type", "arrival_s", "gpus", "work"} {
			if v, ok := get(need); !ok || v == "" {
				missing = need
				break
			}
		}
		if missing != "" {
			if err := p.bad(&TraceError{p.name, line, missing, "", "missing value"}); err != nil {
				return err
			}
			continue
		}
		id, _ := get("id")
		if ids[id] {
			if err := p.bad(&TraceError{p.name, line, "id", id, "duplicate job id"}); err != nil {
				return err
			}
			continue
		}
		var rates map[string]float64
		badRate := false
		for m, k := range rateCols {
			if k >= len(rec) || strings.TrimSpace(rec[k]) == "" {
				continue
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(rec[k]), 64)
			if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				if err := p.bad(&TraceError{p.name, line, "rate:" + m, rec[k], "want steps/s >= 0"}); err != nil {
					return err
				}
				badRate = true
				break
			}
			if rates == nil {
				rates = map[string]float64{}
			}
			if v > 0 {
				rates[m] = v
			}
		}
		if badRate {
			continue
		}
		typ, _ := get("job_type")
		arr, _ := get("arrival_s")
		gpus, _ := get("gpus")
		work, _ := get("work")
		n := len(p.tr.Jobs)
		if err := p.add(line, id, typ, arr, gpus, work, rates); err != nil {
			return err
		}
		if len(p.tr.Jobs) > n {
			ids[id] = true
		}
	}
}

// add validates one job and appends it (or counts it skipped).
func (p *traceParser) add(line int, id, typ, arr, gpus, work string, rates map[string]float64) error {
	bad := func(field, v, want string) error { return p.bad(&TraceError{p.name, line, field, v, want}) }
	a, err := strconv.ParseFloat(arr, 64)
	if err != nil || a < 0 || math.IsNaN(a) || math.IsInf(a, 0) {
		return bad(p.field("arrival_time", "arrival_s"), arr, "want seconds >= 0")
	}
	d, err := strconv.Atoi(gpus)
	if err != nil || d < 1 {
		return bad(p.field("scale_factor", "gpus"), gpus, "want a GPU count >= 1")
	}
	w, err := strconv.ParseFloat(work, 64)
	if err != nil || !(w > 0) || w > allocator.MaxWork {
		return bad(p.field("total_steps", "work"), work, fmt.Sprintf("want a number of steps > 0 and at most %g", allocator.MaxWork))
	}
	// Spread rates come from the table, for rates that are the table's
	// (a trace's own rates have no spread measurement to go with them).
	var spread map[string]float64
	if r, ok := p.opt.Table.Rates(typ, d); ok && (rates == nil || maps.Equal(rates, r)) {
		spread = p.opt.Table.SpreadRates(typ, d)
	}
	if rates == nil {
		r, ok := p.opt.Table.Rates(typ, d)
		if !ok {
			top := p.opt.Table.MaxGPUs(typ)
			switch {
			case top == 0:
				return bad("job_type", typ, "unknown job type: not in the throughput table")
			case p.opt.Big == BigExtrapolate:
				d0 := p.opt.Table.largestBelow(typ, d)
				base, _ := p.opt.Table.Rates(typ, d0)
				r = make(map[string]float64, len(base))
				for m, v := range base {
					r[m] = v * float64(d) / float64(d0)
				}
			case p.opt.Big == BigSkip:
				p.tr.Skipped++
				if len(p.tr.Warnings) < 20 {
					p.tr.Warnings = append(p.tr.Warnings, (&TraceError{p.name, line, p.field("scale_factor", "gpus"), gpus, fmt.Sprintf("no throughput for %d GPUs (table has up to %d); skipped", d, top)}).Error())
				}
				return nil
			default:
				return bad(p.field("scale_factor", "gpus"), gpus, fmt.Sprintf("no throughput for %q with %d GPUs (table has up to %d); use -big-jobs=skip or extrapolate", typ, d, top))
			}
		}
		rates = r
	}
	if m, why := rateError(w, rates); why != "" {
		return bad("rate:"+m, strconv.FormatFloat(rates[m], 'g', -1, 64), why)
	}
	if len(p.opt.Cluster) > 0 {
		maxGPUs, fits := 0, false
		for k := range p.opt.Cluster {
			m := &p.opt.Cluster[k]
			maxGPUs = max(maxGPUs, m.GPUs)
			if allocator.Fits(m, d, 0, rates[m.Name]) {
				fits = true
			}
		}
		switch {
		case d > maxGPUs:
			return bad(p.field("scale_factor", "gpus"), gpus, fmt.Sprintf("needs %d GPUs but the largest model in the cluster has %d", d, maxGPUs))
		case !fits:
			return bad("job_type", typ, "fits no GPU model of the cluster (no positive throughput with enough GPUs)")
		}
	}
	p.tr.Jobs = append(p.tr.Jobs, JobSpec{ID: id, Type: typ, Arrival: a, GPUs: d, Work: w, Rate: rates, SpreadRate: spread, Source: fmt.Sprintf("%s:%d", p.name, line)})
	return nil
}

// Bounds on a trace's rates, in steps per second, chosen so that every
// round the simulator builds stays in the round engine's ranges
// (allocator/limits.go) for any round length it accepts: theta = rate * R
// <= 1e6 * 1e9, and W / theta = (W / rate) / R within [1e-3/1e9, 1e12/1e-3].
const (
	maxRate          = 1e6
	minRunSeconds    = 1e-3
	maxRunSeconds    = 1e12
	rateErrorMessage = "with %g steps at %g steps/s on %q the job runs %g s: want a rate <= %g steps/s and a run of %g to %g s on every model"
)

// rateError returns the model and a description when its rate is out of
// range for work w, or "" for both.
func rateError(w float64, rates map[string]float64) (model, why string) {
	models := make([]string, 0, len(rates))
	for m := range rates {
		models = append(models, m)
	}
	sort.Strings(models)
	for _, m := range models {
		v := rates[m]
		if v == 0 {
			continue
		}
		if run := w / v; v > maxRate || !(run >= minRunSeconds && run <= maxRunSeconds) {
			return m, fmt.Sprintf(rateErrorMessage, w, v, m, run, maxRate, minRunSeconds, maxRunSeconds)
		}
	}
	return "", ""
}

// WriteTrace writes jobs in our CSV format, with a rate column per model,
// so that any workload (a generated one too) can be replayed exactly.
func WriteTrace(w io.Writer, jobs []JobSpec, models []string) error {
	cw := csv.NewWriter(w)
	header := []string{"id", "job_type", "arrival_s", "gpus", "work"}
	for _, m := range models {
		header = append(header, "rate:"+m)
	}
	if err := cw.Write(header); err != nil {
		return err
	}
	for _, j := range jobs {
		rec := []string{j.ID, j.Type, strconv.FormatFloat(j.Arrival, 'g', -1, 64), strconv.Itoa(j.GPUs), strconv.FormatFloat(j.Work, 'g', -1, 64)}
		for _, m := range models {
			rec = append(rec, strconv.FormatFloat(j.Rate[m], 'g', -1, 64))
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
