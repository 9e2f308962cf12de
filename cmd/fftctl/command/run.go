package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/hashicorp/cli"
)

// RunCommand submits a jobspec held for FFT.
type RunCommand struct {
	Meta
	vars, varFiles stringsFlag
	// stdin is where JOBSPEC "-" reads from; os.Stdin when nil.
	stdin io.Reader
}

var _ cli.Command = &RunCommand{}

const runOptions = nomadOptions | namespaceOption

func (c *RunCommand) Synopsis() string { return "Submit a jobspec, held until FFT selects it" }

func (c *RunCommand) Help() string {
	return helpText("run [options] JOBSPEC", `
Parses the HCL jobspec JOBSPEC ("-" reads standard input) with Nomad's
parse API, checks its fft. job meta as the fft-allocator will, adds the
gate constraint on ${meta.fft_gate} and registers the job. Nomad then
holds it (pending) until an fft-allocator round selects it, lifts the
gate and moves it into the GPU node pool. A jobspec that breaks the fft.
contract is not submitted: every bad key is named with its value and what
is expected.

Follow the job with "fftctl status" and "fftctl explain JOB".
`, runOptions, "Run", c.ownFlags)
}

func (c *RunCommand) ownFlags(fs *flag.FlagSet) {
	fs.Var(&c.vars, "var", "Sets the jobspec variable `key=value`, a string that Nomad converts to the variable's type; repeatable, and it wins over -var-file.")
	fs.Var(&c.varFiles, "var-file", "Reads variable values from the HCL (or JSON) `file`; repeatable, a later file wins.")
}

func (c *RunCommand) Run(args []string) int {
	rest, ok := c.parse(c, "run", runOptions, c.ownFlags, args, "JOBSPEC")
	if !ok {
		return 1
	}
	src, err := c.readJobspec(rest[0])
	if err != nil {
		return c.fail("Error reading the jobspec: %v", err)
	}
	variables, err := c.variables(src)
	if err != nil {
		return c.fail("Error in the jobspec variables: %v", err)
	}
	client, err := c.conn.nomadClient()
	if err != nil {
		return c.fail("Error: %v", err)
	}
	job, err := heldJob(client, jobspec{HCL: string(src), Variables: variables, Namespace: c.conn.jobNamespace()})
	var ce *contractError
	if errors.As(err, &ce) {
		return c.fail("%s", contractErrorText(ce))
	}
	nomadAddr := c.conn.nomad.NomadConfig().Address
	if unreachable(err) {
		// Nomad parses the jobspec, so without it the error would read
		// like one in the jobspec.
		return c.fail("Error: Nomad at %s is needed to parse the jobspec, and did not answer: %v%s", nomadAddr, err, nomadHint(err, nomadAddr))
	}
	if err != nil {
		return c.fail("Error: %v", err)
	}
	resp, err := register(context.Background(), client, job)
	if err != nil {
		return c.fail("Error: %v%s", err, nomadHint(err, nomadAddr))
	}
	id := *job.Namespace + "/" + *job.ID
	c.Ui.Output(fmt.Sprintf("==> Job %q registered, held for FFT", id))
	c.Ui.Output("    Evaluation ID: " + resp.EvalID)
	c.Ui.Output("    The job waits for an fft-allocator round to select it.")
	c.Ui.Output(fmt.Sprintf("    Follow it with: fftctl status; fftctl explain %s", id))
	if resp.Warnings != "" {
		c.Ui.Warn("\nJob Warnings:\n" + resp.Warnings)
	}
	return 0
}

func (c *RunCommand) readJobspec(path string) ([]byte, error) {
	if path == "-" {
		in := c.stdin
		if in == nil {
			in = os.Stdin
		}
		return io.ReadAll(in)
	}
	return os.ReadFile(path)
}

// variables merges -var-file and -var into one variables file and checks
// that the jobspec declares each variable set.
func (c *RunCommand) variables(jobspecSrc []byte) (string, error) {
	var files []varFile
	for _, name := range c.varFiles {
		src, err := os.ReadFile(name)
		if err != nil {
			return "", fmt.Errorf("-var-file: %w", err)
		}
		files = append(files, varFile{name: name, src: src})
	}
	content, set, err := mergeVariables(files, c.vars)
	if err != nil {
		return "", err
	}
	if declared, ok := declaredVariables(jobspecSrc); ok {
		if err := checkDeclared(set, declared); err != nil {
			return "", err
		}
	}
	return content, nil
}
