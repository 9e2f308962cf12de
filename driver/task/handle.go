package task

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/drivers/shared/executor"
	"github.com/hashicorp/nomad/plugins/drivers"
)

// exitGrace is how long a task that wrote its checkpoint gets to exit by itself before it
// is killed.
const exitGrace = 2 * time.Second

// taskHandle is one running task: its executor, its exit, and the follower of its progress.
type taskHandle struct {
	exec         executor.Executor
	pluginClient pluginClient
	logger       hclog.Logger
	taskConfig   *drivers.TaskConfig
	state        taskState
	gpus         gpus
	follow       *follower
	// identity is where the task's workload identity is read for each report.
	identity identitySource
	emit     func(msg string, annotations map[string]string)

	mu          sync.RWMutex
	procState   drivers.TaskState
	completedAt time.Time
	exitResult  *drivers.ExitResult

	doneCh chan struct{}
	// stopping makes a stop that overlaps another one wait for the first.
	stopping sync.Mutex
}

func (h *taskHandle) TaskStatus() *drivers.TaskStatus {
	h.mu.RLock()
	defer h.mu.RUnlock()
	st := h.follow.snapshot()
	attrs := map[string]string{
		"pid":           fmt.Sprint(h.state.Pid),
		"progress_file": h.state.Paths.ProgressFile,
		"checkpoint":    h.state.Paths.CheckpointDir,
		"done":          fmt.Sprint(st.Tracker.Done()),
	}
	if r, ok := st.Tracker.Rate(); ok {
		attrs["throughput_per_second"] = fmt.Sprint(r)
	}
	return &drivers.TaskStatus{
		ID: h.taskConfig.ID, Name: h.taskConfig.Name, State: h.procState,
		StartedAt: h.state.StartedAt, CompletedAt: h.completedAt, ExitResult: h.exitResult,
		DriverAttributes: attrs,
	}
}

func (h *taskHandle) IsRunning() bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.procState == drivers.TaskStateRunning
}

// run waits for the process to end and records how.
func (h *taskHandle) run() {
	ps, err := h.exec.Wait(context.Background())
	h.mu.Lock()
	defer h.mu.Unlock()
	defer close(h.doneCh)
	h.procState, h.completedAt = drivers.TaskStateExited, time.Now()
	if err != nil {
		h.exitResult = &drivers.ExitResult{Err: fmt.Errorf("waiting for the task's process: %w", err)}
		return
	}
	h.exitResult = &drivers.ExitResult{ExitCode: ps.ExitCode, Signal: ps.Signal}
}

// signalGroup sends sig to the task's whole process group: the executor signals only the
// main process, which a `sh -c` wrapper would not pass on. The executor starts the task as
// the leader of its own group, so the group ID is its PID.
func (h *taskHandle) signalGroup(sig syscall.Signal) error {
	if err := syscall.Kill(-h.state.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("sending %s to process group %d: %w", sig, h.state.Pid, err)
	}
	return nil
}

// groupAlive reports whether any process of the task's group is left: a wrapper (sh -c)
// may exit on the stop signal while the trainer it started still writes its checkpoint.
func (h *taskHandle) groupAlive() bool {
	return syscall.Kill(-h.state.Pid, 0) == nil
}

// awaitGroupExit waits until no process of the group is left, or ctx ends.
func (h *taskHandle) awaitGroupExit(ctx context.Context) {
	t := time.NewTicker(markerPoll)
	defer t.Stop()
	for h.groupAlive() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// stop asks the task for its checkpoint with sig, waits for the marker within budget, gives
// the task exitGrace to exit after it, then kills what is left of the group, and says in a
// task event whether a checkpoint was written.
func (h *taskHandle) stop(budget time.Duration, sig syscall.Signal) error {
	h.stopping.Lock()
	defer h.stopping.Unlock()
	select {
	case <-h.doneCh:
		return nil
	default:
	}
	before := snapshotMarker(h.state.Paths.Marker)
	sentAt := time.Now()
	if budget > 0 {
		if err := h.signalGroup(sig); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		m, seenAt, ok := awaitMarker(ctx, h.state.Paths.Marker, before, h.groupAlive)
		if ok {
			h.recordCheckpoint(m, seenAt.Sub(sentAt), "stop")
			graceCtx, cancelGrace := context.WithTimeout(ctx, exitGrace)
			h.awaitGroupExit(graceCtx)
			cancelGrace()
		} else {
			h.awaitGroupExit(ctx)
			h.emit(noCheckpointEvent(budget, "stop"))
		}
		cancel()
	}
	// SIGKILL to the main process, then to its group: also the children a wrapper left.
	if err := h.exec.Shutdown("", 0); err != nil && !h.pluginClient.Exited() {
		return fmt.Errorf("killing the task: %w", err)
	}
	select {
	case <-h.doneCh:
	case <-time.After(15 * time.Second):
		return errors.New("the task did not exit 15s after SIGKILL")
	}
	return nil
}

// awaitRequestedCheckpoint waits (after a checkpoint signal) for the marker and reports it.
func (h *taskHandle) awaitRequestedCheckpoint(before markerSnapshot, sentAt time.Time, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if m, seenAt, ok := awaitMarker(ctx, h.state.Paths.Marker, before, h.groupAlive); ok {
		h.recordCheckpoint(m, seenAt.Sub(sentAt), "signal")
		return
	}
	select {
	case <-h.doneCh: // a stop reports for itself
	default:
		h.emit(noCheckpointEvent(timeout, "signal"))
	}
}

func (h *taskHandle) recordCheckpoint(m marker, took time.Duration, reason string) {
	c := checkpointRecord{Step: m.Step, SizeBytes: m.Bytes, Seconds: took.Seconds(), At: time.Now()}
	if err := h.follow.setCheckpoint(c); err != nil {
		h.logger.Warn("saving the checkpoint record failed", "error", err)
	}
	h.emit(checkpointEvent(c, reason))
}

// followLoop reads progress every period and publishes it, until the task ends; then once
// more, so that the last lines are not lost.
func (h *taskHandle) followLoop(ctx context.Context, period time.Duration, pub publisher) {
	t := time.NewTicker(period)
	defer t.Stop()
	var last *followState
	warned := false
	step := func() {
		if _, err := h.follow.poll(); err != nil {
			h.logger.Warn("reading progress failed", "error", err)
		}
		st := h.follow.snapshot()
		if pub == nil || (last != nil && sameReport(*last, st)) {
			return
		}
		r, ok := st.report(h.gpus)
		if !ok {
			return
		}
		token, err := h.identity.token()
		if err != nil {
			h.logger.Warn("reading the task's workload identity failed; reporting without it", "error", err)
		}
		if token == "" && !warned {
			warned = true
			h.logger.Warn("the task exposes no workload identity: an allocator with -progress-auth=nomad refuses its reports; add identity { file = true } to the task")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := pub.Publish(ctx, h.taskConfig.Namespace, h.taskConfig.JobID, h.taskConfig.AllocID, token, r); err != nil {
			h.logger.Warn("publishing progress failed; retrying next period", "error", err)
			return
		}
		last = &st
	}
	for {
		select {
		case <-ctx.Done():
			// The plugin is going away; a new one recovers the task and follows on.
			return
		case <-h.doneCh:
			// A stop in progress records its checkpoint first.
			h.stopping.Lock()
			h.stopping.Unlock() //nolint:staticcheck // waiting for it, nothing to guard
			h.drain()
			step()
			return
		case <-t.C:
			step()
		}
	}
}

// drainPolls and drainPoll bound how long the last output is awaited after the exit: the
// stdout log is written by logmon, which may copy the task's last lines after it exited.
const (
	drainPolls = 10
	drainPoll  = 200 * time.Millisecond
)

// drain reads until two polls in a row find nothing new (or drainPolls).
func (h *taskHandle) drain() {
	if h.follow.pattern == nil {
		return
	}
	quiet := 0
	for i := 0; i < drainPolls && quiet < 2; i++ {
		time.Sleep(drainPoll)
		changed, err := h.follow.poll()
		if err != nil || !changed {
			quiet++
		} else {
			quiet = 0
		}
	}
}

func sameReport(a, b followState) bool {
	return a.Tracker.Lines == b.Tracker.Lines && a.Tracker.Last == b.Tracker.Last &&
		((a.Checkpoint == nil) == (b.Checkpoint == nil)) && (a.Checkpoint == nil || *a.Checkpoint == *b.Checkpoint)
}
