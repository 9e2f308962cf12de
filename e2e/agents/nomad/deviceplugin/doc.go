// Package deviceplugin runs a Nomad 1.6.1 server and clients that load nomad-device-fft
// with fake GPUs, and places jobs on them by GPU model.
package deviceplugin
