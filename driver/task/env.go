package task

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/client/allocdir"
	"github.com/hashicorp/nomad/plugins/drivers"
)

// Environment variables the driver sets for the task.
const (
	EnvCUDAVisibleDevices   = "CUDA_VISIBLE_DEVICES"
	EnvNVIDIAVisibleDevices = "NVIDIA_VISIBLE_DEVICES"
	EnvGPUModel             = "FFT_GPU_MODEL"
	EnvGPUCount             = "FFT_GPU_COUNT"
	EnvProgressFile         = "FFT_PROGRESS_FILE"
	EnvCheckpointDir        = "FFT_CHECKPOINT_DIR"
	EnvCheckpointMarker     = "FFT_CHECKPOINT_MARKER"
	EnvCheckpointSignal     = "FFT_CHECKPOINT_SIGNAL"
)

// File names inside the task's folders.
const (
	progressFileName = "fft-progress.jsonl"
	markerFileName   = "fft-checkpoint.json"
	recordFileName   = "fft-driver-checkpoint.json"
	stateFileName    = "fft-driver-state.json"
)

// gpus are the GPUs Nomad allocated to a task.
type gpus struct {
	// Model is the device name (the GPU model); models joined by "," if a task has several.
	Model string
	IDs   []string
}

// allocatedGPUs reads the GPUs reserved for the task from the environment the device plugin's
// reservation set (cfg.DeviceEnv, else the task's env): Nomad 1.6.1 does not send the
// allocated devices to a driver plugin (plugins/drivers: ResourcesToProto carries CPU, memory
// and networks only). nomad-device-fft and nomad-device-nvidia set NVIDIA_VISIBLE_DEVICES to
// the reserved IDs; nomad-device-fft also sets FFT_GPU_MODEL.
func allocatedGPUs(cfg *drivers.TaskConfig) gpus {
	get := func(k string) string {
		if v, ok := cfg.DeviceEnv[k]; ok {
			return v
		}
		return cfg.Env[k]
	}
	var g gpus
	for _, id := range strings.Split(get(EnvNVIDIAVisibleDevices), ",") {
		// "void", "none" and "all" are the container runtime's words, not devices.
		if id = strings.TrimSpace(id); id != "" && id != "void" && id != "none" && id != "all" {
			g.IDs = append(g.IDs, id)
		}
	}
	if len(g.IDs) > 0 {
		g.Model = get(EnvGPUModel)
	}
	return g
}

// paths are where the task's files live.
type paths struct {
	ProgressFile  string `json:"progress_file"`
	CheckpointDir string `json:"checkpoint_dir"`
	Marker        string `json:"marker"`
	// CheckpointRecord is the driver's measurement of the last checkpoint, beside it.
	CheckpointRecord string `json:"checkpoint_record"`
	StateFile        string `json:"state_file"`
	StdoutLogDir     string `json:"stdout_log_dir"`
	StdoutLogBase    string `json:"stdout_log_base"`
}

// taskPaths places the task's files: progress and driver state in the task folder, the
// checkpoint under the plugin's checkpoint_root (job-level, shared between clients, one
// folder per registration of the job: index is the job's create index) or else in the
// allocation's shared data folder.
func taskPaths(cfg *drivers.TaskConfig, checkpointRoot string, index uint64) (paths, error) {
	if cfg.AllocDir == "" || cfg.Name == "" {
		return paths{}, fmt.Errorf("placing the task's files: the task config has no alloc dir (%q) or name (%q)", cfg.AllocDir, cfg.Name)
	}
	td := cfg.TaskDir()
	ckpt := filepath.Join(td.SharedAllocDir, "data", "fft-checkpoint", cfg.Name)
	if checkpointRoot != "" {
		jobDir, err := jobCheckpointDir(cfg, checkpointRoot)
		if err != nil {
			return paths{}, err
		}
		group, err := folderName("group", cfg.TaskGroupName)
		if err != nil {
			return paths{}, err
		}
		task, err := folderName("task", cfg.Name)
		if err != nil {
			return paths{}, err
		}
		ckpt = filepath.Join(jobDir, incarnationFolder(index), group, task)
	}
	return paths{
		ProgressFile:     filepath.Join(td.LocalDir, progressFileName),
		CheckpointDir:    ckpt,
		Marker:           filepath.Join(ckpt, markerFileName),
		CheckpointRecord: filepath.Join(ckpt, recordFileName),
		// TaskConfig.TaskDir leaves PrivateDir empty; the client builds <task>/private.
		StateFile:     filepath.Join(td.Dir, allocdir.TaskPrivate, stateFileName),
		StdoutLogDir:  td.LogDir,
		StdoutLogBase: cfg.Name + ".stdout.",
	}, nil
}

// jobCheckpointDir is the job's folder under checkpoint_root: <root>/<namespace>/<job>, each
// escaped to one path step (a dispatched job's "parent/dispatch-…" is one folder).
func jobCheckpointDir(cfg *drivers.TaskConfig, checkpointRoot string) (string, error) {
	ns, err := folderName("namespace", cfg.Namespace)
	if err != nil {
		return "", err
	}
	job, err := folderName("job", cfg.JobID)
	if err != nil {
		return "", err
	}
	return filepath.Join(checkpointRoot, ns, job), nil
}

// folderName is v as one path step: percent-escaped (url.PathEscape escapes "/" and "%",
// so distinct names stay distinct), and never "", "." or "..".
func folderName(what, v string) (string, error) {
	if v == "" || v == "." || v == ".." {
		return "", fmt.Errorf("placing the checkpoint under checkpoint_root: %s %q cannot name a folder", what, v)
	}
	return url.PathEscape(v), nil
}

// taskEnv is the task's environment: Nomad's, with GPU visibility narrowed to exactly the
// allocated devices (CUDA reads CUDA_VISIBLE_DEVICES, not NVIDIA_VISIBLE_DEVICES) and the
// driver's files named.
func taskEnv(cfg *drivers.TaskConfig, tc TaskConfig, g gpus, p paths) []string {
	env := map[string]string{}
	for k, v := range cfg.Env {
		env[k] = v
	}
	ids := strings.Join(g.IDs, ",")
	env[EnvCUDAVisibleDevices] = ids
	env[EnvNVIDIAVisibleDevices] = ids
	env[EnvGPUModel] = g.Model
	env[EnvGPUCount] = strconv.Itoa(len(g.IDs))
	env[EnvProgressFile] = p.ProgressFile
	env[EnvCheckpointDir] = p.CheckpointDir
	env[EnvCheckpointMarker] = p.Marker
	env[EnvCheckpointSignal] = strings.ToUpper(tc.CheckpointSignal)
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}
