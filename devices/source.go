package devices

import "context"

// Source reports the NVIDIA devices of this machine. Implementations are safe for
// concurrent use.
type Source interface {
	// GPUs returns the devices present now, sorted by UUID, each with its current health.
	// A machine without NVML returns no devices and no error.
	GPUs(ctx context.Context) ([]GPU, error)
	// Stats samples the statistics of the devices last returned by GPUs, sorted by UUID.
	Stats(ctx context.Context) ([]Stats, error)
	// Close releases NVML and stops background watchers.
	Close() error
}

// Notifier is implemented by sources that learn of changes between calls to GPUs (a health
// event, a lost GPU). Each receive means "call GPUs again"; bursts are coalesced.
type Notifier interface {
	Changes() <-chan struct{}
}
