package ui

import (
	"sync"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// Point is one recorded round as the plots show it.
type Point struct {
	Round int
	// BusyGPUs and TotalGPUs are the GPUs the round assigned and those it saw.
	BusyGPUs, TotalGPUs int
	// RhoMax and RhoMean are the fairness debt after the round over the jobs it decided.
	RhoMax, RhoMean float64
}

// Utilisation is BusyGPUs over TotalGPUs (0 with no GPUs).
func (p Point) Utilisation() float64 {
	if p.TotalGPUs == 0 {
		return 0
	}
	return float64(p.BusyGPUs) / float64(p.TotalGPUs)
}

// History keeps the last rounds for the plots, fed by the service's round hook. Its size is
// bounded, whatever the uptime.
type History struct {
	mu     sync.Mutex
	size   int
	points []Point
}

// DefaultRounds is how many rounds the page plots: a day of 5-minute rounds is 288.
const DefaultRounds = 288

// NewHistory keeps the last size rounds (DefaultRounds when size <= 0).
func NewHistory(size int) *History {
	if size <= 0 {
		size = DefaultRounds
	}
	return &History{size: size}
}

// ObserveRound adds a recorded round; failed rounds leave no point.
func (h *History) ObserveRound(rec *loop.RoundRecord, err error) {
	if err != nil || rec == nil {
		return
	}
	p := pointOf(rec)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.points = append(h.points, p)
	if over := len(h.points) - h.size; over > 0 {
		h.points = append(h.points[:0:0], h.points[over:]...)
	}
}

// Points returns the kept rounds, oldest first.
func (h *History) Points() []Point {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Point(nil), h.points...)
}

func pointOf(rec *loop.RoundRecord) Point {
	p := Point{Round: rec.Round}
	for _, m := range rec.Models {
		p.TotalGPUs += m.GPUs
		p.BusyGPUs += rec.Usage[m.Name]
	}
	sum := 0.0
	for _, j := range rec.Jobs {
		sum += j.RhoAfter
		p.RhoMax = max(p.RhoMax, j.RhoAfter)
	}
	if len(rec.Jobs) > 0 {
		p.RhoMean = sum / float64(len(rec.Jobs))
	}
	return p
}
