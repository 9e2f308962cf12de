package guide

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []Step
		err        string
	}{
		{"marked blocks in order, unmarked ones skipped", "intro\n```\nnot run\n```\n<!-- guide: file $CONF/a.hcl -->\n```hcl\na = 1\n```\n\n<!-- guide: run -->\n\n```\necho $A\nls\n```\n",
			[]Step{{Kind: "file", Path: "$CONF/a.hcl", Body: "a = 1\n", Line: 5}, {Kind: "run", Body: "echo $A\nls\n", Line: 10}}, ""},
		{"a marker inside a block is text", "```\n<!-- guide: run -->\n```\n", nil, ""},
		{"a marker before prose", "<!-- guide: run -->\ntext\n```\nx\n```\n", nil, "not a fenced block"},
		{"a marker at the end", "<!-- guide: run -->\n", nil, "no fenced block"},
		{"a file marker without a path", "<!-- guide: file -->\n```\nx\n```\n", nil, "names no path"},
		{"a run marker with an argument", "<!-- guide: run x -->\n```\nx\n```\n", nil, "takes no argument"},
		{"an unknown marker", "<!-- guide: exec -->\n```\nx\n```\n", nil, "unknown guide marker"},
		{"a marker named in prose is text", "see `<!-- guide: run -->`\n```\nx\n```\n", nil, ""},
		{"a marker that does not parse", "<!-- guide: run\n```\nx\n```\n", nil, "does not parse"},
		{"a block left open", "<!-- guide: run -->\n```\nx\n", nil, "inside a fenced block"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.text)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "1", "B_PORT": "8501"}
	if got, err := Expand(`x = "$A" y = ${B_PORT}`, vars); err != nil || got != `x = "1" y = 8501` {
		t.Errorf("got %q %v", got, err)
	}
	if _, err := Expand("$A $NOPE", vars); err == nil || !strings.Contains(err.Error(), "NOPE") {
		t.Errorf("error %v, want one naming NOPE", err)
	}
}

func TestParseExports(t *testing.T) {
	got, err := ParseExports("declare -x A=\"1\"\ndeclare -x EMPTY\ndeclare -x Q=\"a\\\"b\\$c\\\\d\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"A": "1", "Q": `a"b$c\d`}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if _, err := ParseExports("declare -x A=1\n"); err == nil {
		t.Errorf("an unquoted value parsed")
	}
}

// TestGuideParses: the guide itself parses, without agents, so that a broken marker fails
// every test run, not only the e2e one.
func TestGuideParses(t *testing.T) {
	steps := guideSteps(t)
	var files, runs int
	for _, s := range steps {
		if s.Kind == "file" {
			files++
		} else {
			runs++
		}
	}
	if files < 5 || runs < 10 {
		t.Errorf("%d files and %d commands blocks in the guide: fewer than the path it describes", files, runs)
	}
}

// guideSteps reads and parses cmd/fft-allocator/GUIDE.md.
func guideSteps(t *testing.T) []Step {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), guidePath))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := Parse(string(b))
	if err != nil {
		t.Fatalf("%s: %v", guidePath, err)
	}
	return steps
}
