package nomadapi

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// lineWriter hands each log line to a channel, so a test can wait for one.
type lineWriter struct {
	lines chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	select {
	case w.lines <- string(p):
	default: // the test has what it waits for
	}
	return len(p), nil
}

// TestProgressLogsLongBatches checks that a batch that outlasts the interval
// logs how far it got, and that one that does not, or runs without an
// interval, logs nothing.
func TestProgressLogsLongBatches(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
		slow     bool // the batch's last call waits for a progress line
		want     string
	}{
		{name: "long batch", interval: time.Millisecond, slow: true, want: `reading jobs: done=2 total=3`},
		{name: "short batch", interval: time.Hour},
		{name: "no interval", interval: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &lineWriter{lines: make(chan string, 1)}
			log := hclog.New(&hclog.LoggerOptions{Output: w, Level: hclog.Info})
			p := startProgress(log, tc.interval, "reading jobs", 3)
			var got string
			err := forEach(context.Background(), 3, 1, func(_ context.Context, k int) error {
				defer p.add()
				for k == 2 && tc.slow && !strings.Contains(got, tc.want) {
					select {
					case got = <-w.lines: // lines logged before the first two calls ended say less
					case <-time.After(10 * time.Second):
						return errors.New("no progress line in 10 s")
					}
				}
				return nil
			})
			p.end()
			if err != nil {
				t.Fatal(err)
			}
			select {
			case line := <-w.lines:
				got += line
			default:
			}
			if tc.want == "" && got != "" {
				t.Fatalf("logged %q, want nothing", got)
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("logged %q, want %q", got, tc.want)
			}
		})
	}
}
