package task

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	pstructs "github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/nomad-fft/nomad-fft/driver/progress"
)

// taskState is what StartTask hands Nomad in the task handle. Nomad stores it once and
// never updates it, so it holds only what does not change; what does lives in followState.
type taskState struct {
	ReattachConfig *pstructs.ReattachConfig
	Pid            int
	StartedAt      time.Time
	Task           TaskConfig
	Paths          paths
	GPUModel       string
	GPUIDs         []string
}

// followState is the driver's mutable record of one task, in the task's private folder so
// that a new plugin process (RecoverTask) resumes where the last one stopped: no progress
// line is counted twice or lost.
type followState struct {
	// ProgressOffset is how many bytes of the progress file were consumed (whole lines).
	ProgressOffset int64 `json:"progress_offset"`
	// LogIndex and LogOffset locate the stdout pattern's reading: the rotated log file's
	// index and the bytes of it consumed.
	LogIndex  int   `json:"log_index"`
	LogOffset int64 `json:"log_offset"`
	// BadLines counts progress lines that did not parse (or were over maxReadBytes).
	BadLines int `json:"bad_lines"`
	// SkipProgressLine and SkipLogLine are true while the rest of an overlong line of the
	// progress file or the stdout log is being skipped.
	SkipProgressLine bool             `json:"skip_progress_line,omitempty"`
	SkipLogLine      bool             `json:"skip_log_line,omitempty"`
	Tracker          progress.Tracker `json:"tracker"`
	// Checkpoint is the latest checkpoint the driver saw written.
	Checkpoint *checkpointRecord `json:"checkpoint,omitempty"`
}

// checkpointRecord is one checkpoint: its step and size as the task's marker says, and how
// long it took from the driver's request (signal) to the marker.
type checkpointRecord struct {
	Step      float64   `json:"step"`
	SizeBytes float64   `json:"bytes"`
	Seconds   float64   `json:"seconds"`
	At        time.Time `json:"at"`
}

// maxStateBytes bounds the state file read back: its rate window is 64 points.
const maxStateBytes = 1 << 20

// loadFollowState reads the state file; a missing one is a fresh state.
func loadFollowState(path string) (followState, bool, error) {
	b, err := readNoFollow(path, maxStateBytes)
	if os.IsNotExist(err) {
		return followState{}, false, nil
	}
	if err != nil {
		return followState{}, false, fmt.Errorf("reading driver state %q: %w", path, err)
	}
	var st followState
	if err := json.Unmarshal(b, &st); err != nil {
		return followState{}, false, fmt.Errorf("decoding driver state %q: %w", path, err)
	}
	return st, true, nil
}

// save writes the state atomically (a crash leaves the old or the new state, not half).
func (st *followState) save(path string) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encoding driver state: %w", err)
	}
	return writeAtomic(path, b)
}

// taskStore holds the running tasks by task ID.
type taskStore struct {
	mu    sync.RWMutex
	tasks map[string]*taskHandle
}

func newTaskStore() *taskStore { return &taskStore{tasks: map[string]*taskHandle{}} }

func (s *taskStore) Set(id string, h *taskHandle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tasks[id] = h
}

func (s *taskStore) Get(id string) (*taskHandle, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h, ok := s.tasks[id]
	return h, ok
}

func (s *taskStore) Delete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tasks, id)
}

// ensureDir creates the folder of path.
func ensureDir(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating %q: %w", filepath.Dir(path), err)
	}
	return nil
}
