package task

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
)

// marker is what the task writes to FFT_CHECKPOINT_MARKER once a checkpoint is complete.
type marker struct {
	Step  float64 `json:"step"`
	Bytes float64 `json:"bytes"`
}

// parseMarker reads a marker; fields must be finite and >= 0. Errors name the field.
func parseMarker(b []byte) (marker, error) {
	var m marker
	if err := json.Unmarshal(bytes.TrimSpace(b), &m); err != nil {
		return marker{}, fmt.Errorf("checkpoint marker %q: %v: want JSON {\"step\": N, \"bytes\": B}", b, err)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"step", m.Step}, {"bytes", m.Bytes}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			return marker{}, fmt.Errorf("checkpoint marker: %s = %g: want a finite number >= 0", f.name, f.v)
		}
	}
	return m, nil
}

// markerSnapshot tells one version of the marker file from another without trusting clocks
// (the marker may be on a shared file system whose clock differs).
type markerSnapshot struct {
	exists  bool
	modTime time.Time
	content string
}

// maxMarkerBytes bounds the marker read: two numbers in JSON.
const maxMarkerBytes = 64 << 10

// snapshotMarker reads the marker without following a link (the task owns its folder and
// the driver reads as root), nor reading more than maxMarkerBytes.
func snapshotMarker(path string) markerSnapshot {
	fh, err := openNoFollow(path)
	if err != nil {
		return markerSnapshot{}
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxMarkerBytes {
		return markerSnapshot{}
	}
	b, err := io.ReadAll(io.LimitReader(fh, maxMarkerBytes))
	if err != nil {
		return markerSnapshot{}
	}
	return markerSnapshot{exists: true, modTime: fi.ModTime(), content: string(b)}
}

func (s markerSnapshot) newerThan(old markerSnapshot) bool {
	return s.exists && (!old.exists || !s.modTime.Equal(old.modTime) || s.content != old.content)
}

// markerPoll is how often the driver looks at the marker while it waits.
const markerPoll = 50 * time.Millisecond

// awaitMarker waits until the marker differs from before and parses, no process is left
// (alive reports false) or ctx ends. It returns the marker and when it was seen.
func awaitMarker(ctx context.Context, path string, before markerSnapshot, alive func() bool) (marker, time.Time, bool) {
	t := time.NewTicker(markerPoll)
	defer t.Stop()
	for {
		// Looked at before alive: a task may write its marker and exit between two polls.
		stillAlive := alive()
		if s := snapshotMarker(path); s.newerThan(before) {
			if m, err := parseMarker([]byte(s.content)); err == nil {
				return m, time.Now(), true
			}
		}
		if !stillAlive {
			return marker{}, time.Time{}, false
		}
		select {
		case <-ctx.Done():
			return marker{}, time.Time{}, false
		case <-t.C:
		}
	}
}

// checkpointEvent is the task event's message and annotations for a checkpoint.
func checkpointEvent(c checkpointRecord, reason string) (string, map[string]string) {
	msg := fmt.Sprintf("Checkpoint saved: %s in %s at step %s", formatBytes(c.SizeBytes),
		formatSeconds(c.Seconds), strconv.FormatFloat(c.Step, 'f', -1, 64))
	return msg, map[string]string{
		"checkpoint_bytes":   strconv.FormatFloat(c.SizeBytes, 'f', -1, 64),
		"checkpoint_seconds": strconv.FormatFloat(c.Seconds, 'f', 3, 64),
		"step":               strconv.FormatFloat(c.Step, 'f', -1, 64),
		"reason":             reason,
	}
}

// noCheckpointEvent says no checkpoint came within the budget.
func noCheckpointEvent(budget time.Duration, reason string) (string, map[string]string) {
	return fmt.Sprintf("No checkpoint written within %s", formatSeconds(budget.Seconds())),
		map[string]string{"budget_seconds": strconv.FormatFloat(budget.Seconds(), 'f', 3, 64), "reason": reason}
}

// formatBytes writes a size as "3.2 GB" (decimal units, as `du --si`).
func formatBytes(b float64) string {
	units := []string{"B", "kB", "MB", "GB", "TB", "PB"}
	i := 0
	for b >= 1000 && i < len(units)-1 {
		b /= 1000
		i++
	}
	if i == 0 {
		return strconv.FormatFloat(b, 'f', 0, 64) + " B"
	}
	return strconv.FormatFloat(b, 'f', 1, 64) + " " + units[i]
}

func formatSeconds(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(10 * time.Millisecond).String()
}
