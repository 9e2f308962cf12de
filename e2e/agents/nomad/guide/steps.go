package guide

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Step is one marked block of the guide: a file to write or a shell script to run.
type Step struct {
	// Kind is "file" or "run".
	Kind string
	// Path is the file's path as the marker names it (with $VARIABLES); "" for run.
	Path string
	// Body is the block's text, without its fences.
	Body string
	// Line is the marker's line number, for messages.
	Line int
}

func (s Step) String() string {
	if s.Kind == "file" {
		return fmt.Sprintf("line %d: file %s", s.Line, s.Path)
	}
	first, _, _ := strings.Cut(strings.TrimSpace(s.Body), "\n")
	return fmt.Sprintf("line %d: run %q", s.Line, first)
}

var marker = regexp.MustCompile(`^<!--\s*guide:\s*(\S+)(?:\s+(\S+))?\s*-->\s*$`)

// Parse returns the guide's marked blocks in order. A marker must be followed, after blank
// lines at most, by a fenced block; a marker of another kind, a file marker without a path
// or a run marker with one, and a block left open are errors, so that a slip in the guide
// fails its test instead of skipping a step.
func Parse(text string) ([]Step, error) {
	var steps []Step
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	line := 0
	var pending *Step
	var body []string
	inFence, marked := false, false
	for sc.Scan() {
		line++
		l := sc.Text()
		fence := strings.HasPrefix(strings.TrimSpace(l), "```")
		switch {
		case inFence && fence:
			inFence = false
			if marked {
				pending.Body = strings.Join(body, "\n") + "\n"
				steps = append(steps, *pending)
				pending, marked = nil, false
			}
		case inFence:
			if marked {
				body = append(body, l)
			}
		case fence:
			inFence, body = true, nil
			marked = pending != nil
		case pending != nil && strings.TrimSpace(l) != "":
			return nil, fmt.Errorf("line %d: the guide marker on line %d is followed by %q, not a fenced block", line, pending.Line, l)
		default:
			m := marker.FindStringSubmatch(l)
			if m == nil {
				if strings.HasPrefix(strings.TrimSpace(l), "<!-- guide:") {
					return nil, fmt.Errorf("line %d: a guide marker that does not parse: %q", line, l)
				}
				continue
			}
			s := Step{Kind: m[1], Path: m[2], Line: line}
			switch {
			case s.Kind == "file" && s.Path == "":
				return nil, fmt.Errorf("line %d: a file marker names no path", line)
			case s.Kind == "run" && s.Path != "":
				return nil, fmt.Errorf("line %d: a run marker takes no argument, got %q", line, s.Path)
			case s.Kind != "file" && s.Kind != "run":
				return nil, fmt.Errorf("line %d: unknown guide marker %q (want file or run)", line, s.Kind)
			}
			pending = &s
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if inFence {
		return nil, fmt.Errorf("the guide ends inside a fenced block")
	}
	if pending != nil {
		return nil, fmt.Errorf("line %d: the guide marker is followed by no fenced block", pending.Line)
	}
	return steps, nil
}

// Expand replaces $NAME and ${NAME} in s with vars, and fails on a name vars lacks: a file
// the guide writes must not get an empty value silently.
func Expand(s string, vars map[string]string) (string, error) {
	var missing []string
	out := os.Expand(s, func(name string) string {
		v, ok := vars[name]
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("no value for %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// ParseExports reads `export -p` output of bash (declare -x NAME="value" lines) into a map.
// Only variables with a value are kept.
func ParseExports(dump string) (map[string]string, error) {
	vars := map[string]string{}
	for i, l := range strings.Split(dump, "\n") {
		if l == "" {
			continue
		}
		rest, ok := strings.CutPrefix(l, "declare -x ")
		if !ok {
			// A value with a newline continues on the next line; the guide's variables have none.
			return nil, fmt.Errorf("export dump line %d: %q is not a declare -x line", i+1, l)
		}
		name, quoted, ok := strings.Cut(rest, "=")
		if !ok {
			continue
		}
		if len(quoted) < 2 || quoted[0] != '"' || quoted[len(quoted)-1] != '"' {
			return nil, fmt.Errorf("export dump line %d: value of %s is not double-quoted: %q", i+1, name, quoted)
		}
		vars[name] = unquote(quoted[1 : len(quoted)-1])
	}
	return vars, nil
}

// unquote undoes bash's double quoting in export -p: a backslash before ", \, $ or `.
func unquote(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && strings.ContainsRune("\"\\$`", rune(s[i+1])) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
