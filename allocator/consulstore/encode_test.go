package consulstore

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// encodeChunk writes what encodeValue (json.Marshal) writes, byte for byte: for records a
// loop keeps after rounds (small chunks and ones gzipped), IDs JSON escapes, and none.
func TestEncodeChunkIsMarshal(t *testing.T) {
	h := &loop.Harness{Models: []allocator.Model{{Name: "V100", GPUs: 8}, {Name: "A100", GPUs: 8}}, Jobs: map[string]*loop.Job{}}
	for i := range 3000 {
		j := loop.NewJob(fmt.Sprintf("job-%04d", i)).Work(float64(20+i%37*5)).TP("V100", 1).TP("A100", 2).Obj()
		if i%5 == 0 {
			j = loop.NewJob(fmt.Sprintf("ten<ant>&\"job\"-é-%04d", i)).Work(7).Tenant("u&<>", 2).TP("A100", 1.5).Obj()
		}
		h.Jobs[j.ID] = &j
	}
	st := loop.NewMemStore(false)
	l := loop.New(h, h, st)
	for range 3 {
		if _, err := l.RunRound(context.Background(), loop.TriggerManual, nil); err != nil {
			t.Fatal(err)
		}
	}
	all := st.Stored().Jobs
	small := map[string]loop.JobRecord{}
	for id, r := range all {
		if len(small) == 7 {
			break
		}
		small[id] = r
	}
	for name, chunk := range map[string]map[string]loop.JobRecord{"every record (gzipped)": all, "a few": small, "empty": {}, "nil": nil} {
		want, err := encodeValue(chunk)
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeChunk(chunk)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: encodeChunk wrote %d bytes, json.Marshal %d; they differ", name, len(got), len(want))
		}
	}
	// Record encodes each round in the last one's memory: a scratch used before, for a larger
	// value or a smaller, gzipped or not, writes the same bytes.
	var sc scratch
	for _, name := range []string{"every record (gzipped)", "a few", "every record (gzipped)", "nil", "every record (gzipped)"} {
		chunk := map[string]map[string]loop.JobRecord{"every record (gzipped)": all, "a few": small, "nil": nil}[name]
		want, err := encodeValue(chunk)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sc.chunk(chunk)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s in a used scratch: %d bytes, json.Marshal %d; they differ", name, len(got), len(want))
		}
	}
	if b, _ := encodeValue(all); len(b) < 2 || b[0] != 0x1f {
		t.Errorf("the whole ledger was not gzipped: the test covers no gzipped chunk")
	}
}

// Values are gzipped at the fast level, and at gzip's default when the fast one is over what a
// transaction carries; either way they decode to the JSON.
func TestCompressedLevels(t *testing.T) {
	gz := func(raw []byte, level int) []byte {
		var buf bytes.Buffer
		zw, err := gzip.NewWriterLevel(&buf, level)
		if err != nil {
			t.Fatal(err)
		}
		zw.Write(raw)
		zw.Close()
		return buf.Bytes()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	// Random hex digits gzip to about half: over the limit at any level, and the levels differ.
	noise := make([]byte, 3*maxTxnBytes)
	for i := range noise {
		noise[i] = "0123456789abcdef"[rng.IntN(16)]
	}
	if bytes.Equal(gz(noise, fastLevel), gz(noise, gzip.DefaultCompression)) {
		t.Fatal("the levels write the same bytes: the test cannot tell them apart")
	}
	text := bytes.Repeat([]byte(`{"id":"default/load-00001","rho":0.25},`), 4000) // compressible, over compressAbove
	var sc scratch
	for _, tc := range []struct {
		name  string
		raw   []byte
		level int
	}{{"fits at the fast level", text, fastLevel}, {"over the limit", noise, gzip.DefaultCompression}, {"fits again", text, fastLevel}} {
		sc.raw.Reset()
		sc.raw.Write(tc.raw)
		got, err := sc.compressed()
		if err != nil {
			t.Fatal(err)
		}
		if want := gz(tc.raw, tc.level); !bytes.Equal(got, want) {
			t.Errorf("%s: not gzip level %d's bytes (%d, want %d)", tc.name, tc.level, len(got), len(want))
		}
		zr, err := gzip.NewReader(bytes.NewReader(got))
		if err != nil {
			t.Fatal(err)
		}
		back, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(back, tc.raw) {
			t.Errorf("%s: does not decompress to the value (%v)", tc.name, err)
		}
	}
}

// roundPrepared writes the record round writes, read back: the same JSON, whether it fits
// unzipped, is gzipped in members around the prepared job lines, or is over what a
// transaction carries with its options (then both leave them out) or without them (then both
// fail).
func TestRoundPreparedIsRound(t *testing.T) {
	rounds := func(jobs int) []*loop.RoundRecord {
		st := loop.NewMemStore(true)
		h := loop.LoadHarness(jobs)
		l := loop.New(h, h, st)
		for range 2 {
			if _, err := l.RunRound(context.Background(), loop.TriggerManual, nil); err != nil {
				t.Fatal(err)
			}
		}
		return st.Records()
	}
	big, small := rounds(2000), rounds(3)
	rng := rand.New(rand.NewPCG(3, 4))
	noise := func(digits int) string { // incompressible: about half a byte a digit gzipped
		b := make([]byte, digits)
		for d := range b {
			b[d] = "0123456789abcdef"[rng.IntN(16)]
		}
		return string(b)
	}
	// noisy is the 2,000-job record with that many hex digits in each option, and in an
	// invalid job's error (after the job lines in the record's JSON).
	noisy := func(option, invalid int) *loop.RoundRecord {
		rec := *big[1]
		rec.Jobs = slices.Clone(rec.Jobs)
		for i := range rec.Jobs {
			rec.Jobs[i].Options = slices.Clone(rec.Jobs[i].Options)
			for k := range rec.Jobs[i].Options {
				rec.Jobs[i].Options[k].Model = noise(option)
			}
		}
		rec.Invalid = []loop.Invalid{{ID: "default/bad", Err: noise(invalid)}}
		return &rec
	}
	// The 2,000 job lines 14 times over: over the limit at the fast level, within it at gzip's
	// default, as the e2e benchmark's records at 20,000 jobs.
	denser := *big[1]
	denser.Jobs = nil
	for k := range 14 {
		for _, l := range big[1].Jobs {
			l.ID = fmt.Sprintf("%s-%02d", l.ID, k)
			denser.Jobs = append(denser.Jobs, l)
		}
	}
	tricky := *small[1]
	tricky.TriggerJobs = []string{`"jobs":null`, `\"jobs\":null`, `}]"jobs":null`}
	tricky.Assignment = map[string]string{`"jobs":null,`: `{"jobs":null}`}
	for _, tc := range []struct {
		name           string
		rec            *loop.RoundRecord
		zipped, lean   bool
		linesFitAlone  bool // the job lines with their options are within the limit
		overWithoutAll bool // over the limit even without options: both fail
	}{
		{name: "2,000 jobs", rec: big[1], zipped: true, linesFitAlone: true},
		{name: "3 jobs", rec: small[1], linesFitAlone: true},
		{name: "the cold round", rec: big[0], zipped: true, linesFitAlone: true},
		{name: "strings that look like the jobs key", rec: &tricky, linesFitAlone: true},
		{name: "over the limit at the fast level", rec: &denser, zipped: true, linesFitAlone: true},
		{name: "lines over the limit with options", rec: noisy(200, 0), zipped: true, lean: true},
		{name: "lines within, the record over at the fast level", rec: noisy(50, 300_000), zipped: true, linesFitAlone: true},
		{name: "lines within, the record over with options", rec: noisy(50, 400_000), zipped: true, lean: true, linesFitAlone: true},
		{name: "over the limit without options", rec: noisy(0, 800_000), overWithoutAll: true, linesFitAlone: true},
		{name: "no job lines", rec: &loop.RoundRecord{Round: 7}, linesFitAlone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := encodeRound(tc.rec)
			if (err != nil) != tc.overWithoutAll {
				t.Fatalf("round: %v", err)
			}
			var sc scratch
			for pass := range 2 { // a scratch used before writes the same
				if err := sc.prepareLines(tc.rec.Jobs); err != nil {
					t.Fatal(err)
				}
				if sc.linesLean == tc.linesFitAlone {
					t.Fatalf("pass %d: the job lines left out their options: %v", pass, sc.linesLean)
				}
				got, err := sc.roundPrepared(tc.rec)
				if tc.overWithoutAll {
					if err == nil || !strings.Contains(err.Error(), "without options, over the") {
						t.Fatalf("pass %d: %v, want the record refused as over the limit without options", pass, err)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if zipped := len(got) > 1 && got[0] == 0x1f; zipped != tc.zipped {
					t.Fatalf("pass %d: gzipped %v, want %v", pass, zipped, tc.zipped)
				}
				raw := unzipped(t, got)
				if !bytes.Equal(raw, unzipped(t, want)) {
					t.Errorf("pass %d: the record reads back as other JSON than round's (%d bytes, round's %d)", pass, len(got), len(want))
				}
				if lean := bytes.Contains(raw, []byte(`"options_omitted":true`)); lean != tc.lean {
					t.Errorf("pass %d: options omitted %v, want %v", pass, lean, tc.lean)
				}
			}
		})
	}
	var sc scratch
	sc.encode(&denser)
	if err := appendGzip(&sc.zw, fastLevel, &sc.zipped, sc.raw.Bytes()); err != nil || sc.zipped.Len() <= maxTxnBytes {
		t.Errorf("%d job lines: %d bytes at the fast level, within the limit: the test covers no such record (%v)", len(denser.Jobs), sc.zipped.Len(), err)
	}
}

// nullJobsAt finds the record's own "jobs" key, not one in a string or a deeper object.
func TestNullJobsAt(t *testing.T) {
	for _, tc := range []struct {
		json  string
		found bool // at the last "jobs":null
	}{
		{`{"jobs":null}`, true},
		{`{"a":"\"jobs\":null","jobs":null}`, true},
		{`{"a":{"jobs":null},"jobs":null}`, true},
		{`{"a":["x",{"jobs":null}],"b":"\\","jobs":null}`, true},
		{`{"a":{"jobs":null}}`, false},
		{`{"jobs":[]}`, false},
		{`"jobs":null`, false},
	} {
		want := -1
		if tc.found {
			want = strings.LastIndex(tc.json, `"jobs":null`) + len(`"jobs":`)
		}
		if got := nullJobsAt([]byte(tc.json)); got != want {
			t.Errorf("%s: %d, want %d", tc.json, got, want)
		}
	}
}

// unzipped is a value's JSON (valueJSON).
func unzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	raw, err := valueJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
