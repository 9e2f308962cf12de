package consulstore

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
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
