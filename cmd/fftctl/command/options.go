package command

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/cli"
	nomad "github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/allocator/consulstore"
	"github.com/nomad-fft/nomad-fft/cmd/internal/connect"
	"github.com/nomad-fft/nomad-fft/cmd/internal/helptext"
)

// options names the general options a command takes, by what it talks to.
type options uint8

const (
	// nomadOptions: -address, -token and Nomad's TLS options.
	nomadOptions options = 1 << iota
	// consulOptions: -consul-addr, -consul-token, Consul's TLS options and
	// -consul-prefix.
	consulOptions
	// namespaceOption: -namespace, for commands that name a job.
	namespaceOption
)

// conn holds the general options' values.
type conn struct {
	nomad, consul connect.Settings
	consulPrefix  string
	namespace     string
}

// generalFlags registers the general options opts names on fs.
func (c *conn) generalFlags(fs *flag.FlagSet, opts options) {
	if opts&nomadOptions != 0 {
		c.nomad.Flags(fs, "", "Nomad", connect.NomadEnv)
	}
	if opts&consulOptions != 0 {
		c.consul.Flags(fs, "consul-", "Consul", connect.ConsulEnv)
		fs.StringVar(&c.consulPrefix, "consul-prefix", consulstore.DefaultPrefix,
			"Consul KV prefix of the fft-allocator's ledger and audit log, layout version included.")
	}
	if opts&namespaceOption != 0 {
		fs.StringVar(&c.namespace, "namespace", "",
			"Nomad namespace of a JOB given without one. Overrides NOMAD_NAMESPACE (default \"default\").")
	}
}

// flagSet returns the flag set of a command: the general options opts
// names, then the command's own (registered by own, which may be nil).
func (m *Meta) flagSet(name string, opts options, own func(*flag.FlagSet)) *flag.FlagSet {
	fs := m.FlagSet(name)
	m.conn.generalFlags(fs, opts)
	if own != nil {
		own(fs)
	}
	return fs
}

// parse parses a command's arguments with the general options opts names
// and the command's own flags, and checks that exactly the positional
// arguments named remain. On a mistake it prints what is wrong and the
// command's help, and returns false.
func (m *Meta) parse(c cli.Command, name string, opts options, own func(*flag.FlagSet), args []string, positional ...string) ([]string, bool) {
	fs := m.flagSet(name, opts, own)
	if err := fs.Parse(args); err != nil {
		return nil, false
	}
	if fs.NArg() == len(positional) {
		return fs.Args(), true
	}
	switch len(positional) {
	case 0:
		m.Ui.Error("This command takes no arguments")
	case 1:
		m.Ui.Error("This command takes one argument: " + positional[0])
	default:
		m.Ui.Error(fmt.Sprintf("This command takes %d arguments: %s", len(positional), strings.Join(positional, " ")))
	}
	m.Ui.Error("\n" + c.Help())
	return nil, false
}

// fail prints an error and returns the exit code of a failed command.
func (m *Meta) fail(format string, a ...any) int {
	m.Ui.Error(fmt.Sprintf(format, a...))
	return 1
}

// helpText lays a command's help out as Nomad does: the usage line, the
// indented description, "General Options:" and "<title> Options:". The
// options are rendered from the flags themselves, so help and parsing
// cannot drift apart.
func helpText(usage, description string, opts options, title string, own func(*flag.FlagSet)) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: fftctl %s\n\n", usage)
	for _, line := range strings.Split(strings.TrimSpace(description), "\n") {
		b.WriteString(strings.TrimRight("  "+strings.TrimSpace(line), " ") + "\n")
	}
	if opts != 0 {
		var scratch conn
		fs := flag.NewFlagSet("", flag.ContinueOnError)
		scratch.generalFlags(fs, opts)
		b.WriteString("\nGeneral Options:\n\n" + flagsUsage(fs) + "\n")
	}
	if own != nil {
		fs := flag.NewFlagSet("", flag.ContinueOnError)
		own(fs)
		b.WriteString("\n" + title + " Options:\n\n" + flagsUsage(fs) + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// flagsUsage and wrap are the shared help builder's (cmd/internal/helptext),
// which fft-allocator's help uses too.
func flagsUsage(fs *flag.FlagSet) string { return helptext.Flags(fs) }

func wrap(text, indent string, width int) string { return helptext.Wrap(text, indent, width) }

// nomadClient returns the Nomad API client the general options describe.
func (c *conn) nomadClient() (*nomad.Client, error) { return c.nomad.Nomad() }

// store returns the ledger and audit log the general options describe.
func (c *conn) store() (*consulstore.Store, error) {
	client, err := c.consul.Consul()
	if err != nil {
		return nil, err
	}
	return consulstore.New(client, c.consulPrefix), nil
}

// jobStore resolves a JOB argument to the ledger's job ID and opens the
// ledger.
func (c *conn) jobStore(arg string) (string, *consulstore.Store, error) {
	id, err := c.jobID(arg)
	if err != nil {
		return "", nil, err
	}
	store, err := c.store()
	return id, store, err
}

// consulAddress is the Consul address the general options resolve to, for
// messages.
func (c *conn) consulAddress() string { return c.consul.ConsulConfig().Address }

// jobNamespace is the namespace of a job given without one: -namespace,
// else NOMAD_NAMESPACE, else "default".
func (c *conn) jobNamespace() string {
	for _, ns := range []string{c.namespace, os.Getenv("NOMAD_NAMESPACE")} {
		if ns != "" {
			return ns
		}
	}
	return "default"
}

// jobID returns the ledger's ID ("namespace/job") of a JOB argument. A JOB
// that holds a "/" names its namespace first, unless -namespace is given
// (Nomad's periodic and dispatched jobs have a "/" in their IDs).
func (c *conn) jobID(arg string) (string, error) {
	if arg == "" || strings.HasPrefix(arg, "/") || strings.HasSuffix(arg, "/") {
		return "", fmt.Errorf("JOB %q: expected a job ID, or namespace/job", arg)
	}
	if c.namespace == "" && strings.Contains(arg, "/") {
		return arg, nil
	}
	return c.jobNamespace() + "/" + arg, nil
}

// outputJSON prints v as indented JSON and returns the exit code.
func (m *Meta) outputJSON(v any) int {
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		m.Ui.Error(fmt.Sprintf("Error encoding JSON: %v", err))
		return 1
	}
	m.Ui.Output(string(out))
	return 0
}

// stringsFlag is a repeatable string flag (-var a=1 -var b=2).
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, ", ") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }
