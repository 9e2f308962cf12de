// Package helptext renders the options of a command's help the way Nomad's
// CLI does, for every binary of the repository: fftctl's commands and
// fft-allocator print their flags through it, and their generated
// references (cmd/fftctl/REFERENCE.md, cmd/fft-allocator/REFERENCE.md) come
// from that help, so help, reference and parsing cannot drift apart.
package helptext

import (
	"flag"
	"fmt"
	"strings"
)

// Flags renders every flag of fs as "  -name=<kind>" and its text,
// wrapped and indented, with the default when it is not the zero value;
// a blank line separates flags.
func Flags(fs *flag.FlagSet) string {
	var entries []string
	fs.VisitAll(func(f *flag.Flag) {
		var b strings.Builder
		kind, usage := flag.UnquoteUsage(f)
		if kind == "" {
			fmt.Fprintf(&b, "  -%s\n", f.Name)
		} else {
			fmt.Fprintf(&b, "  -%s=<%s>\n", f.Name, kind)
		}
		switch f.DefValue {
		case "", "false", "0", "0s", "[]":
		default:
			usage += fmt.Sprintf(" Defaults to %q.", f.DefValue)
		}
		b.WriteString(Wrap(usage, "    ", 76))
		entries = append(entries, b.String())
	})
	return strings.Join(entries, "\n\n")
}

// Wrap breaks text into lines of at most width columns, each with indent.
func Wrap(text, indent string, width int) string {
	var lines []string
	line := indent
	for _, word := range strings.Fields(text) {
		if line != indent && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += word
	}
	return strings.Join(append(lines, line), "\n")
}
