// Command nomad-device-fft is the nomad-fft Nomad device plugin for NVIDIA GPUs; the Nomad agent
// starts it from its plugin_dir.
package main
