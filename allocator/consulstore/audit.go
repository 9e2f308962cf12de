package consulstore

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// The round record's job lines are most of its JSON (13.7 MB at 20,000 jobs, each line with
// every model's cost terms): they are written here field by field, byte for byte as
// encoding/json writes them (TestAuditLinesAreMarshal), without its reflection. The rarer
// nested values (restart prices, throughputs, hosts, ...) still go through encoding/json, and
// a line it would write its own way (a string to escape, a value it refuses) is all its.

// recordJSON sets sc.raw to rec's JSON as json.Marshal writes it.
func (sc *scratch) recordJSON(rec *loop.RoundRecord) error {
	head := *rec
	head.Jobs = nil
	sc.raw.Reset()
	if err := sc.encode(&head); err != nil {
		return err
	}
	if rec.Jobs == nil {
		return nil
	}
	// The record's fields come in declaration order, and none before Jobs can hold
	// `"jobs":null` unescaped (strings, and maps of strings), so the first is its Jobs.
	raw := sc.raw.Bytes()
	at := bytes.Index(raw, []byte(`"jobs":null`))
	if at < 0 {
		return sc.encode(rec) // not reached: the field has no omitempty
	}
	at += len(`"jobs":`)
	sc.tail = append(sc.tail[:0], raw[at+len("null"):]...)
	sc.raw.Truncate(at)
	b := append(sc.lines[:0], '[')
	for i := range rec.Jobs {
		if i > 0 {
			b = append(b, ',')
		}
		mark := len(b)
		var ok bool
		if b, ok = appendAudit(b, &rec.Jobs[i]); !ok {
			line, err := json.Marshal(&rec.Jobs[i])
			if err != nil {
				return err
			}
			b = append(b[:mark], line...)
		}
	}
	b = append(b, ']')
	sc.raw.Write(b)
	sc.raw.Write(sc.tail)
	sc.lines = b
	return nil
}

// appendAudit appends a's JSON; ok is false when encoding/json must write it.
func appendAudit(b []byte, a *loop.JobAudit) (_ []byte, ok bool) {
	str := func(key, s string, always bool) {
		if ok && (always || s != "") {
			b = append(b, key...)
			b, ok = appendString(b, s)
		}
	}
	num := func(key string, f float64, always bool) {
		if ok && (always || f != 0) {
			b = append(b, key...)
			b, ok = appendFloat(b, f)
		}
	}
	other := func(key string, v any, present bool) {
		if ok && present {
			raw, err := json.Marshal(v)
			if err != nil {
				ok = false
				return
			}
			b = append(b, key...)
			b = append(b, raw...)
		}
	}
	ok = true
	b = append(b, '{')
	str(`"id":`, a.ID, true)
	str(`,"model":`, a.Model, false)
	str(`,"reason_code":`, string(a.ReasonCode), false)
	str(`,"reason":`, a.Reason, false)
	str(`,"action":`, string(a.Action), true)
	num(`,"rho_before":`, a.RhoBefore, true)
	num(`,"rho_after":`, a.RhoAfter, true)
	if ok {
		b = append(b, `,"chosen":`...)
		b, ok = appendTerms(b, &a.Chosen)
	}
	if ok && len(a.Options) > 0 {
		b = append(b, `,"options":[`...)
		for i := range a.Options {
			if i > 0 {
				b = append(b, ',')
			}
			if b, ok = appendTerms(b, &a.Options[i]); !ok {
				break
			}
		}
		b = append(b, ']')
	}
	str(`,"user":`, a.User, false)
	num(`,"weight":`, a.Weight, false)
	if ok && a.GPUs != 0 {
		b = append(b, `,"gpus":`...)
		b = strconv.AppendInt(b, int64(a.GPUs), 10)
	}
	other(`,"restart":`, a.Restart, a.Restart != nil)
	str(`,"tenant":`, a.Tenant, false)
	str(`,"override":`, a.Override, false)
	other(`,"throughput":`, a.Throughput, len(a.Throughput) > 0)
	other(`,"learn":`, a.Learn, a.Learn != nil)
	other(`,"mismatches":`, a.Mismatches, len(a.Mismatches) > 0)
	other(`,"hosts":`, a.Hosts, len(a.Hosts) > 0)
	str(`,"refused":`, a.Refused, false)
	str(`,"distrusted":`, a.Distrusted, false)
	return append(b, '}'), ok
}

// appendTerms appends t's JSON; ok is false when encoding/json must write it.
func appendTerms(b []byte, t *allocator.Terms) (_ []byte, ok bool) {
	b = append(b, `{"model":`...)
	if b, ok = appendString(b, t.Model); !ok {
		return b, false
	}
	for _, f := range []struct {
		key string
		v   float64
	}{{`,"throughput":`, t.Throughput}, {`,"wait":`, t.Wait}, {`,"volume":`, t.Volume},
		{`,"switch":`, t.Switch}, {`,"credit":`, t.Credit}, {`,"cost":`, t.Cost}} {
		b = append(b, f.key...)
		if b, ok = appendFloat(b, f.v); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// appendString appends s quoted when no byte of it needs escaping (printable ASCII other
// than the quote, the backslash and the HTML characters encoding/json escapes); ok is false
// otherwise.
func appendString(b []byte, s string) (_ []byte, ok bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return b, false
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), true
}

// appendFloat appends f as encoding/json writes a float64 (the shortest form, 'e' notation
// below 1e-6 and from 1e21, its exponent without a leading zero); ok is false for NaN and
// the infinities, which it refuses.
func appendFloat(b []byte, f float64) (_ []byte, ok bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}
