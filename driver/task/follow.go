package task

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/nomad-fft/nomad-fft/allocator/report"
	"github.com/nomad-fft/nomad-fft/driver/progress"
)

// maxReadBytes bounds one poll's read of a file, so a task that floods its progress file
// cannot stall the driver; the rest is read on the next polls.
const maxReadBytes = 4 << 20

// follower turns the task's progress file (and, with a pattern, its stdout) into the
// followState, saved after every change.
type follower struct {
	mu      sync.Mutex
	st      followState
	paths   paths
	pattern *progress.Pattern
	now     func() time.Time
	logger  hclog.Logger
}

// newFollower starts following a task that starts now: lines already in its files (from an
// earlier run in the same task folder) are skipped; an earlier run's checkpoint is kept.
func newFollower(p paths, tc TaskConfig, start time.Time, logger hclog.Logger) (*follower, error) {
	f, err := openFollower(p, tc, logger)
	if err != nil {
		return nil, err
	}
	old := f.st
	if old.Checkpoint == nil {
		// A new allocation of the job: its last checkpoint's measurements are kept beside it.
		old.Checkpoint = loadCheckpointRecord(p.CheckpointRecord)
	}
	f.st = followState{Tracker: *progress.NewTracker(unixSeconds(start), tc.WarmupPoints), Checkpoint: old.Checkpoint}
	if fi, err := os.Stat(p.ProgressFile); err == nil {
		f.st.ProgressOffset = fi.Size()
	}
	f.st.LogIndex, f.st.LogOffset = lastLog(p)
	return f, f.st.save(p.StateFile)
}

// recoverFollower resumes following from the saved state (RecoverTask).
func recoverFollower(p paths, tc TaskConfig, start time.Time, logger hclog.Logger) (*follower, error) {
	f, err := openFollower(p, tc, logger)
	if err != nil {
		return nil, err
	}
	if f.st.Tracker.StartUnix == 0 {
		f.st.Tracker = *progress.NewTracker(unixSeconds(start), tc.WarmupPoints)
	}
	return f, nil
}

func openFollower(p paths, tc TaskConfig, logger hclog.Logger) (*follower, error) {
	f := &follower{paths: p, now: time.Now, logger: logger}
	if tc.ProgressPattern != "" {
		pat, err := progress.CompilePattern(tc.ProgressPattern)
		if err != nil {
			return nil, fmt.Errorf("progress.pattern: %w", err)
		}
		f.pattern = pat
	}
	st, _, err := loadFollowState(p.StateFile)
	if err != nil {
		return nil, err
	}
	f.st = st
	return f, nil
}

// poll reads what the task wrote since the last poll, and saves the state if anything was
// new. It reports whether anything was.
func (f *follower) poll() (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.readProgressFile()
	if err != nil {
		return false, err
	}
	if f.pattern != nil {
		m, err := f.readStdout()
		if err != nil {
			return false, err
		}
		n += m
	}
	if n == 0 {
		return false, nil
	}
	return true, f.st.save(f.paths.StateFile)
}

func (f *follower) readProgressFile() (int, error) {
	lines, consumed, overlong, err := lineReader{&f.st.SkipProgressLine}.read(f.paths.ProgressFile, f.st.ProgressOffset)
	if err != nil {
		return 0, err
	}
	if overlong > 0 {
		f.st.BadLines += overlong
		f.logger.Warn("skipping a progress line over the limit", "file", f.paths.ProgressFile, "limit_bytes", maxReadBytes)
	}
	for _, line := range lines {
		p, err := progress.ParseLine(line)
		if err != nil {
			// One warning per bad line is fine: a task writes a few lines a minute.
			f.st.BadLines++
			f.logger.Warn("skipping a progress line", "file", f.paths.ProgressFile, "error", err)
			continue
		}
		f.st.Tracker.Add(p)
	}
	f.st.ProgressOffset += consumed
	// Consumed bytes are news too: the offset must be saved.
	return len(lines) + overlong + boolInt(consumed > 0 && len(lines) == 0), nil
}

// readStdout follows logmon's rotated stdout files (<task>.stdout.0, .1, …).
func (f *follower) readStdout() (int, error) {
	total := 0
	for {
		path := filepath.Join(f.paths.StdoutLogDir, f.paths.StdoutLogBase+strconv.Itoa(f.st.LogIndex))
		lines, consumed, _, err := lineReader{&f.st.SkipLogLine}.read(path, f.st.LogOffset)
		if err != nil {
			return total, err
		}
		now := unixSeconds(f.now())
		for _, line := range lines {
			if done, ok := f.pattern.Match(line); ok {
				f.st.Tracker.Add(progress.Point{TimeUnix: now, Done: done})
				total++
			}
		}
		f.st.LogOffset += consumed
		next := filepath.Join(f.paths.StdoutLogDir, f.paths.StdoutLogBase+strconv.Itoa(f.st.LogIndex+1))
		if len(lines) > 0 || consumed > 0 || !exists(next) {
			return total, nil
		}
		f.st.LogIndex, f.st.LogOffset, f.st.SkipLogLine = f.st.LogIndex+1, 0, false
	}
}

// lineReader reads whole lines of one file from an offset, at most maxReadBytes a call. A
// line longer than that is skipped (it cannot be a progress line) rather than waited for
// for ever: its bytes are consumed, up to its newline, over as many calls as it takes.
type lineReader struct {
	// skipping is true while the rest of an overlong line is being consumed.
	skipping *bool
}

// read returns the whole lines of path after offset, the bytes consumed, and how many
// overlong lines it began to skip; a missing file has none. The file is opened without
// following a link: the task owns its folder, and the driver reads as root.
func (lr lineReader) read(path string, offset int64) (lines [][]byte, consumed int64, overlong int, err error) {
	fh, err := openNoFollow(path)
	if os.IsNotExist(err) {
		return nil, 0, 0, nil
	}
	if err != nil {
		return nil, 0, 0, fmt.Errorf("opening %q: %w", path, err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("reading %q: %w", path, err)
	}
	size := fi.Size() - offset
	if size <= 0 {
		return nil, 0, 0, nil
	}
	buf := make([]byte, min(size, maxReadBytes))
	n, err := fh.ReadAt(buf, offset)
	if err != nil && err != io.EOF {
		return nil, 0, 0, fmt.Errorf("reading %q at %d: %w", path, offset, err)
	}
	buf = buf[:n]
	if *lr.skipping {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			return nil, int64(n), 0, nil
		}
		*lr.skipping = false
		consumed, buf = int64(i+1), buf[i+1:]
	}
	end := bytes.LastIndexByte(buf, '\n')
	if end < 0 {
		if n == maxReadBytes && len(buf) == n {
			// A whole read without a newline: an overlong line.
			*lr.skipping = true
			return nil, int64(n), 1, nil
		}
		return nil, consumed, 0, nil
	}
	for _, l := range bytes.Split(buf[:end], []byte{'\n'}) {
		if len(bytes.TrimSpace(l)) > 0 {
			lines = append(lines, l)
		}
	}
	return lines, consumed + int64(end+1), 0, nil
}

// lastLog is where the stdout log ends now: the highest index and its size.
func lastLog(p paths) (int, int64) {
	idx := 0
	for exists(filepath.Join(p.StdoutLogDir, p.StdoutLogBase+strconv.Itoa(idx+1))) {
		idx++
	}
	if fi, err := os.Stat(filepath.Join(p.StdoutLogDir, p.StdoutLogBase+strconv.Itoa(idx))); err == nil {
		return idx, fi.Size()
	}
	return idx, 0
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// setCheckpoint records a checkpoint and saves the state, and the record beside the
// checkpoint, where the job's next allocation finds it (on another node with checkpoint_root).
func (f *follower) setCheckpoint(c checkpointRecord) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st.Checkpoint = &c
	if err := f.st.save(f.paths.StateFile); err != nil {
		return err
	}
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encoding the checkpoint record: %w", err)
	}
	return writeAtomic(f.paths.CheckpointRecord, b)
}

// loadCheckpointRecord reads the record beside a checkpoint; nil when there is none.
func loadCheckpointRecord(path string) *checkpointRecord {
	b, err := readNoFollow(path, maxMarkerBytes)
	if err != nil {
		return nil
	}
	var c checkpointRecord
	if json.Unmarshal(b, &c) != nil {
		return nil
	}
	return &c
}

// snapshot returns a copy of the state.
func (f *follower) snapshot() followState {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.st
	st.Tracker.Window = append([]progress.Point(nil), f.st.Tracker.Window...)
	return st
}

// report is what the allocator is told, and false before the run's first progress line.
func (st followState) report(g gpus) (report.Report, bool) {
	tr := &st.Tracker
	if tr.Lines == 0 {
		return report.Report{}, false
	}
	r := report.Report{Done: tr.Done(), GPUModel: g.Model, GPUs: len(g.IDs)}
	if rate, ok := tr.Rate(); ok && rate >= 0 {
		r.ThroughputPerSecond = report.Float(rate)
	}
	if s, ok := tr.RestartSeconds(); ok {
		r.RestartSeconds = report.Float(s)
	}
	if c := st.Checkpoint; c != nil {
		r.CheckpointBytes, r.CheckpointSeconds = report.Float(c.SizeBytes), report.Float(c.Seconds)
	}
	return r, true
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
