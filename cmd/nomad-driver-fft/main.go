package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins"

	"github.com/nomad-fft/nomad-fft/cmd/internal/version"
	"github.com/nomad-fft/nomad-fft/driver/task"
)

func main() {
	if code, done := flags(os.Args[1:], os.Stdout, os.Stderr); done {
		os.Exit(code)
	}
	// Importing driver/task installs the executor's entry point (its init), so that this
	// binary also serves as the executor the driver launches per task.
	plugins.ServeCtx(func(ctx context.Context, logger hclog.Logger) any { return task.New(ctx, logger) })
}

// flags handles what an operator may run by hand (-version, -h). The agent starts the plugin
// without arguments, and the executor's re-run of this binary ("executor <json>") never gets
// here (the driver package's init takes it), so any other argument is left alone.
func flags(args []string, stdout, stderr io.Writer) (code int, done bool) {
	if len(args) != 1 {
		return 0, false
	}
	switch args[0] {
	case "-version", "--version", "version":
		fmt.Fprintln(stdout, "nomad-driver-fft "+version.Get().String())
		return 0, true
	case "-h", "-help", "--help":
		fmt.Fprintln(stderr, "Usage: nomad-driver-fft [-version]\n\n  A Nomad task driver plugin (driver = \"fft\"): the Nomad agent starts it from its plugin_dir.")
		return 0, true
	}
	return 0, false
}
