package helptext

import (
	"flag"
	"strings"
	"testing"
	"time"
)

func TestFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Bool("once", false, "Run one round and exit.")
	fs.Duration("round", 5*time.Minute, "Round length R.")
	fs.String("policy", "fft", "The `name` of the policy that decides each round, a sentence long enough to wrap around the line.")
	got := Flags(fs)
	want := "  -once\n    Run one round and exit.\n\n" +
		"  -policy=<name>\n    The name of the policy that decides each round, a sentence long enough\n    to wrap around the line. Defaults to \"fft\".\n\n" +
		"  -round=<duration>\n    Round length R. Defaults to \"5m0s\"."
	if got != want {
		t.Errorf("Flags:\n%s\nwant:\n%s", got, want)
	}
}

func TestWrap(t *testing.T) {
	text := "one two three four five six seven eight nine ten eleven twelve"
	for _, width := range []int{10, 20, 80} {
		got := Wrap(text, "  ", width)
		for _, line := range strings.Split(got, "\n") {
			if len(line) > width && len(strings.Fields(line)) > 1 {
				t.Errorf("width %d: line %q is too long", width, line)
			}
			if !strings.HasPrefix(line, "  ") {
				t.Errorf("width %d: line %q lacks the indent", width, line)
			}
		}
		if strings.Join(strings.Fields(got), " ") != text {
			t.Errorf("width %d: words changed: %q", width, got)
		}
	}
}
