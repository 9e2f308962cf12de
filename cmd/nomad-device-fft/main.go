package main

import (
	"github.com/hashicorp/go-hclog"
	nomaddevice "github.com/hashicorp/nomad/plugins/device"

	"github.com/nomad-fft/nomad-fft/driver/device"
)

func main() {
	// go-plugin forwards the plugin's stderr to the agent log; JSON keeps levels and fields.
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, JSONFormat: true})
	nomaddevice.Serve(device.New(logger), logger)
}
