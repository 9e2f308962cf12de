package main

import (
	"context"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins"

	"github.com/nomad-fft/nomad-fft/driver/task"
)

func main() {
	// Importing driver/task installs the executor's entry point (its init), so that this
	// binary also serves as the executor the driver launches per task.
	plugins.ServeCtx(func(ctx context.Context, logger hclog.Logger) any { return task.New(ctx, logger) })
}
