// Package taskdriver runs training jobs on nomad-driver-fft in a real Nomad 1.6.1 cluster: a
// job is stopped with a checkpoint event, resumes from that checkpoint on another model's
// client, and keeps running with exact progress when its plugin process is killed.
package taskdriver
