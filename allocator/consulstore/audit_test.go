package consulstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// fill sets every field of v (a pointer) to a value that is not zero, recursively, strings
// to s: a field added to loop.JobAudit that appendAudit does not write fails the test.
func fill(v reflect.Value, s string, f float64) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), s, f)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), s, f)
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		fill(v.Index(0), s, f)
		fill(v.Index(1), s, -f)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, s, f)
		fill(e, s, f)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString(s)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(f)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(3)
	case reflect.Uint, reflect.Uint64, reflect.Uint32:
		v.SetUint(3)
	case reflect.Bool:
		v.SetBool(true)
	}
}

// Job lines are written as json.Marshal writes them: every field set, none, strings encoding/json
// escapes, floats of every form; what it refuses is refused.
func TestAuditLinesAreMarshal(t *testing.T) {
	var lines []loop.JobAudit
	for _, s := range []string{"default/train-7", "ten<ant>&\"job\"-é", "a\u2028b", "\x01\xff"} {
		for _, f := range []float64{0.25, 1e-7, -3e21, 123456789.125, math.Copysign(0, -1)} {
			var a loop.JobAudit
			fill(reflect.ValueOf(&a).Elem(), s, f)
			lines = append(lines, a)
		}
	}
	lines = append(lines, loop.JobAudit{}, loop.JobAudit{ID: "x", Options: []allocator.Terms{}})
	rng := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		f := func() float64 {
			switch rng.IntN(5) {
			case 0:
				return 0
			case 1:
				return math.Float64frombits(rng.Uint64()) // any float, NaN and infinities too
			case 2:
				return rng.NormFloat64() * 1e-8
			default:
				return rng.NormFloat64() * math.Pow(10, float64(rng.IntN(30)-8))
			}
		}
		terms := func() allocator.Terms {
			return allocator.Terms{Model: "A100", Throughput: f(), Wait: f(), Volume: f(), Switch: f(), Credit: f(), Cost: f()}
		}
		a := loop.JobAudit{ID: fmt.Sprintf("default/j-%d", rng.IntN(1e6)), Action: loop.ActionKeep, RhoBefore: f(), RhoAfter: f(),
			Chosen: terms(), Weight: f(), GPUs: rng.IntN(3)}
		for range rng.IntN(3) {
			a.Options = append(a.Options, terms())
		}
		lines = append(lines, a)
	}
	refused := 0
	for i := range lines {
		want, wantErr := json.Marshal(&lines[i])
		got, ok := appendAudit(nil, &lines[i])
		switch {
		case wantErr != nil:
			refused++
			if ok {
				t.Errorf("line %d: encoding/json refuses it (%v), appendAudit wrote %s", i, wantErr, got)
			}
		case ok && !bytes.Equal(got, want):
			t.Errorf("line %d:\n got %s\nwant %s", i, got, want)
		}
	}
	if refused == 0 {
		t.Error("no line had a float encoding/json refuses: the test covers no refusal")
	}
	var plain loop.JobAudit
	fill(reflect.ValueOf(&plain).Elem(), "plain", 0.5)
	if _, ok := appendAudit(nil, &plain); !ok {
		t.Error("a line of plain strings and floats was left to encoding/json")
	}
}

// A round record is written as json.Marshal writes it: a real one, and with no job lines.
func TestRecordIsMarshal(t *testing.T) {
	h := &loop.Harness{Models: []allocator.Model{{Name: "V100", GPUs: 8}, {Name: "A100", GPUs: 8}}, Jobs: map[string]*loop.Job{}}
	for i := range 500 {
		j := loop.NewJob(fmt.Sprintf("job-%04d", i)).Work(float64(20+i%37*5)).TP("V100", 1).TP("A100", 2).Obj()
		if i%50 == 0 {
			j = loop.NewJob(fmt.Sprintf("ten<ant>&\"jobs\":null-%04d", i)).Work(7).Tenant("u&<>", 2).TP("A100", 1.5).Obj()
		}
		h.Jobs[j.ID] = &j
	}
	st := loop.NewMemStore(true)
	l := loop.New(h, h, st)
	for range 3 {
		if _, err := l.RunRound(context.Background(), loop.TriggerManual, nil); err != nil {
			t.Fatal(err)
		}
	}
	recs := st.Records()
	real := *recs[len(recs)-1]
	none, empty := real, real
	none.Jobs, empty.Jobs = nil, []loop.JobAudit{}
	var sc scratch
	for name, rec := range map[string]*loop.RoundRecord{"real": &real, "no lines": &none, "empty lines": &empty, "real again": &real} {
		want, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		if err := sc.recordJSON(rec); err != nil {
			t.Fatal(err)
		}
		if got := sc.raw.Bytes(); !bytes.Equal(got, want) {
			t.Errorf("%s: recordJSON wrote %d bytes, json.Marshal %d; they differ", name, len(got), len(want))
		}
	}
	if len(real.Jobs) < 500 {
		t.Fatalf("the record has %d job lines", len(real.Jobs))
	}
}
