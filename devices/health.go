package devices

import (
	"fmt"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/hashicorp/go-hclog"
)

// healthEvents are the NVML events that make a GPU unhealthy.
const healthEvents = uint64(nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError)

const (
	// eventWaitTimeout bounds each NVML event wait, and so how long Close waits for the watcher.
	eventWaitTimeout = 500 * time.Millisecond
	// eventRetryDelay spaces out retries after an unexpected event-wait error.
	eventRetryDelay = 5 * time.Second
)

// IsApplicationXID reports whether an XID is caused by the application running on the GPU
// (NVIDIA's XID catalogue: 13 graphics engine exception, 31 GPU memory page fault, 43 GPU
// stopped processing, 45 preemptive cleanup, 68 video processor exception, 109 context switch
// timeout). Such XIDs do not make a GPU unhealthy; all others reported as critical do.
func IsApplicationXID(xid uint64) bool {
	switch xid {
	case 13, 31, 43, 45, 68, 109:
		return true
	}
	return false
}

// eventWatcher turns NVML events into per-device health.
type eventWatcher struct {
	lib    nvml.Interface
	logger hclog.Logger
	notify func()

	mu sync.Mutex
	// set is nil when NVML cannot create event sets; every device's health is then unknown.
	set       nvml.EventSet
	watched   map[string]bool   // events registered
	unwatched map[string]bool   // registration not supported or failed
	bad       map[string]Health // sticky unhealthy verdicts
	started   bool
	stop      chan struct{}
	done      chan struct{}
}

func newEventWatcher(lib nvml.Interface, logger hclog.Logger, notify func()) *eventWatcher {
	w := &eventWatcher{
		lib:       lib,
		logger:    logger,
		notify:    notify,
		watched:   map[string]bool{},
		unwatched: map[string]bool{},
		bad:       map[string]Health{},
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	set, ret := lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		logger.Warn("NVML event sets not available; GPU health is unknown (only lost GPUs are detected)", "error", ret)
		close(w.done)
		return w
	}
	w.set = set
	return w
}

// register asks NVML for the health events of dev; it is idempotent.
func (w *eventWatcher) register(uuid string, dev nvml.Device) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.set == nil || w.watched[uuid] || w.unwatched[uuid] {
		return
	}
	supported, ret := dev.GetSupportedEventTypes()
	if ret != nvml.SUCCESS || supported&healthEvents == 0 {
		w.unwatched[uuid] = true
		w.logger.Info("NVML health events not supported; health unknown", "uuid", uuid, "error", ret)
		return
	}
	if ret := dev.RegisterEvents(supported&healthEvents, w.set); ret != nvml.SUCCESS {
		w.unwatched[uuid] = true
		w.logger.Warn("registering NVML health events failed; health unknown", "uuid", uuid, "error", ret)
		return
	}
	w.watched[uuid] = true
	if !w.started {
		w.started = true
		go w.run()
	}
}

// health returns the device's health from events alone.
func (w *eventWatcher) health(uuid string) Health {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h, ok := w.bad[uuid]; ok {
		return h
	}
	if w.watched[uuid] {
		return Health{Healthy: true, Known: true, Description: HealthDescOK}
	}
	return Health{Healthy: true, Known: false, Description: HealthDescUnknown}
}

func (w *eventWatcher) run() {
	defer close(w.done)
	for {
		select {
		case <-w.stop:
			return
		default:
		}
		data, ret := w.set.Wait(uint32(eventWaitTimeout / time.Millisecond))
		switch ret {
		case nvml.SUCCESS:
			w.handle(data)
		case nvml.ERROR_TIMEOUT:
		case nvml.ERROR_GPU_IS_LOST:
			// The next discovery finds which GPU answers "lost".
			w.logger.Error("NVML event wait reports a lost GPU")
			w.notify()
			w.pause()
		default:
			w.logger.Warn("waiting for NVML events failed; retrying", "error", ret, "retry_in", eventRetryDelay)
			w.pause()
		}
	}
}

func (w *eventWatcher) pause() {
	select {
	case <-w.stop:
	case <-time.After(eventRetryDelay):
	}
}

func (w *eventWatcher) handle(data nvml.EventData) {
	if data.Device == nil {
		return
	}
	uuid, ret := data.Device.GetUUID()
	if ret != nvml.SUCCESS {
		w.logger.Warn("NVML event for a device without UUID", "event_type", data.EventType, "error", ret)
		return
	}
	var desc string
	switch {
	case data.EventType&nvml.EventTypeXidCriticalError != 0:
		if IsApplicationXID(data.EventData) {
			w.logger.Info("application XID; GPU stays healthy", "uuid", uuid, "xid", data.EventData)
			return
		}
		desc = fmt.Sprintf("unhealthy: critical XID %d reported by NVML", data.EventData)
	case data.EventType&nvml.EventTypeDoubleBitEccError != 0:
		desc = "unhealthy: double-bit ECC error reported by NVML"
	default:
		return
	}
	w.mu.Lock()
	_, already := w.bad[uuid]
	if !already {
		w.bad[uuid] = Health{Healthy: false, Known: true, Description: desc}
	}
	w.mu.Unlock()
	if !already {
		w.logger.Error("GPU marked unhealthy", "uuid", uuid, "reason", desc)
		w.notify()
	}
}

func (w *eventWatcher) close() {
	w.mu.Lock()
	started := w.started
	w.mu.Unlock()
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	if started {
		<-w.done
	}
	if w.set != nil {
		_ = w.set.Free()
	}
}

// clear drops the sticky unhealthy verdict on a device and reports whether there was one.
func (w *eventWatcher) clear(uuid string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, bad := w.bad[uuid]
	delete(w.bad, uuid)
	return bad
}
