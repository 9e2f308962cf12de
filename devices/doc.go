// Package devices discovers NVIDIA GPUs through NVML and reports their facts, health and
// statistics, independent of Nomad.
package devices
