package command

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
)

// varFile is a -var-file's name and content.
type varFile struct {
	name string
	src  []byte
}

// mergeVariables returns the content of one variables file, as Nomad's
// parse API takes it, holding the values of the -var-file files (in order,
// a later file winning) and of the -var flags (NAME=VALUE, winning over
// the files). The API takes a single file, so duplicates must be resolved
// here. A file's values are kept as written (their HCL or JSON expression
// text); a -var value is a string, which Nomad converts to the variable's
// type (numbers and bools work; lists and maps belong in a -var-file).
func mergeVariables(files []varFile, flags []string) (string, []string, error) {
	exprs := map[string]string{}
	var order []string
	set := func(name, expr string) {
		if _, ok := exprs[name]; !ok {
			order = append(order, name)
		}
		exprs[name] = expr
	}
	for _, f := range files {
		var file *hcl.File
		var diags hcl.Diagnostics
		if isJSON(f.src) {
			file, diags = hcljson.Parse(f.src, f.name)
		} else {
			file, diags = hclsyntax.ParseConfig(f.src, f.name, hcl.InitialPos)
		}
		if diags.HasErrors() {
			return "", nil, fmt.Errorf("-var-file %s: %w", f.name, diags)
		}
		attrs, diags := file.Body.JustAttributes()
		if diags.HasErrors() {
			return "", nil, fmt.Errorf("-var-file %s: expected only NAME = VALUE lines: %w", f.name, diags)
		}
		list := make([]*hcl.Attribute, 0, len(attrs))
		for _, a := range attrs {
			list = append(list, a)
		}
		sort.Slice(list, func(a, b int) bool { return list[a].Range.Start.Byte < list[b].Range.Start.Byte })
		for _, a := range list {
			r := a.Expr.Range()
			set(a.Name, string(f.src[r.Start.Byte:r.End.Byte]))
		}
	}
	for _, kv := range flags {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !hclsyntax.ValidIdentifier(name) {
			return "", nil, fmt.Errorf("-var %q: expected NAME=VALUE, NAME a variable the jobspec declares", kv)
		}
		quoted, err := hclString(value)
		if err != nil {
			return "", nil, fmt.Errorf("-var %q: %w", kv, err)
		}
		set(name, quoted)
	}
	var b strings.Builder
	for _, name := range order {
		fmt.Fprintf(&b, "%s = %s\n", name, exprs[name])
	}
	return b.String(), order, nil
}

// isJSON tells a JSON file from HCL as Nomad does: by its first
// non-blank character.
func isJSON(src []byte) bool {
	s := strings.TrimLeft(string(src), " \t\r\n")
	return strings.HasPrefix(s, "{")
}

// hclString writes s as an HCL string literal that evaluates to s itself:
// quotes and backslashes escaped, control characters as \u escapes, and
// "${" and "%{" doubled so that they are not templates.
func hclString(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("the value is not valid UTF-8")
	}
	var b strings.Builder
	b.WriteByte('"')
	for i, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04x`, r)
		case (r == '$' || r == '%') && strings.HasPrefix(s[i+1:], "{"):
			b.WriteRune(r)
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String(), nil
}

// declaredVariables returns the names of the variable blocks of an HCL
// jobspec, sorted, and false when it cannot tell (the jobspec is JSON, or
// does not parse: Nomad's parse API then reports why).
func declaredVariables(jobspec []byte) ([]string, bool) {
	if isJSON(jobspec) {
		return nil, false
	}
	file, diags := hclsyntax.ParseConfig(jobspec, "jobspec", hcl.InitialPos)
	if diags.HasErrors() {
		return nil, false
	}
	body, ok := file.Body.(*hclsyntax.Body)
	if !ok {
		return nil, false
	}
	var names []string
	for _, b := range body.Blocks {
		if b.Type == "variable" && len(b.Labels) == 1 {
			names = append(names, b.Labels[0])
		}
	}
	sort.Strings(names)
	return names, true
}

// checkDeclared returns an error naming each set variable that the
// jobspec does not declare. Nomad's parse API only warns about those, and
// drops the warning, so a typo in -var would otherwise go unnoticed.
func checkDeclared(set, declared []string) error {
	known := make(map[string]bool, len(declared))
	for _, d := range declared {
		known[d] = true
	}
	var unknown []string
	for _, s := range set {
		if !known[s] {
			unknown = append(unknown, fmt.Sprintf("%q", s))
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	have := "it declares none"
	if len(declared) > 0 {
		have = "it declares " + strings.Join(declared, ", ")
	}
	return fmt.Errorf("the jobspec declares no variable %s (%s)", strings.Join(unknown, ", "), have)
}
