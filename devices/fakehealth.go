package devices

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
)

const (
	// FakeHealthPoll is how often a fake source reads its health control file.
	FakeHealthPoll = 250 * time.Millisecond
	// FakeHealthXID is the XID a GPU listed in the control file reports: 79, "GPU has fallen
	// off the bus", a critical XID that is not the application's.
	FakeHealthXID = 79
	// maxFakeHealthBytes bounds the control file read (a few thousand UUIDs).
	maxFakeHealthBytes = 1 << 18
)

// ParseFakeHealth parses a fake health control file: one GPU UUID a line ("GPU-" and a UUID,
// as `nvidia-smi -L` and Nomad's device instance IDs show them); blank lines and lines
// starting with # are ignored. It returns the set of UUIDs listed.
func ParseFakeHealth(text string) (map[string]bool, error) {
	if len(text) > maxFakeHealthBytes {
		return nil, fmt.Errorf("health file: %d bytes, at most %d: list only the GPUs to report unhealthy", len(text), maxFakeHealthBytes)
	}
	out := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 4096), maxFakeHealthBytes+1)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rest, ok := strings.CutPrefix(line, "GPU-")
		if _, err := uuid.Parse(rest); !ok || err != nil || len(rest) != 36 {
			return nil, fmt.Errorf("health file line %d: %q is not a GPU UUID: write one UUID a line as Nomad shows the device instance, for example \"GPU-6f1c…\" (36 characters after \"GPU-\")", n, line)
		}
		out[line] = true
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("health file: %w", err)
	}
	return out, nil
}

// fakeHealthSource is a fake [NVML] whose GPUs turn unhealthy while a control file lists them:
// each newly listed GPU gets an NVML critical XID event (InjectEvent), so the plugin's own
// event watcher marks it unhealthy; a GPU that leaves the list recovers, as after a GPU reset.
type fakeHealthSource struct {
	*NVML
	fake   *Fake
	path   string
	logger hclog.Logger
	stop   chan struct{}
	done   chan struct{}
	// flipped are the GPUs the file made unhealthy; lastErr the last parse error logged.
	flipped map[string]bool
	lastErr string
}

var (
	_ Source   = (*fakeHealthSource)(nil)
	_ Notifier = (*fakeHealthSource)(nil)
)

// NewFakeSourceWithHealthFile is NewFakeSource whose GPUs are reported unhealthy while the file
// at path lists them (see ParseFakeHealth); a missing file lists none. The file is read every
// FakeHealthPoll; a file that does not parse is logged and changes nothing.
func NewFakeSourceWithHealthFile(spec []FakeGPU, path string, logger hclog.Logger) (Source, *Fake, error) {
	src, f, err := NewFakeSource(spec, logger)
	if err != nil {
		return nil, nil, err
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	s := &fakeHealthSource{NVML: src, fake: f, path: path, logger: logger.Named("health_file"),
		stop: make(chan struct{}), done: make(chan struct{}), flipped: map[string]bool{}}
	go s.run()
	return s, f, nil
}

func (s *fakeHealthSource) run() {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		case <-time.After(FakeHealthPoll):
		}
		listed, err := s.read()
		if err != nil {
			if err.Error() != s.lastErr {
				s.logger.Error("ignoring the health file until it is fixed", "path", s.path, "error", err)
				s.lastErr = err.Error()
			}
			continue
		}
		s.lastErr = ""
		s.apply(listed)
	}
}

func (s *fakeHealthSource) read() (map[string]bool, error) {
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the health file: %w", err)
	}
	listed, err := ParseFakeHealth(string(b))
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, d := range s.fake.Devices {
		if id, ret := d.GetUUID(); ret == nvml.SUCCESS {
			known[id] = true
		}
	}
	for id := range listed {
		if !known[id] {
			return nil, fmt.Errorf("health file lists %q, which this fake does not have: use one of its device instance IDs (nomad node status -verbose)", id)
		}
	}
	return listed, nil
}

// apply injects an XID for each listed GPU the watcher does not yet hold unhealthy (it may
// not have registered the GPU's events yet: the next poll tries again), and recovers each GPU
// the file made unhealthy and no longer lists.
func (s *fakeHealthSource) apply(listed map[string]bool) {
	for id := range listed {
		if h, ok := s.eventHealth(id); ok && !h.Healthy {
			continue
		}
		if err := s.fake.InjectEvent(id, nvml.EventTypeXidCriticalError, FakeHealthXID); err != nil {
			s.logger.Error("injecting an XID", "uuid", id, "error", err)
			continue
		}
		if !s.flipped[id] {
			s.logger.Info("health file lists the GPU: injected a critical XID", "uuid", id, "xid", FakeHealthXID)
		}
		s.flipped[id] = true
	}
	for id := range s.flipped {
		if listed[id] {
			continue
		}
		delete(s.flipped, id)
		if s.recoverGPU(id) {
			s.logger.Info("health file no longer lists the GPU: healthy again", "uuid", id)
		}
	}
}

// Close stops reading the file, then closes the source.
func (s *fakeHealthSource) Close() error {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	return s.NVML.Close()
}

// eventHealth is the event watcher's verdict on a GPU; false before NVML is initialised.
func (s *NVML) eventHealth(id string) (Health, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.events == nil {
		return Health{}, false
	}
	return s.events.health(id), true
}

// recoverGPU drops the event watcher's unhealthy verdict on a GPU (the fake's GPU reset) and
// announces the change; it reports whether there was one.
func (s *NVML) recoverGPU(id string) bool {
	s.mu.Lock()
	w := s.events
	s.mu.Unlock()
	if w == nil || !w.clear(id) {
		return false
	}
	s.notify()
	return true
}
