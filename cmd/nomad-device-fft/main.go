package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/hashicorp/go-hclog"
	nomaddevice "github.com/hashicorp/nomad/plugins/device"

	"github.com/nomad-fft/nomad-fft/cmd/internal/version"
	"github.com/nomad-fft/nomad-fft/driver/device"
)

func main() {
	if code, done := flags(os.Args[1:], os.Stdout, os.Stderr); done {
		os.Exit(code)
	}
	device.PluginVersion = version.Get().Semver()
	// go-plugin forwards the plugin's stderr to the agent log; JSON keeps levels and fields.
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, JSONFormat: true})
	nomaddevice.Serve(device.New(logger), logger)
}

// flags handles what an operator may run by hand (-version, -h); the agent starts the plugin
// without arguments, and then done is false.
func flags(args []string, stdout, stderr io.Writer) (code int, done bool) {
	if len(args) == 0 {
		return 0, false
	}
	fs := flag.NewFlagSet(device.PluginName, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s [-version]\n\n  A Nomad device plugin: the Nomad agent starts it from its plugin_dir.\n\nOptions:\n", device.PluginName)
		fs.PrintDefaults()
	}
	v := fs.Bool("version", false, "Print the version and the commit it was built from, and exit.")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, true
		}
		return 2, true
	}
	if !*v || fs.NArg() > 0 {
		fs.Usage()
		return 2, true
	}
	fmt.Fprintln(stdout, device.PluginName+" "+version.Get().String())
	return 0, true
}
