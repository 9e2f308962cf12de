package command

import (
	"context"
	"os"
	"os/signal"

	"github.com/hashicorp/cli"

	"github.com/nomad-fft/nomad-fft/allocator/sim"
)

// SimulateCommand runs the trace-driven simulator. Its flags and logic live
// in allocator/sim so that tests can drive it without a CLI; it writes to
// the raw streams because its progress line redraws itself.
type SimulateCommand struct{ Meta }

var _ cli.Command = &SimulateCommand{}

func (c *SimulateCommand) Synopsis() string { return sim.CommandSynopsis }
func (c *SimulateCommand) Help() string     { return sim.CommandHelp() }

func (c *SimulateCommand) Run(args []string) int {
	// Ctrl-C stops the runs between rounds.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return sim.RunCommand(ctx, args, c.Stdout, c.Stderr)
}
