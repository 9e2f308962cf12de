package profile

import (
	"bytes"
	"errors"
	"flag"
	"math"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite data/gavel_priors.csv from testdata")

// The derivation rules of the embedded prior table (data/SOURCE.md). A
// row's log_sd is the uncertainty of the typical factor, the standard error
// of the mean log ratio, not the spread of single jobs (the estimator's
// interaction and family terms model that).
const (
	// referenceLogSD is the V100 row's sd: the reference is fixed to 1 up
	// to a shift that the job factors absorb.
	referenceLogSD = 0.1
	// minModelLogSD floors a model row's sd: another cluster's GPUs,
	// drivers and frameworks differ from Gavel's. Shockwave re-measured the
	// same three models and its mean log rate per model differs from
	// Gavel's by 0.16 to 0.25.
	minModelLogSD = 0.25
	// minFamilyLogSD floors a family row's sd at the estimator's spread for
	// a family without a row: a family's speed ratio did not carry over
	// between Gavel's and Shockwave's measurements of the same GPUs (P100
	// and K80 over V100 moved by -1.4 to +1.0 in log per family), so a row
	// moves the family factor's mean but does not make it more certain.
	minFamilyLogSD = DefaultFamilyLogSD
	// singleTypeLogSD is the sd of a family row made from one job type
	// (then raised to minFamilyLogSD).
	singleTypeLogSD = DefaultInteractionLogSD
)

var gavelModelNames = map[string]string{"v100": "V100", "p100": "P100", "k80": "K80"}

// derivePriors computes the prior table from Gavel's single-GPU rows: per
// model the geometric mean of rate/V100 rate over the job types, with the
// standard error of its log; per (model, family) the same within the
// family (singleTypeLogSD when the family has one type). The V100 row is
// the reference: speed 1, referenceLogSD; V100 has no family rows (one
// would say speed 1 with the default family spread, as no row does).
func derivePriors(rows []tableRow) *Priors {
	type acc struct{ logs []float64 }
	byModel := map[string]*acc{}
	byFamily := map[famModel]*acc{}
	for _, r := range singleGPU(rows) {
		ref := r.rates["v100"]
		if ref == 0 {
			continue
		}
		for m, v := range r.rates {
			if m == "v100" {
				continue
			}
			l := math.Log(v / ref)
			if byModel[m] == nil {
				byModel[m] = &acc{}
			}
			byModel[m].logs = append(byModel[m].logs, l)
			k := famModel{r.family, m}
			if byFamily[k] == nil {
				byFamily[k] = &acc{}
			}
			byFamily[k].logs = append(byFamily[k].logs, l)
		}
	}
	round := func(x float64) float64 { v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 4, 64), 64); return v }
	p := &Priors{rows: map[priorKey]Prior{}}
	p.rows[priorKey{"V100", ""}] = Prior{Model: "V100", Speed: 1, LogSD: referenceLogSD}
	for m, a := range byModel {
		mean, se := meanSE(a.logs)
		p.rows[priorKey{gavelModelNames[m], ""}] = Prior{Model: gavelModelNames[m], Speed: round(math.Exp(mean)), LogSD: round(math.Max(se, minModelLogSD))}
	}
	for k, a := range byFamily {
		mean, sd := meanSE(a.logs)
		if len(a.logs) < 2 {
			sd = singleTypeLogSD
		}
		sd = math.Max(sd, minFamilyLogSD)
		name := gavelModelNames[k.model]
		p.rows[priorKey{name, k.family}] = Prior{Model: name, Family: k.family, Speed: round(math.Exp(mean)), LogSD: round(sd)}
	}
	return p
}

// meanSE is the mean and its standard error (sample sd / sqrt(n)).
func meanSE(xs []float64) (mean, se float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	ss := 0.0
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss/float64(len(xs)-1)) / math.Sqrt(float64(len(xs)))
}

// TestGavelPriorsDerived checks that the embedded table is exactly what the
// derivation gives from Gavel's table (run with -update to rewrite it).
func TestGavelPriorsDerived(t *testing.T) {
	want := derivePriors(loadTable(t, "testdata/gavel_isolated_throughputs.csv"))
	var buf bytes.Buffer
	if err := want.WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("data/gavel_priors.csv", buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := GavelPriors().Rows(); !reflect.DeepEqual(got, want.Rows()) {
		t.Errorf("embedded data/gavel_priors.csv differs from the derivation (run go test -run TestGavelPriorsDerived -update):\ngot  %v\nwant %v", got, want.Rows())
	}
	if n := len(GavelPriors().Rows()); n != 3+2*7 {
		t.Errorf("embedded table has %d rows, want 17 (3 models, 2 x 7 families)", n)
	}
}

func TestPriorsLookup(t *testing.T) {
	p := GavelPriors().With(mustParse(t, "model,family,speed,log_sd\nNVIDIA A100-SXM4-40GB,,2.2,0.3\nV100,,1.1,0.2\n"))
	for _, tc := range []struct {
		model, family string
		want          string // model of the row found, "" for none
		speed         float64
	}{
		{"Tesla V100-SXM2-16GB", "", "V100", 1.1}, // operator row replaces Gavel's
		{"Tesla K80", "", "K80", 0},
		{"Tesla K80", "ResNet-50", "K80", 0},
		{"NVIDIA A100-SXM4-40GB", "", "NVIDIA A100-SXM4-40GB", 2.2},
		{"NVIDIA A100-SXM4-80GB", "", "", 0},
		{"Tesla V1000", "", "", 0}, // not a whole word
		{"xk80", "", "", 0},
		{"tesla p100-pcie", "", "P100", 0}, // case-insensitive
		{"Tesla T4", "", "", 0},
	} {
		got, ok := p.Lookup(tc.model, tc.family)
		if ok != (tc.want != "") || got.Model != tc.want || (tc.speed != 0 && got.Speed != tc.speed) {
			t.Errorf("Lookup(%q, %q) = %+v, %v; want row %q (speed %g)", tc.model, tc.family, got, ok, tc.want, tc.speed)
		}
	}
}

func mustParse(t testing.TB, s string) *Priors {
	t.Helper()
	p, err := ParsePriors(strings.NewReader(s))
	if err != nil {
		t.Fatalf("ParsePriors(%q): %v", s, err)
	}
	return p
}

func TestParsePriors(t *testing.T) {
	p := mustParse(t, "# operator table\nmodel,family,speed,log_sd\n\"Tesla T4\",,0.45,0.4\n# comment\nTesla T4,ResNet-50,0.5,0.2\n")
	want := []Prior{{"Tesla T4", "", 0.45, 0.4}, {"Tesla T4", "ResNet-50", 0.5, 0.2}}
	if got := p.Rows(); !reflect.DeepEqual(got, want) {
		t.Errorf("Rows = %+v, want %+v", got, want)
	}
	for _, tc := range []struct {
		name, in, field string
		line            int
	}{
		{"empty", "", "(header)", 1},
		{"bad header", "model,speed\n", "(header)", 1},
		{"wrong header order", "family,model,speed,log_sd\n", "(header)", 1},
		{"short row", "model,family,speed,log_sd\nT4,,1\n", "(row)", 2},
		{"empty model", "model,family,speed,log_sd\n,,1,0.1\n", "model", 2},
		{"zero speed", "model,family,speed,log_sd\nT4,,0,0.1\n", "speed", 2},
		{"NaN speed", "model,family,speed,log_sd\nT4,,NaN,0.1\n", "speed", 2},
		{"huge speed", "model,family,speed,log_sd\nT4,,1e7,0.1\n", "speed", 2},
		{"zero sd", "model,family,speed,log_sd\nT4,,1,0\n", "log_sd", 2},
		{"text sd", "model,family,speed,log_sd\nT4,,1,wide\n", "log_sd", 2},
		{"duplicate", "model,family,speed,log_sd\nT4,,1,0.1\n# c\nT4,,2,0.1\n", "model", 4},
		{"control char", "model,family,speed,log_sd\nT4,a\x01b,1,0.1\n", "family", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePriors(strings.NewReader(tc.in))
			var pe *PriorError
			if !errors.As(err, &pe) {
				t.Fatalf("ParsePriors(%q) error = %v, want a *PriorError", tc.in, err)
			}
			if pe.Field != tc.field || pe.Line != tc.line || pe.Expect == "" {
				t.Errorf("error = %+v, want field %q on line %d with what is expected", pe, tc.field, tc.line)
			}
		})
	}
}

// FuzzParsePriors checks that no input panics the parser, that a success
// holds only usable rows, that the table round-trips through WriteCSV, and
// that every failure is a *PriorError that names a field.
func FuzzParsePriors(f *testing.F) {
	f.Add("model,family,speed,log_sd\nTesla T4,,0.45,0.4\n")
	f.Add("model,family,speed,log_sd\n\"a,b\",\"c\"\"d\",1e-6,10\n")
	f.Add("model,family,speed,log_sd\nx,,NaN,Inf\n")
	f.Add("# c\nmodel,family,speed,log_sd\n x ,y,1,1\nx,y,1,1\n")
	f.Add("\"unterminated")
	f.Fuzz(func(t *testing.T, in string) {
		p, err := ParsePriors(strings.NewReader(in))
		if err != nil {
			var pe *PriorError
			if errors.As(err, &pe) && (pe.Field == "" || pe.Expect == "") {
				t.Fatalf("error %#v does not name a field and what is expected", pe)
			}
			return
		}
		rows := p.Rows()
		if !sort.SliceIsSorted(rows, func(i, j int) bool {
			return rows[i].Model < rows[j].Model || rows[i].Model == rows[j].Model && rows[i].Family < rows[j].Family
		}) {
			t.Fatalf("rows not sorted: %+v", rows)
		}
		for _, r := range rows {
			if r.Model == "" || !(r.Speed >= 1/MaxSpeed && r.Speed <= MaxSpeed) || !(r.LogSD > 0 && r.LogSD <= MaxLogSD) {
				t.Fatalf("accepted an unusable row %+v from %q", r, in)
			}
		}
		var buf bytes.Buffer
		if err := p.WriteCSV(&buf); err != nil {
			t.Fatal(err)
		}
		back, err := ParsePriors(&buf)
		if err != nil || !reflect.DeepEqual(back.Rows(), rows) {
			t.Fatalf("round trip: %v -> %q -> %v (%v)", rows, buf.String(), back, err)
		}
	})
}
