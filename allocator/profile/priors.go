package profile

import (
	"bytes"
	_ "embed"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode"
)

// Limits on a prior table's values; they keep logs finite and typos visible.
const (
	// MaxSpeed bounds a relative speed (and 1/MaxSpeed is the smallest).
	MaxSpeed = 1e6
	// MaxLogSD bounds a prior's log standard deviation (a factor e^10).
	MaxLogSD = 10
	// maxName bounds a model or family name.
	maxName = 256
)

// priorHeader is the operator table's header, in this order.
var priorHeader = []string{"model", "family", "speed", "log_sd"}

// Prior is one row of a prior table: the speed of a GPU model relative to
// a Tesla V100 (1.0, the reference of Gavel's table) for jobs of Family,
// or for any job when Family is "".
type Prior struct {
	// Model is a GPU model name: the device name Nomad fingerprints
	// ("Tesla V100-SXM2-16GB"), or a short token such as "V100" that
	// matches any name containing it as a word.
	Model string
	// Family is a job family ("ResNet-50"); "" is the model's row for any job.
	Family string
	// Speed is the rate on Model divided by the rate on a V100 (> 0).
	Speed float64
	// LogSD is how uncertain log(Speed) is (> 0).
	LogSD float64
}

type priorKey struct{ model, family string }

// Priors is a table of Prior rows, at most one per (model, family).
type Priors struct {
	rows map[priorKey]Prior
}

// PriorError is one bad field of a prior table.
type PriorError struct {
	Line  int
	Field string
	Value string
	// Expect says what the field must hold.
	Expect string
}

func (e *PriorError) Error() string {
	return fmt.Sprintf("prior table line %d: field %q = %q: expected %s", e.Line, e.Field, e.Value, e.Expect)
}

// ParsePriors reads an operator's prior table: CSV with the header
// model,family,speed,log_sd; lines starting with # are comments. Every
// failure is a *PriorError naming the line, the field and what it must hold.
func ParsePriors(r io.Reader) (*Priors, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = len(priorHeader)
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, csv.ErrFieldCount) {
		return nil, csvError(err)
	}
	if err != nil || !equalTrimmed(header, priorHeader) {
		return nil, &PriorError{Line: 1, Field: "(header)", Value: strings.Join(header, ","), Expect: "the header " + strings.Join(priorHeader, ",")}
	}
	p := &Priors{rows: map[priorKey]Prior{}}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return p, nil
		}
		if err != nil {
			return nil, csvError(err)
		}
		line, _ := cr.FieldPos(0)
		row, err := parsePriorRow(rec, line)
		if err != nil {
			return nil, err
		}
		k := priorKey{row.Model, row.Family}
		if _, dup := p.rows[k]; dup {
			return nil, &PriorError{Line: line, Field: "model", Value: row.Model, Expect: fmt.Sprintf("each (model, family) once; model %q family %q appears twice", row.Model, row.Family)}
		}
		p.rows[k] = row
	}
}

func csvError(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &PriorError{Line: pe.Line, Field: "(row)", Expect: fmt.Sprintf("%d comma-separated fields %s (%v)", len(priorHeader), strings.Join(priorHeader, ","), pe.Err)}
	}
	return fmt.Errorf("reading prior table: %w", err)
}

func equalTrimmed(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range want {
		if strings.TrimSpace(got[i]) != want[i] {
			return false
		}
	}
	return true
}

func parsePriorRow(rec []string, line int) (Prior, error) {
	model, family := strings.TrimSpace(rec[0]), strings.TrimSpace(rec[1])
	// A leading # would read back as a comment line.
	if model == "" || len(model) > maxName || !printable(model) || strings.HasPrefix(model, "#") {
		return Prior{}, &PriorError{Line: line, Field: "model", Value: rec[0], Expect: fmt.Sprintf("a GPU model name, 1 to %d printable characters, not starting with #", maxName)}
	}
	if len(family) > maxName || !printable(family) {
		return Prior{}, &PriorError{Line: line, Field: "family", Value: rec[1], Expect: fmt.Sprintf("a job family name of at most %d printable characters, or empty for any job", maxName)}
	}
	speed, ok := parseNumber(rec[2], 1/MaxSpeed, MaxSpeed)
	if !ok {
		return Prior{}, &PriorError{Line: line, Field: "speed", Value: rec[2], Expect: fmt.Sprintf("the model's speed relative to a V100, a number from %g to %g", 1/MaxSpeed, MaxSpeed)}
	}
	sd, ok := parseNumber(rec[3], 1e-6, MaxLogSD)
	if !ok {
		return Prior{}, &PriorError{Line: line, Field: "log_sd", Value: rec[3], Expect: fmt.Sprintf("the standard deviation of log(speed), a number from 1e-06 to %g (0.3 is about +-30%%)", float64(MaxLogSD))}
	}
	return Prior{Model: model, Family: family, Speed: speed, LogSD: sd}, nil
}

func parseNumber(s string, lo, hi float64) (float64, bool) {
	x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(x) || x < lo || x > hi {
		return 0, false
	}
	return x, true
}

func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == unicode.ReplacementChar {
			return false
		}
	}
	return true
}

// WriteCSV writes the table in the format ParsePriors reads, rows sorted.
func (p *Priors) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(priorHeader); err != nil {
		return fmt.Errorf("writing prior table: %w", err)
	}
	for _, r := range p.Rows() {
		rec := []string{r.Model, r.Family, strconv.FormatFloat(r.Speed, 'g', -1, 64), strconv.FormatFloat(r.LogSD, 'g', -1, 64)}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("writing prior table: %w", err)
		}
	}
	cw.Flush()
	return cw.Error()
}

// Rows returns the table's rows sorted by model, then family.
func (p *Priors) Rows() []Prior {
	if p == nil {
		return nil
	}
	out := make([]Prior, 0, len(p.rows))
	for _, r := range p.rows {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Model != out[j].Model {
			return out[i].Model < out[j].Model
		}
		return out[i].Family < out[j].Family
	})
	return out
}

// With returns a new table: p's rows, replaced by over's where both have
// the same (model, family). Either may be nil.
func (p *Priors) With(over *Priors) *Priors {
	out := &Priors{rows: map[priorKey]Prior{}}
	for _, t := range []*Priors{p, over} {
		if t == nil {
			continue
		}
		for k, r := range t.rows {
			out.rows[k] = r
		}
	}
	return out
}

// Lookup finds the row for a GPU model and job family ("" for the model's
// row). A row matches when its Model equals model, or, failing that, when
// its Model appears in model as a whole word, case-insensitively ("V100"
// matches "Tesla V100-SXM2-16GB"); the longest such row wins.
func (p *Priors) Lookup(model, family string) (Prior, bool) {
	if p == nil {
		return Prior{}, false
	}
	if r, ok := p.rows[priorKey{model, family}]; ok {
		return r, true
	}
	var best Prior
	found := false
	for k, r := range p.rows {
		if k.family != family || !containsWord(model, k.model) {
			continue
		}
		if !found || len(k.model) > len(best.Model) || (len(k.model) == len(best.Model) && k.model < best.Model) {
			best, found = r, true
		}
	}
	return best, found
}

// containsWord reports whether word occurs in s, case-insensitively,
// bounded on both sides by a non-alphanumeric character or the ends.
func containsWord(s, word string) bool {
	ls, lw := strings.ToLower(s), strings.ToLower(word)
	if lw == "" {
		return false
	}
	for from := 0; ; {
		i := strings.Index(ls[from:], lw)
		if i < 0 {
			return false
		}
		i += from
		end := i + len(lw)
		if (i == 0 || !alnum(ls[i-1])) && (end == len(ls) || !alnum(ls[end])) {
			return true
		}
		from = i + 1
	}
}

func alnum(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b >= 0x80
}

// gavelPriorsCSV is derived from Gavel's isolated throughput table; see
// data/SOURCE.md and TestGavelPriorsDerived.
//
//go:embed data/gavel_priors.csv
var gavelPriorsCSV []byte

var gavelPriors = sync.OnceValue(func() *Priors {
	p, err := ParsePriors(bytes.NewReader(gavelPriorsCSV))
	if err != nil {
		panic("profile: embedded prior table: " + err.Error())
	}
	return p
})

// GavelPriors is the embedded prior table derived from Gavel's single-GPU
// isolated throughputs: V100, P100 and K80, per model and per job family.
func GavelPriors() *Priors { return gavelPriors() }
