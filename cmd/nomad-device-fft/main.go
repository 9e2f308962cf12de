// Command nomad-device-fft is the nomad-fft Nomad device plugin for NVIDIA GPUs. The Nomad
// agent starts it from its plugin_dir; it is not meant to be run by hand.
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
