// Command nomad-driver-fft is the nomad-fft Nomad task driver for training jobs (driver =
// "fft"); the Nomad agent starts it from its plugin_dir, and it re-runs itself as the task's
// executor ("nomad-driver-fft executor <json>").
package main
