// Package device is the nomad-device-fft Nomad device plugin: it fingerprints NVIDIA GPUs found
// by package devices, grouped by model, reserves them through NVIDIA_VISIBLE_DEVICES and
// streams their statistics.
package device
