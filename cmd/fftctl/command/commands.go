package command

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hashicorp/cli"

	"github.com/nomad-fft/nomad-fft/cmd/internal/version"
)

// Meta is what every command shares: where it writes and how flags parse.
type Meta struct {
	Ui cli.Ui
	// Stdout and Stderr are the raw streams behind Ui, for commands that
	// stream (progress lines, large tables).
	Stdout, Stderr io.Writer

	// conn holds the general options (connection, Consul prefix,
	// namespace) of the commands that take them.
	conn conn
}

// FlagSet returns a flag set whose errors and usage go to the Ui, so a bad
// flag prints the command's help instead of Go's default usage.
func (m *Meta) FlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(&uiErrorWriter{m.Ui})
	fs.Usage = func() {}
	return fs
}

// uiErrorWriter sends flag package messages to the Ui's error stream.
type uiErrorWriter struct{ ui cli.Ui }

func (w *uiErrorWriter) Write(p []byte) (int, error) {
	w.ui.Error(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Commands returns the command table; keys are space-separated paths.
func Commands(meta Meta) map[string]cli.CommandFactory {
	return map[string]cli.CommandFactory{
		"audit":    func() (cli.Command, error) { return &AuditCommand{Meta: meta}, nil },
		"dev":      func() (cli.Command, error) { return &DevCommand{Meta: meta}, nil },
		"explain":  func() (cli.Command, error) { return &ExplainCommand{Meta: meta}, nil },
		"park":     func() (cli.Command, error) { return &ParkCommand{overrideFlags{Meta: meta}}, nil },
		"pin":      func() (cli.Command, error) { return &PinCommand{overrideFlags{Meta: meta}}, nil },
		"resume":   func() (cli.Command, error) { return &ResumeCommand{overrideFlags{Meta: meta}}, nil },
		"report":   func() (cli.Command, error) { return &ReportCommand{Meta: meta}, nil },
		"round":    func() (cli.Command, error) { return &RoundCommand{Meta: meta}, nil },
		"run":      func() (cli.Command, error) { return &RunCommand{Meta: meta}, nil },
		"simulate": func() (cli.Command, error) { return &SimulateCommand{Meta: meta}, nil },
		"status":   func() (cli.Command, error) { return &StatusCommand{Meta: meta}, nil },
		"tabulate": func() (cli.Command, error) { return &TabulateCommand{Meta: meta}, nil },
		"version":  func() (cli.Command, error) { return &VersionCommand{Meta: meta}, nil },
	}
}

// Run runs fftctl with args and returns the exit code.
func Run(args []string) int {
	return RunWith(args, os.Stdin, os.Stdout, os.Stderr)
}

// RunWith is Run with explicit streams, for tests.
func RunWith(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ui := &cli.BasicUi{Reader: stdin, Writer: stdout, ErrorWriter: stderr}
	c := cli.NewCLI("fftctl", version.Get().String())
	c.Args = args
	c.Commands = Commands(Meta{Ui: ui, Stdout: stdout, Stderr: stderr})
	c.HelpWriter = stdout
	c.ErrorWriter = stderr
	code, err := c.Run()
	if err != nil {
		fmt.Fprintf(stderr, "Error executing CLI: %v\n", err)
		return 1
	}
	return code
}

// VersionCommand prints the version.
type VersionCommand struct{ Meta }

var _ cli.Command = &VersionCommand{}

func (c *VersionCommand) Help() string {
	return "Usage: fftctl version\n\n  Prints the fftctl version and the commit it was built from."
}
func (c *VersionCommand) Synopsis() string { return "Print the fftctl version" }
func (c *VersionCommand) Run(args []string) int {
	c.Ui.Output("fftctl " + version.Get().String())
	return 0
}
