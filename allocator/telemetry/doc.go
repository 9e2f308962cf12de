// Package telemetry exports the allocator service's rounds and state as Prometheus metrics and
// as one structured audit log event per round.
package telemetry
