package task

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/nomad/drivers/shared/eventer"
	"github.com/hashicorp/nomad/drivers/shared/executor"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/hashicorp/nomad/plugins/shared/hclspec"
	pstructs "github.com/hashicorp/nomad/plugins/shared/structs"
)

const (
	// PluginName is the driver's name in jobspecs: driver = "fft".
	PluginName = "fft"
	// PluginVersion is reported in PluginInfo and the fingerprint.
	PluginVersion     = "0.1.0"
	fingerprintPeriod = 30 * time.Second
	taskHandleVersion = 1
)

var pluginInfo = &base.PluginInfoResponse{
	Type:              base.PluginTypeDriver,
	PluginApiVersions: []string{drivers.ApiVersion010},
	PluginVersion:     PluginVersion,
	Name:              PluginName,
}

// capabilities: a process on the host, as raw_exec: no file system isolation and no cgroup,
// so that the task can open /dev/nvidia* (the executor's basic cgroup would block it).
var capabilities = &drivers.Capabilities{
	SendSignals:       true,
	Exec:              true,
	FSIsolation:       drivers.FSIsolationNone,
	NetIsolationModes: []drivers.NetIsolationMode{drivers.NetIsolationModeHost, drivers.NetIsolationModeGroup},
	MountConfigs:      drivers.MountConfigSupportNone,
}

// Driver is the fft task driver.
type Driver struct {
	eventer *eventer.Eventer
	tasks   *taskStore
	ctx     context.Context
	logger  hclog.Logger

	mu          sync.RWMutex
	config      Config
	nomadConfig *base.ClientDriverConfig
	// publisher is nil when no allocator address is configured.
	publisher publisher
}

// New returns the driver; ctx ends its background work.
func New(ctx context.Context, logger hclog.Logger) *Driver {
	logger = logger.Named(PluginName)
	return &Driver{
		eventer: eventer.NewEventer(ctx, logger),
		tasks:   newTaskStore(),
		ctx:     ctx,
		logger:  logger,
		config:  DefaultConfig(),
	}
}

func (d *Driver) PluginInfo() (*base.PluginInfoResponse, error) { return pluginInfo, nil }

func (d *Driver) ConfigSchema() (*hclspec.Spec, error) { return configSpec, nil }

func (d *Driver) SetConfig(cfg *base.Config) error {
	var raw []byte
	if cfg != nil {
		raw = cfg.PluginConfig
	}
	c, err := ParseConfig(raw)
	if err != nil {
		return err
	}
	var pub publisher
	if c.AllocatorAddress != "" {
		if pub, err = newHTTPPublisher(c); err != nil {
			return err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.config = c
	d.publisher = pub
	if cfg != nil && cfg.AgentConfig != nil {
		d.nomadConfig = cfg.AgentConfig.Driver
	}
	return nil
}

func (d *Driver) settings() (Config, publisher, *base.ClientDriverConfig) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.config, d.publisher, d.nomadConfig
}

func (d *Driver) TaskConfigSchema() (*hclspec.Spec, error) { return taskConfigSpec, nil }

func (d *Driver) Capabilities() (*drivers.Capabilities, error) { return capabilities, nil }

// Fingerprint reports the driver healthy: it depends on neither Consul nor the allocator
// (reports to an allocator that is down are retried).
func (d *Driver) Fingerprint(ctx context.Context) (<-chan *drivers.Fingerprint, error) {
	ch := make(chan *drivers.Fingerprint)
	go func() {
		defer close(ch)
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-d.ctx.Done():
				return
			case <-t.C:
				t.Reset(fingerprintPeriod)
				select {
				case ch <- d.fingerprint():
				case <-ctx.Done():
					return
				case <-d.ctx.Done():
					return
				}
			}
		}
	}()
	return ch, nil
}

func (d *Driver) fingerprint() *drivers.Fingerprint {
	cfg, _, _ := d.settings()
	attrs := map[string]*pstructs.Attribute{
		"driver.fft":         pstructs.NewBoolAttribute(true),
		"driver.fft.version": pstructs.NewStringAttribute(PluginVersion),
	}
	if cfg.CheckpointRoot != "" {
		// Jobs can keep to the clients that share a checkpoint root.
		attrs["driver.fft.checkpoint_root"] = pstructs.NewStringAttribute(cfg.CheckpointRoot)
	}
	return &drivers.Fingerprint{Attributes: attrs, Health: drivers.HealthStateHealthy, HealthDescription: drivers.DriverHealthy}
}

func (d *Driver) StartTask(cfg *drivers.TaskConfig) (*drivers.TaskHandle, *drivers.DriverNetwork, error) {
	if _, ok := d.tasks.Get(cfg.ID); ok {
		return nil, nil, fmt.Errorf("task with ID %q already started", cfg.ID)
	}
	conf, pub, nomadConf := d.settings()
	logger := d.logger.With("alloc_id", cfg.AllocID, "task_name", cfg.Name)
	var index uint64
	if conf.CheckpointRoot != "" {
		// ParseConfig makes checkpoint_root need allocator_address: pub is set.
		token, err := newIdentitySource(cfg).token()
		if err != nil {
			logger.Warn("reading the task's workload identity failed; asking the allocator without it", "error", err)
		}
		if index, err = askIncarnation(d.ctx, pub, cfg, token, logger); err != nil {
			return nil, nil, err
		}
	}
	tc, p, g, u, err := prepareTask(cfg, conf, index)
	if err != nil {
		return nil, nil, err
	}
	if conf.CheckpointRoot != "" {
		if jobDir, err := jobCheckpointDir(cfg, conf.CheckpointRoot); err == nil {
			removeStaleIncarnations(jobDir, index, logger)
		}
	}
	logger.Info("starting task", "command", tc.Command, "user", u.Name, "uid", u.UID, "gpus", g.IDs, "checkpoint_dir", p.CheckpointDir)
	// The follower notes where the files end before the process starts: what is there is
	// from an earlier run, what comes after is this run's.
	startedAt := time.Now().Round(time.Millisecond)
	fol, err := newFollower(p, tc, startedAt, logger)
	if err != nil {
		return nil, nil, fmt.Errorf("starting task %q: %w", cfg.Name, err)
	}
	exec, client, pid, err := launch(logger, nomadConf, cfg, tc, g, p, u)
	if err != nil {
		return nil, nil, err
	}
	st := taskState{
		ReattachConfig: pstructs.ReattachConfigFromGoPlugin(client.ReattachConfig()),
		Pid:            pid, StartedAt: startedAt, Task: tc, Paths: p, GPUModel: g.Model, GPUIDs: g.IDs,
	}
	handle := drivers.NewTaskHandle(taskHandleVersion)
	handle.Config = cfg
	if err := handle.SetDriverState(&st); err != nil {
		_ = exec.Shutdown("", 0)
		client.Kill()
		return nil, nil, fmt.Errorf("starting task %q: saving its state: %w", cfg.Name, err)
	}
	d.track(cfg, st, exec, client, fol, logger)
	return handle, nil, nil
}

// prepareTask checks the task's config and user, and creates its folders: the checkpoint
// folder is the task user's own (0700), so that a task of another user can neither read nor
// change it; its identity file is made the task user's own (0600) as well.
func prepareTask(cfg *drivers.TaskConfig, conf Config, index uint64) (TaskConfig, paths, gpus, taskUser, error) {
	tc, err := ParseTaskConfig(cfg)
	if err != nil {
		return TaskConfig{}, paths{}, gpus{}, taskUser{}, err
	}
	u, err := conf.resolveUser(cfg.User)
	if err != nil {
		return TaskConfig{}, paths{}, gpus{}, taskUser{}, fmt.Errorf("%w: user: %w", ErrInvalidTaskConfig, err)
	}
	p, err := taskPaths(cfg, conf.CheckpointRoot, index)
	if err != nil {
		return TaskConfig{}, paths{}, gpus{}, taskUser{}, err
	}
	if err := makeOwnedDir(p.CheckpointDir, u); err != nil {
		return TaskConfig{}, paths{}, gpus{}, taskUser{}, fmt.Errorf("creating the checkpoint folder: %w", err)
	}
	if err := ensureDir(p.StateFile); err != nil {
		return TaskConfig{}, paths{}, gpus{}, taskUser{}, err
	}
	if src := newIdentitySource(cfg); src.file != "" {
		if err := ownFile(src.file, u); err != nil {
			return TaskConfig{}, paths{}, gpus{}, taskUser{}, fmt.Errorf("making the task's identity file its own: %w", err)
		}
	}
	return tc, p, allocatedGPUs(cfg), u, nil
}

// launch starts an executor (this binary, re-run) and the task's process in it, without a
// cgroup, as raw_exec with no_cgroups; the executor makes the process a group leader.
func launch(logger hclog.Logger, nomadConf *base.ClientDriverConfig, cfg *drivers.TaskConfig, tc TaskConfig, g gpus, p paths, u taskUser) (executor.Executor, *plugin.Client, int, error) {
	exec, client, err := executor.CreateExecutor(logger, nomadConf, &executor.ExecutorConfig{
		LogFile: filepath.Join(cfg.TaskDir().Dir, "executor.out"), LogLevel: "debug",
	})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("creating the executor: %w", err)
	}
	env := taskEnv(cfg, tc, g, p)
	sort.Strings(env)
	ps, err := exec.Launch(&executor.ExecCommand{
		Cmd: tc.Command, Args: tc.Args, Env: env, User: u.Name, TaskDir: cfg.TaskDir().Dir,
		StdoutPath: cfg.StdoutPath, StderrPath: cfg.StderrPath, NetworkIsolation: cfg.NetworkIsolation,
	})
	if err != nil {
		client.Kill()
		return nil, nil, 0, fmt.Errorf("launching %q: %w", tc.Command, err)
	}
	return exec, client, ps.Pid, nil
}

// track registers a started or recovered task and starts its wait and follow loops.
func (d *Driver) track(cfg *drivers.TaskConfig, st taskState, exec executor.Executor, client pluginClient, fol *follower, logger hclog.Logger) {
	conf, pub, _ := d.settings()
	h := &taskHandle{
		exec: exec, pluginClient: client, logger: logger, taskConfig: cfg, state: st,
		gpus: gpus{Model: st.GPUModel, IDs: st.GPUIDs}, follow: fol, identity: newIdentitySource(cfg),
		procState: drivers.TaskStateRunning, doneCh: make(chan struct{}),
	}
	h.emit = func(msg string, ann map[string]string) {
		ev := &drivers.TaskEvent{TaskID: cfg.ID, TaskName: cfg.Name, AllocID: cfg.AllocID, Timestamp: time.Now(), Message: msg, Annotations: ann}
		logger.Info("task event", "message", msg)
		if err := d.eventer.EmitEvent(ev); err != nil {
			logger.Warn("emitting a task event failed", "error", err)
		}
	}
	d.tasks.Set(cfg.ID, h)
	go h.run()
	go h.followLoop(d.ctx, conf.ReportPeriod, pub)
}

func (d *Driver) RecoverTask(handle *drivers.TaskHandle) error {
	if handle == nil {
		return errors.New("recovering a task: handle is nil")
	}
	if _, ok := d.tasks.Get(handle.Config.ID); ok {
		return nil
	}
	var st taskState
	if err := handle.GetDriverState(&st); err != nil {
		return fmt.Errorf("recovering task %q: decoding its state: %w", handle.Config.ID, err)
	}
	rc, err := pstructs.ReattachConfigToGoPlugin(st.ReattachConfig)
	if err != nil {
		return fmt.Errorf("recovering task %q: reattach config: %w", handle.Config.ID, err)
	}
	logger := d.logger.With("alloc_id", handle.Config.AllocID, "task_name", handle.Config.Name)
	exec, client, err := executor.ReattachToExecutor(rc, logger)
	if err != nil {
		return fmt.Errorf("recovering task %q: reattaching to its executor: %w", handle.Config.ID, err)
	}
	fol, err := recoverFollower(st.Paths, st.Task, st.StartedAt, logger)
	if err != nil {
		client.Kill()
		return fmt.Errorf("recovering task %q: %w", handle.Config.ID, err)
	}
	d.track(handle.Config, st, exec, client, fol, logger)
	logger.Info("recovered task", "pid", st.Pid)
	return nil
}

func (d *Driver) WaitTask(ctx context.Context, taskID string) (<-chan *drivers.ExitResult, error) {
	h, ok := d.tasks.Get(taskID)
	if !ok {
		return nil, drivers.ErrTaskNotFound
	}
	ch := make(chan *drivers.ExitResult)
	go func() {
		defer close(ch)
		select {
		case <-ctx.Done():
			return
		case <-d.ctx.Done():
			return
		case <-h.doneCh:
		}
		h.mu.RLock()
		res := h.exitResult.Copy()
		h.mu.RUnlock()
		select {
		case ch <- res:
		case <-ctx.Done():
		case <-d.ctx.Done():
		}
	}()
	return ch, nil
}

// StopTask sends the stop signal (kill_signal, SIGINT by default) to the task's process
// group and waits up to timeout (min of kill_timeout and the client's max_kill_timeout) for
// its checkpoint, then kills it.
func (d *Driver) StopTask(taskID string, timeout time.Duration, signal string) error {
	h, ok := d.tasks.Get(taskID)
	if !ok {
		return drivers.ErrTaskNotFound
	}
	if signal == "" {
		signal = "SIGINT"
	}
	sig, err := lookupSignal(signal)
	if err != nil {
		return fmt.Errorf("stopping task %q: %w", taskID, err)
	}
	if err := h.stop(timeout, sig); err != nil {
		return fmt.Errorf("stopping task %q: %w", taskID, err)
	}
	h.pluginClient.Kill()
	return nil
}

func (d *Driver) DestroyTask(taskID string, force bool) error {
	h, ok := d.tasks.Get(taskID)
	if !ok {
		return drivers.ErrTaskNotFound
	}
	if h.IsRunning() && !force {
		return errors.New("cannot destroy a running task: stop it first or force")
	}
	if !h.pluginClient.Exited() {
		if err := h.exec.Shutdown("", 0); err != nil {
			h.logger.Error("destroying the executor failed", "error", err)
		}
		h.pluginClient.Kill()
	}
	d.tasks.Delete(taskID)
	return nil
}

func (d *Driver) InspectTask(taskID string) (*drivers.TaskStatus, error) {
	h, ok := d.tasks.Get(taskID)
	if !ok {
		return nil, drivers.ErrTaskNotFound
	}
	return h.TaskStatus(), nil
}

func (d *Driver) TaskStats(ctx context.Context, taskID string, interval time.Duration) (<-chan *drivers.TaskResourceUsage, error) {
	h, ok := d.tasks.Get(taskID)
	if !ok {
		return nil, drivers.ErrTaskNotFound
	}
	return h.exec.Stats(ctx, interval)
}

func (d *Driver) TaskEvents(ctx context.Context) (<-chan *drivers.TaskEvent, error) {
	return d.eventer.TaskEvents(ctx)
}

// SignalTask sends signal to the task's process group. The task's checkpoint signal also
// starts a wait for the checkpoint marker, reported in a task event.
func (d *Driver) SignalTask(taskID string, signal string) error {
	h, ok := d.tasks.Get(taskID)
	if !ok {
		return drivers.ErrTaskNotFound
	}
	sig, err := lookupSignal(signal)
	if err != nil {
		return fmt.Errorf("signalling task %q: %w", taskID, err)
	}
	ckptSig, _ := lookupSignal(h.state.Task.CheckpointSignal)
	before := snapshotMarker(h.state.Paths.Marker)
	sentAt := time.Now()
	if err := h.signalGroup(sig); err != nil {
		return fmt.Errorf("signalling task %q: %w", taskID, err)
	}
	if sig == ckptSig {
		go h.awaitRequestedCheckpoint(before, sentAt, h.state.Task.CheckpointTimeout)
	}
	return nil
}

func (d *Driver) ExecTask(taskID string, cmd []string, timeout time.Duration) (*drivers.ExecTaskResult, error) {
	if len(cmd) == 0 {
		return nil, errors.New("exec: the command must have at least one element")
	}
	h, ok := d.tasks.Get(taskID)
	if !ok {
		return nil, drivers.ErrTaskNotFound
	}
	out, code, err := h.exec.Exec(time.Now().Add(timeout), cmd[0], cmd[1:])
	if err != nil {
		return nil, err
	}
	return &drivers.ExecTaskResult{Stdout: out, ExitResult: &drivers.ExitResult{ExitCode: code}}, nil
}

// pluginClient is the part of go-plugin's client the handle uses.
type pluginClient interface {
	Exited() bool
	Kill()
}

var _ drivers.DriverPlugin = (*Driver)(nil)
