package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/hashicorp/cli"

	"github.com/nomad-fft/nomad-fft/allocator"
)

// RoundCommand solves one round instance and explains the decision.
type RoundCommand struct {
	Meta
	// stdin is where "-" reads from; os.Stdin when nil.
	stdin io.Reader
}

var _ cli.Command = &RoundCommand{}

func (c *RoundCommand) Synopsis() string { return "Solve one FFT round and explain it" }

func (c *RoundCommand) Help() string {
	return strings.TrimSpace(`
Usage: fftctl round [options] [FILE]

  Reads one round instance (GPU models with capacity, jobs, fairness state,
  round index and weights) as JSON from FILE, or from standard input when
  FILE is "-", solves FFT's round program exactly and prints the decision
  with every job's cost terms. Without FILE it solves the built-in example
  round. The format is documented in allocator/README.md ("Round instance
  format"); "fftctl round -example" prints the example to start from.

Round Options:

  -json
    Print the decision as JSON (objective, bound, gap, K, usage, and per
    job the chosen model, reason, rho and every option's cost terms).

  -example
    Print the built-in example instance and exit.
`)
}

func (c *RoundCommand) Run(args []string) int {
	var asJSON, example bool
	fs := c.FlagSet("round")
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&example, "example", false, "")
	if err := fs.Parse(args); err != nil {
		c.Ui.Error(c.Help())
		return 1
	}
	if example {
		c.Ui.Output(strings.TrimRight(string(allocator.ExampleRound()), "\n"))
		return 0
	}
	var src io.Reader
	switch rest := fs.Args(); {
	case len(rest) > 1:
		c.Ui.Error("This command takes at most one argument: FILE")
		c.Ui.Error(c.Help())
		return 1
	case len(rest) == 0:
		src = bytes.NewReader(allocator.ExampleRound())
	case rest[0] == "-":
		src = c.stdin
		if src == nil {
			src = os.Stdin
		}
	default:
		f, err := os.Open(rest[0])
		if err != nil {
			c.Ui.Error(fmt.Sprintf("Error reading round instance: %v", err))
			return 1
		}
		defer f.Close()
		src = f
	}
	in, err := allocator.ReadInstance(src)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error in round instance: %v", err))
		var fe *allocator.FieldError
		if errors.As(err, &fe) {
			c.Ui.Error("Fix the named field and run the command again.")
		}
		return 1
	}
	d, err := allocator.Decide(context.Background(), in)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error solving round: %v", err))
		return 1
	}
	if asJSON {
		out, err := json.MarshalIndent(d, "", "  ")
		if err != nil {
			c.Ui.Error(fmt.Sprintf("Error encoding decision: %v", err))
			return 1
		}
		c.Ui.Output(string(out))
		return 0
	}
	c.Ui.Output(formatDecision(in, d))
	return 0
}

// formatDecision renders the decision as Nomad-style text: a summary, the
// usage per model and a table with one row per job and its cost terms.
func formatDecision(in *allocator.Instance, d *allocator.Decision) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Round         = %d\n", d.Round)
	fmt.Fprintf(&b, "Status        = %s\n", d.Status)
	fmt.Fprintf(&b, "Objective     = %.6f\n", d.Objective)
	fmt.Fprintf(&b, "Bound         = %.6f\n", d.Bound)
	fmt.Fprintf(&b, "Gap           = %.3g\n", d.Gap)
	fmt.Fprintf(&b, "K(t)          = %d GPUs\n", d.MaxUsage)
	fmt.Fprintf(&b, "Solve time    = %s (%d nodes)\n", d.Stats.Runtime, d.Stats.Nodes)
	b.WriteString("\nGPU models\n")
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "Model\tCapacity\tUsed")
	for _, m := range in.Models {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", m.Name, m.GPUs, d.Usage[m.Name])
	}
	tw.Flush()
	b.WriteString("\nJobs\n")
	tw = tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tGPUs\tModel\tRho\tWait\tVolume\tSwitch\tCredit\tCost\tReason")
	jobs := make([]int, len(d.Jobs))
	for k := range jobs {
		jobs[k] = k
	}
	// Running jobs first, then waiting ones, each by id: stable output.
	sort.SliceStable(jobs, func(a, b int) bool {
		ja, jb := d.Jobs[jobs[a]], d.Jobs[jobs[b]]
		if (ja.Model == "") != (jb.Model == "") {
			return ja.Model != ""
		}
		return ja.ID < jb.ID
	})
	for _, k := range jobs {
		jd := d.Jobs[k]
		t := jd.Chosen
		if jd.Model == "" {
			t = bestOption(jd.Options())
		}
		model := jd.Model
		if model == "" {
			model = "-"
			if t.Model != "" {
				model = "(" + t.Model + ")"
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%s\n",
			jd.ID, in.Jobs[k].GPUs, model, jd.Rho, t.Wait, t.Volume, t.Switch, t.Credit, t.Cost, jd.Reason.Message)
	}
	tw.Flush()
	b.WriteString("\nTerms are for the chosen model; a waiting job shows its cheapest model in parentheses.")
	return b.String()
}

func bestOption(opts []allocator.Terms) allocator.Terms {
	var best allocator.Terms
	for k, o := range opts {
		if k == 0 || o.Cost < best.Cost {
			best = o
		}
	}
	return best
}
