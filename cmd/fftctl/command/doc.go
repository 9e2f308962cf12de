// Package command holds fftctl's commands, one type per command in Nomad's
// CLI conventions: a shared Meta, Help, Synopsis and Run(args) int.
package command
