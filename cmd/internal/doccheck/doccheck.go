// Package doccheck reads the repository's Markdown the way a reader does and
// finds what would mislead one: a -flag that the command it is given to does
// not have, a relative link to nothing, and the commands a doc says to run.
// It is pure (text in, findings out); the test of the package runs it over
// the repository with the help of the binaries built from it.
package doccheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"iter"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/plugins/shared/hclspec"
)

// Span is a piece of code in a Markdown file: an inline code span or a
// fenced block.
type Span struct {
	// Line is the 1-based line of the span's first character.
	Line int
	// Text is the code, without its backticks or fences.
	Text string
	// Fenced is true for a fenced block; Info is its info string ("sh",
	// "hcl", ...) and Marker the HTML comment on the line before it, if any
	// ("docs-test: run" for <!-- docs-test: run -->).
	Fenced       bool
	Info, Marker string
}

var markerRE = regexp.MustCompile(`^\s*<!--\s*(.*?)\s*-->\s*$`)

// Spans returns the code spans and fenced blocks of a Markdown document, in
// order. Text inside fenced blocks is not searched for inline spans.
func Spans(md string) []Span {
	var spans []Span
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimLeft(lines[i], " ")
		if fence := fenceOf(trimmed); fence != "" {
			s := Span{Line: i + 2, Fenced: true, Info: strings.TrimSpace(trimmed[len(fence):])}
			if i > 0 {
				if m := markerRE.FindStringSubmatch(lines[i-1]); m != nil {
					s.Marker = m[1]
				}
			}
			var body []string
			for i++; i < len(lines) && !strings.HasPrefix(strings.TrimLeft(lines[i], " "), fence); i++ {
				body = append(body, lines[i])
			}
			s.Text = strings.Join(body, "\n")
			spans = append(spans, s)
			continue
		}
		spans = append(spans, inlineSpans(lines, &i)...)
	}
	return spans
}

// fenceOf returns the fence a line opens with (``` or ~~~, three or more).
func fenceOf(line string) string {
	for _, c := range []string{"`", "~"} {
		n := len(line) - len(strings.TrimLeft(line, c))
		if n >= 3 {
			return strings.Repeat(c, n)
		}
	}
	return ""
}

// proseLines yields a Markdown document's lines outside fenced code, with
// their indexes; the fence lines themselves are not yielded.
func proseLines(md string) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		inFence := ""
		for i, line := range strings.Split(md, "\n") {
			trimmed := strings.TrimLeft(line, " ")
			if f := fenceOf(trimmed); f != "" {
				if inFence == "" {
					inFence = f
				} else if strings.HasPrefix(trimmed, inFence) {
					inFence = ""
				}
				continue
			}
			if inFence == "" && !yield(i, line) {
				return
			}
		}
	}
}

// inlineSpans returns the inline code spans that start on line *i; a span
// may continue over the following lines of its paragraph, and *i is moved
// to the last line it read.
func inlineSpans(lines []string, i *int) []Span {
	var spans []Span
	line := lines[*i]
	start := *i
	for pos := 0; pos < len(line); {
		open := strings.IndexByte(line[pos:], '`')
		if open < 0 {
			break
		}
		open += pos
		n := 1
		for open+n < len(line) && line[open+n] == '`' {
			n++
		}
		ticks := line[open : open+n]
		rest := line[open+n:]
		end := strings.Index(rest, ticks)
		// A span may run on in its paragraph: join the next non-blank lines.
		for end < 0 && *i+1 < len(lines) && strings.TrimSpace(lines[*i+1]) != "" && fenceOf(strings.TrimLeft(lines[*i+1], " ")) == "" {
			*i++
			line += "\n" + lines[*i]
			rest = line[open+n:]
			end = strings.Index(rest, ticks)
		}
		if end < 0 {
			break
		}
		text := strings.ReplaceAll(rest[:end], "\n", " ")
		spans = append(spans, Span{Line: start + 1 + strings.Count(line[:open], "\n"), Text: strings.TrimSpace(text)})
		pos = open + n + end + n
	}
	return spans
}

// Invocation is one command a span runs: the program (as Programs names it,
// "fftctl simulate" for a subcommand), the flags it gives, and the words
// after the program.
type Invocation struct {
	Program string
	Flags   []string
	Args    []string
}

// Programs maps how a doc may call a program to its name, for the programs
// whose flags are checked. A name ending in " *" takes a subcommand: the
// word after it joins the name ("fftctl" "run" is "fftctl run").
var Programs = map[string]string{
	"fftctl":              "fftctl *",
	"bin/fftctl":          "fftctl *",
	"./bin/fftctl":        "fftctl *",
	"fft-allocator":       "fft-allocator",
	"bin/fft-allocator":   "fft-allocator",
	"./bin/fft-allocator": "fft-allocator",
}

var flagRE = regexp.MustCompile(`^--?([A-Za-z][A-Za-z0-9_-]*)(=.*)?$`)

// Commands splits a span into its shell commands: lines (a trailing
// backslash continues one), then |, ;, && and ||; comments are dropped and
// quotes group words (and are removed).
func Commands(text string) [][]string {
	text = strings.ReplaceAll(text, "\\\n", " ")
	var cmds [][]string
	for _, line := range strings.Split(text, "\n") {
		var cur []string
		for _, w := range words(line) {
			if strings.HasPrefix(w, "#") {
				break
			}
			switch w {
			case "|", ";", "&&", "||", "$", "&":
				if len(cur) > 0 {
					cmds = append(cmds, cur)
				}
				cur = nil
				continue
			}
			cur = append(cur, w)
		}
		if len(cur) > 0 {
			cmds = append(cmds, cur)
		}
	}
	return cmds
}

// words splits a shell line into words: blanks separate them outside
// quotes, and the quotes themselves are dropped.
func words(line string) []string {
	var out []string
	var cur strings.Builder
	quote, in := rune(0), false
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// Invocations returns the calls of the checked programs in a span: a
// command whose first word (after VAR=value assignments) is one of
// Programs, `go run ./cmd/<program>`, or `make dev` with DEV_ARGS (fftctl
// dev's flags).
func Invocations(text string) []Invocation {
	var out []Invocation
	for _, words := range Commands(text) {
		k := 0
		for k < len(words) && assignRE.MatchString(words[k]) {
			k++
		}
		if k == len(words) {
			continue
		}
		first := words[k]
		rest := words[k+1:]
		if first == "go" && len(rest) >= 2 && rest[0] == "run" && strings.HasPrefix(rest[1], "./cmd/") {
			first, rest = strings.TrimPrefix(rest[1], "./cmd/"), rest[2:]
		}
		if first == "make" {
			for _, w := range rest {
				if v, ok := strings.CutPrefix(w, "DEV_ARGS="); ok {
					out = append(out, invocation("fftctl dev", strings.Fields(v)))
				}
			}
			continue
		}
		name, ok := Programs[first]
		if !ok {
			continue
		}
		if strings.HasSuffix(name, " *") {
			name = strings.TrimSuffix(name, " *")
			if len(rest) > 0 && isWord(rest[0]) {
				name += " " + rest[0]
				rest = rest[1:]
			}
		}
		out = append(out, invocation(name, rest))
	}
	return out
}

var assignRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

func invocation(name string, args []string) Invocation {
	inv := Invocation{Program: name}
	for _, a := range args {
		a = strings.Trim(a, "`,[]()")
		if m := flagRE.FindStringSubmatch(a); m != nil {
			inv.Flags = append(inv.Flags, m[1])
		} else {
			inv.Args = append(inv.Args, a)
		}
	}
	return inv
}

var wordRE = regexp.MustCompile(`^[a-z][a-z-]*$`)

func isWord(s string) bool { return wordRE.MatchString(s) }

// BareFlag returns the flag an inline span names on its own ("-round",
// "-min-round-gap 5s", "-big-jobs=skip"), or "".
func BareFlag(s Span) string {
	if s.Fenced {
		return ""
	}
	fields := strings.Fields(s.Text)
	if len(fields) == 0 {
		return ""
	}
	if m := flagRE.FindStringSubmatch(fields[0]); m != nil && strings.HasPrefix(fields[0], "-") {
		return m[1]
	}
	return ""
}

var helpFlagRE = regexp.MustCompile(`(?m)^\s{1,8}--?([A-Za-z][A-Za-z0-9_-]*)(?:[= ]|$)`)

// HelpFlags returns the flags a help text lists, one a line, indented, as
// both fftctl's help and Go's flag package print them.
func HelpFlags(help string) map[string]bool {
	flags := map[string]bool{}
	for _, m := range helpFlagRE.FindAllStringSubmatch(help, -1) {
		flags[m[1]] = true
	}
	// -h and -help are answered by every Go flag set.
	flags["h"], flags["help"] = true, true
	return flags
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// Links returns the targets of the Markdown links of a document outside
// code, with their lines.
func Links(md string) []Link {
	var links []Link
	for i, line := range proseLines(md) {
		for _, m := range linkRE.FindAllStringSubmatch(stripCode(line), -1) {
			links = append(links, Link{Line: i + 1, Target: m[1]})
		}
	}
	return links
}

// Link is a Markdown link's target and line.
type Link struct {
	Line   int
	Target string
}

// stripCode blanks the inline code of a line.
func stripCode(line string) string {
	return regexp.MustCompile("`[^`]*`").ReplaceAllString(line, "``")
}

// Anchors returns the anchors GitHub gives a document's headings.
func Anchors(md string) map[string]bool {
	anchors := map[string]bool{}
	for _, line := range proseLines(md) {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		base := Slug(heading)
		slug := base
		for n := 1; anchors[slug]; n++ {
			slug = fmt.Sprintf("%s-%d", base, n)
		}
		anchors[slug] = true
	}
	return anchors
}

// Slug is GitHub's anchor of a heading: lower case, punctuation dropped
// (hyphens and underscores kept), spaces to hyphens.
func Slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && isLetter(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isLetter(r rune) bool { return strings.ContainsRune("äöüéèàçñ", r) }

// Sorted returns a set's keys in order, for messages.
func Sorted(set map[string]bool) []string {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// SectionRef is a reference by name to a section of a Markdown file, as
// prose and help texts write it: allocator/README.md, "The round problem"
// (or allocator/README.md ("The round problem")).
type SectionRef struct {
	Line          int
	File, Section string
}

var sectionRefRE = regexp.MustCompile(`([A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md),?\s+\(?"([^"]+)"`)

// SectionRefs returns the section references of a text (Markdown or Go).
// A quoted phrase continued on the next line (a wrapped help text) is
// joined, its indentation and comment markers dropped.
func SectionRefs(text string) []SectionRef {
	var refs []SectionRef
	lines := strings.Split(text, "\n")
	for i := range lines {
		joined := lines[i]
		if i+1 < len(lines) {
			joined += " " + strings.TrimLeft(strings.TrimSpace(lines[i+1]), "/ ")
		}
		for _, m := range sectionRefRE.FindAllStringSubmatchIndex(joined, -1) {
			if m[0] >= len(lines[i]) {
				continue // starts on the next line: found there
			}
			refs = append(refs, SectionRef{Line: i + 1, File: joined[m[2]:m[3]], Section: joined[m[4]:m[5]]})
		}
	}
	return refs
}

// Headings returns a Markdown document's headings, without the #s and
// with backticks dropped.
func Headings(md string) []string {
	var hs []string
	for _, line := range proseLines(md) {
		if strings.HasPrefix(line, "#") {
			hs = append(hs, strings.ReplaceAll(strings.TrimSpace(strings.TrimLeft(line, "#")), "`", ""))
		}
	}
	return hs
}

// HasSection reports whether one of headings starts with section (case
// and backticks aside): a reference may name a heading's first words.
func HasSection(headings []string, section string) bool {
	want := strings.ToLower(strings.ReplaceAll(section, "`", ""))
	for _, h := range headings {
		if strings.HasPrefix(strings.ToLower(h), want) {
			return true
		}
	}
	return false
}

// SpecPaths returns the dotted paths of every attribute and block an HCL
// schema (a Nomad plugin's config or task config spec) declares, true for
// an attribute and false for a block: "fake" false, "fake.gpu" false,
// "fake.gpu.model" true, ...
func SpecPaths(spec *hclspec.Spec) map[string]bool {
	paths := map[string]bool{}
	var walk func(prefix string, s *hclspec.Spec)
	join := func(prefix, name string) string {
		if prefix == "" {
			return name
		}
		return prefix + "." + name
	}
	walk = func(prefix string, s *hclspec.Spec) {
		if s == nil {
			return
		}
		switch {
		case s.GetObject() != nil:
			for _, v := range s.GetObject().GetAttributes() {
				walk(prefix, v)
			}
		case s.GetAttr() != nil:
			paths[join(prefix, s.GetAttr().GetName())] = true
		case s.GetDefault() != nil:
			walk(prefix, s.GetDefault().GetPrimary())
		case s.GetBlockValue() != nil:
			p := join(prefix, s.GetBlockValue().GetName())
			paths[p] = false
			walk(p, s.GetBlockValue().GetNested())
		case s.GetBlockList() != nil:
			p := join(prefix, s.GetBlockList().GetName())
			paths[p] = false
			walk(p, s.GetBlockList().GetNested())
		case s.GetBlockSet() != nil:
			p := join(prefix, s.GetBlockSet().GetName())
			paths[p] = false
			walk(p, s.GetBlockSet().GetNested())
		case s.GetBlockMap() != nil:
			p := join(prefix, s.GetBlockMap().GetName())
			paths[p] = false
			walk(p, s.GetBlockMap().GetNested())
		}
	}
	walk("", spec)
	return paths
}

// Section returns the text of a Markdown document under the heading that
// starts with heading, up to the next heading of the same or a higher
// level; "" when there is none.
func Section(md, heading string) string {
	lines := strings.Split(md, "\n")
	for i, line := range lines {
		level := len(line) - len(strings.TrimLeft(line, "#"))
		if level == 0 || !strings.HasPrefix(strings.TrimSpace(line[level:]), heading) {
			continue
		}
		end := len(lines)
		for j := i + 1; j < len(lines); j++ {
			if l := len(lines[j]) - len(strings.TrimLeft(lines[j], "#")); l > 0 && l <= level && strings.HasPrefix(lines[j][l:], " ") {
				end = j
				break
			}
		}
		return strings.Join(lines[i+1:end], "\n")
	}
	return ""
}

var (
	hclBlockRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_-]*)(?:\s+"[^"]*")*\s*\{\s*(?:#.*)?$`)
	hclAttrRE  = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_-]*)\s*=`)
	// hclOneLineRE is a block on one line: name { key = value }.
	hclOneLineRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_-]*)(?:\s+"[^"]*")*\s*\{\s*([A-Za-z_][A-Za-z0-9_-]*)\s*=.*\}\s*(?:#.*)?$`)
)

// HCLConfigKeys returns the keys set inside the `config` blocks of an HCL
// snippet, as dotted paths relative to the block, and whether each config
// block sits in a `plugin` block (an agent's plugin config) or not (a
// task's). It reads one attribute or block opening a line, as the docs
// write them; a `}` closes the innermost block.
func HCLConfigKeys(hcl string) (plugin, task []string) {
	var stack []string
	configAt := -1
	inPlugin := false
	for _, raw := range strings.Split(hcl, "\n") {
		line := strings.TrimSpace(raw)
		switch {
		case strings.HasPrefix(line, "}"):
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			if len(stack) <= configAt {
				configAt = -1
			}
			continue
		case hclOneLineRE.MatchString(line):
			m := hclOneLineRE.FindStringSubmatch(line)
			if configAt >= 0 {
				base := append(slices.Clone(stack[configAt+1:]), m[1])
				for _, p := range []string{strings.Join(base, "."), strings.Join(append(base, m[2]), ".")} {
					if inPlugin {
						plugin = append(plugin, p)
					} else {
						task = append(task, p)
					}
				}
			}
		case hclBlockRE.MatchString(line):
			name := hclBlockRE.FindStringSubmatch(line)[1]
			if configAt >= 0 {
				path := strings.Join(append(slices.Clone(stack[configAt+1:]), name), ".")
				if inPlugin {
					plugin = append(plugin, path)
				} else {
					task = append(task, path)
				}
			}
			if name == "config" && configAt < 0 {
				configAt = len(stack)
				inPlugin = slices.Contains(stack, "plugin")
			}
			stack = append(stack, name)
			if strings.HasSuffix(line, "}") {
				stack = stack[:len(stack)-1]
			}
		case hclAttrRE.MatchString(line) && configAt >= 0:
			name := hclAttrRE.FindStringSubmatch(line)[1]
			path := strings.Join(append(slices.Clone(stack[configAt+1:]), name), ".")
			if inPlugin {
				plugin = append(plugin, path)
			} else {
				task = append(task, path)
			}
		}
	}
	return plugin, task
}

// bulletKeyRE matches "`key` (`" and "`a`, `b` (`" (keys sharing a type).
var (
	bulletKeyRE = regexp.MustCompile("((?:`[a-z_][a-z0-9_.]*`,\\s*)*`[a-z_][a-z0-9_.]*`) \\(`")
	keyRE       = regexp.MustCompile("`([a-z_][a-z0-9_.]*)`")
)

// BulletKeys returns the keys a section documents as "- `key` (`type`:
// default): ..." bullets (several may share a bullet), with their lines
// relative to the section.
func BulletKeys(section string) []string {
	var keys []string
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(strings.TrimLeft(line, " "), "- ") {
			continue
		}
		for _, m := range bulletKeyRE.FindAllStringSubmatch(line, -1) {
			for _, k := range keyRE.FindAllStringSubmatch(m[1], -1) {
				keys = append(keys, k[1])
			}
		}
	}
	return keys
}

// DocumentedAs reports whether key, as a doc writes it (a leaf such as
// "model" or a dotted suffix such as "progress.pattern"), names one of
// paths.
func DocumentedAs(key string, paths map[string]bool) bool {
	for p := range paths {
		if p == key || strings.HasSuffix(p, "."+key) {
			return true
		}
	}
	return false
}

// TableKeys returns the backticked names in the first cell of each row of
// the Markdown tables in a section (a cell may name several:
// "`fft_a`, `fft_b`"), header and rule rows aside.
func TableKeys(section string) []string {
	var keys []string
	for _, line := range strings.Split(section, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") || strings.HasPrefix(line, "| ---") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		for _, m := range codeRE.FindAllStringSubmatch(cells[1], -1) {
			keys = append(keys, m[1])
		}
	}
	return keys
}

var codeRE = regexp.MustCompile("`([^`]+)`")

// GoConst is a constant declared in Go source: its name, its type as
// written ("" when untyped) and its value when it is a string literal.
type GoConst struct {
	Name, Type, Value string
}

// GoConsts returns the string constants of a Go package's source files
// (tests left out), and every string literal of them (for names passed
// straight to a constructor, such as metric names).
func GoConsts(files map[string]string) (consts []GoConst, literals []string, err error) {
	fset := token.NewFileSet()
	for name, src := range files {
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			return nil, nil, err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GenDecl:
				if n.Tok != token.CONST {
					return true
				}
				for _, spec := range n.Specs {
					vs := spec.(*ast.ValueSpec)
					typ := ""
					if vs.Type != nil {
						typ = types.ExprString(vs.Type)
					}
					for i, id := range vs.Names {
						if i < len(vs.Values) {
							if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								v, _ := strconv.Unquote(lit.Value)
								consts = append(consts, GoConst{Name: id.Name, Type: typ, Value: v})
							}
						}
					}
				}
			case *ast.BasicLit:
				if n.Kind == token.STRING {
					if v, err := strconv.Unquote(n.Value); err == nil {
						literals = append(literals, v)
					}
				}
			}
			return true
		})
	}
	return consts, literals, nil
}
