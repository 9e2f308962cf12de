package progress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
)

// Point is one progress line: at TimeUnix (seconds since 1970) the task had done Done work
// units in total.
type Point struct {
	TimeUnix float64 `json:"t"`
	Done     float64 `json:"done"`
}

// LineFormat is the fix every rejected line is told.
const LineFormat = `a progress line is JSON {"t": <unix seconds>, "done": <work units>}, both finite and >= 0`

// ParseLine reads one progress line. Unknown fields are ignored, so that a task may log more
// (phase, loss); "t" and "done" are required. Errors name the field.
func ParseLine(line []byte) (Point, error) {
	line = bytes.TrimSpace(line)
	var v struct {
		T    *float64 `json:"t"`
		Done *float64 `json:"done"`
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	err := dec.Decode(&v)
	if err == nil && dec.More() {
		err = errors.New("text after the object")
	}
	if err != nil {
		return Point{}, fmt.Errorf("line %q: %v: %s", line, err, LineFormat)
	}
	for _, f := range []struct {
		name string
		v    *float64
	}{{"t", v.T}, {"done", v.Done}} {
		if f.v == nil {
			return Point{}, fmt.Errorf("line %q has no field %q: %s", line, f.name, LineFormat)
		}
		if !(*f.v >= 0) || math.IsInf(*f.v, 0) {
			return Point{}, fmt.Errorf("line %q: %s = %g: %s", line, f.name, *f.v, LineFormat)
		}
	}
	return Point{TimeUnix: *v.T, Done: *v.Done}, nil
}

// Pattern reads the work done from a line of the task's output, the fallback for tasks that
// only print their progress.
type Pattern struct{ re *regexp.Regexp }

// CompilePattern compiles expr, a Go regexp with a named group "done" (for example
// `step (?P<done>\d+)`).
func CompilePattern(expr string) (*Pattern, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("compiling %q: %w", expr, err)
	}
	if re.SubexpIndex("done") < 0 {
		return nil, fmt.Errorf("pattern %q has no named group \"done\": write it as (?P<done>[0-9.]+)", expr)
	}
	return &Pattern{re: re}, nil
}

// Match returns the work done a line reports, and false when it reports none.
func (p *Pattern) Match(line []byte) (float64, bool) {
	m := p.re.FindSubmatch(line)
	if m == nil {
		return 0, false
	}
	done, err := strconv.ParseFloat(string(m[p.re.SubexpIndex("done")]), 64)
	if err != nil || !(done >= 0) || math.IsInf(done, 0) {
		return 0, false
	}
	return done, true
}
