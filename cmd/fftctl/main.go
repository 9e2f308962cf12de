// Command fftctl is nomad-fft's operator and user CLI.
package main

import (
	"os"

	"github.com/nomad-fft/nomad-fft/cmd/fftctl/command"
)

func main() {
	os.Exit(command.Run(os.Args[1:]))
}
