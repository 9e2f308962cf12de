package task

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TestOverlongProgressLineIsSkipped: a progress line longer than one read (maxReadBytes)
// is skipped as a bad line, and the lines after it are read; it once stalled the follower
// for ever (no newline in a whole read, so nothing was consumed).
func TestOverlongProgressLineIsSkipped(t *testing.T) {
	dir := t.TempDir()
	p := paths{ProgressFile: filepath.Join(dir, "fft-progress.jsonl"), StateFile: filepath.Join(dir, "state.json"),
		StdoutLogDir: dir, StdoutLogBase: "train.stdout.", CheckpointRecord: filepath.Join(dir, "rec.json")}
	f, err := newFollower(p, TaskConfig{WarmupPoints: 0}, time.Now(), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.WriteString(`{"t": 1, "done": 1}` + "\n")
	b.WriteString(`{"t": 2, "done": "`)
	b.Write(bytes.Repeat([]byte("x"), maxReadBytes+maxReadBytes/2))
	b.WriteString("\"}\n")
	b.WriteString(`{"t": 3, "done": 3}` + "\n")
	if err := os.WriteFile(p.ProgressFile, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if _, err := f.poll(); err != nil {
			t.Fatal(err)
		}
	}
	st := f.snapshot()
	if st.Tracker.Done() != 3 || st.BadLines != 1 || st.ProgressOffset != int64(b.Len()) {
		t.Errorf("after the polls: done %g, %d bad lines, offset %d; want done 3, 1 bad line, offset %d",
			st.Tracker.Done(), st.BadLines, st.ProgressOffset, b.Len())
	}
	// A line still being written (no newline yet) is waited for, not skipped.
	fh, err := os.OpenFile(p.ProgressFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	_, _ = fh.WriteString(`{"t": 4, "do`)
	_, _ = f.poll()
	_, _ = fh.WriteString(`ne": 4}` + "\n")
	_, _ = f.poll()
	if st := f.snapshot(); st.Tracker.Done() != 4 || st.BadLines != 1 {
		t.Errorf("a line written in two parts: done %g, %d bad lines; want 4 and 1", st.Tracker.Done(), st.BadLines)
	}
}
