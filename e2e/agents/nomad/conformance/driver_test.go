package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/client/allocdir"
	"github.com/hashicorp/nomad/helper/pluginutils/loader"
	"github.com/hashicorp/nomad/helper/uuid"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/nomad-fft/nomad-fft/e2e/agentrun"
	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// driverName is the task driver's name in jobspecs; driverBinary its executable (the
// agent's plugin block label).
const (
	driverName   = "fft"
	driverBinary = "nomad-driver-fft"
)

// newDriverLoader runs Nomad's plugin loader over a folder holding only the built driver.
func newDriverLoader(t *testing.T, agentConfig string) (*loader.PluginLoader, error) {
	t.Helper()
	dir := filepath.Dir(testenv.MainBinary(t, driverBinary))
	logger := hclog.New(&hclog.LoggerOptions{Name: "loader", Level: hclog.Warn, Output: testWriter{t}})
	t.Cleanup(func() { agentrun.KillChildren(filepath.Join(dir, driverBinary)) })
	return loader.NewPluginLoader(&loader.PluginLoaderConfig{
		Logger:            logger,
		PluginDir:         dir,
		Configs:           parseAgentPlugins(t, agentConfig),
		SupportedVersions: map[string][]string{base.PluginTypeDriver: {drivers.ApiVersion010}},
	})
}

// dispenseDriver starts a driver plugin process through the loader.
func dispenseDriver(t *testing.T, l *loader.PluginLoader) (drivers.DriverPlugin, loader.PluginInstance) {
	t.Helper()
	inst, err := l.Dispense(driverName, base.PluginTypeDriver, nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatalf("Dispense: %v", err)
	}
	t.Cleanup(inst.Kill)
	d, ok := inst.Plugin().(drivers.DriverPlugin)
	if !ok {
		t.Fatalf("dispensed plugin is a %T, not a driver", inst.Plugin())
	}
	return d, inst
}

const driverConfig = `
plugin "nomad-driver-fft" {
  config {
    report_period     = "500ms"
    allocator_address = "http://127.0.0.1:1"
  }
}
`

func TestDriverHandshakeAndFingerprint(t *testing.T) {
	l, err := newDriverLoader(t, driverConfig)
	if err != nil {
		t.Fatalf("NewPluginLoader: %v", err)
	}
	infos := l.Catalog()[base.PluginTypeDriver]
	if len(infos) != 1 || infos[0].Name != driverName || infos[0].PluginVersion == "" {
		t.Fatalf("driver catalog = %+v, want one driver named %q", infos, driverName)
	}
	d, _ := dispenseDriver(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch, err := d.Fingerprint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// No allocator listens on port 1: the driver is healthy without it.
	select {
	case fp := <-ch:
		if fp.Health != drivers.HealthStateHealthy || fp.Attributes["driver.fft"] == nil {
			t.Errorf("fingerprint %+v", fp)
		}
	case <-ctx.Done():
		t.Fatal("no fingerprint")
	}
	caps, err := d.Capabilities()
	if err != nil || !caps.SendSignals || caps.FSIsolation != drivers.FSIsolationNone {
		t.Errorf("capabilities %+v, %v", caps, err)
	}
}

func TestDriverBadConfigRefused(t *testing.T) {
	for _, tc := range []struct{ config, want string }{
		{`allocator = "x"`, `"allocator"`},
		{`allocator_address = "127.0.0.1:4650"`, "allocator_address: want an http(s) URL"},
		{`report_period = "soon"`, `report_period: invalid duration "soon"`},
		{`checkpoint_root = "relative"`, "checkpoint_root: want an absolute path"},
		{"allocator_address = \"https://127.0.0.1:4650\"\n allocator_ca_file = \"/nonexistent/ca.pem\"",
			`allocator_ca_file = "/nonexistent/ca.pem": no such file or directory`},
		{"allocator_address = \"https://127.0.0.1:4650\"\n allocator_key_file = \"/nonexistent/key.pem\"",
			"allocator_cert_file and allocator_key_file: a client certificate needs both"},
	} {
		_, err := newDriverLoader(t, `plugin "nomad-driver-fft" { config { `+tc.config+` } }`)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("config %s: loader error %v, want one containing %q", tc.config, err, tc.want)
		}
	}
}

// trainerScript is a task in sh: progress lines every 0.1 s, and on SIGTERM a checkpoint
// marker, then exit.
const trainerScript = `
i=0
trap 'printf "{\"step\": %d, \"bytes\": 4096}" $i > "$FFT_CHECKPOINT_MARKER.tmp"; mv "$FFT_CHECKPOINT_MARKER.tmp" "$FFT_CHECKPOINT_MARKER"; exit 0' TERM
while :; do
  i=$((i+1))
  echo "{\"t\": $(date +%s), \"done\": $i}" >> "$FFT_PROGRESS_FILE"
  sleep 0.1
done
`

// TestDriverTaskSurvivesPluginKill starts a task through the loader-launched plugin (whose
// executor is the plugin binary re-run), kills the plugin process, recovers the task in a new
// one from the handle, and stops it with a checkpoint.
func TestDriverTaskSurvivesPluginKill(t *testing.T) {
	l, err := newDriverLoader(t, driverConfig)
	if err != nil {
		t.Fatalf("NewPluginLoader: %v", err)
	}
	d1, inst1 := dispenseDriver(t, l)
	root := testenv.TempDir(t)
	ad := allocdir.NewAllocDir(hclog.NewNullLogger(), root, uuid.Generate())
	if err := ad.Build(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ad.Destroy() }) // unmounts the secrets tmpfs before TempDir's removal
	td := ad.NewTaskDir("train")
	if err := td.Build(false, nil); err != nil {
		t.Fatal(err)
	}
	// The driver runs the task as nobody, which must reach its task folder.
	testenv.Traversable(t, root)
	task := &drivers.TaskConfig{
		ID: uuid.Generate(), AllocID: uuid.Generate(), Name: "train", JobID: "conformance", Namespace: "default",
		TaskGroupName: "main", AllocDir: ad.AllocDir,
		DeviceEnv: map[string]string{"NVIDIA_VISIBLE_DEVICES": "GPU-1", "FFT_GPU_MODEL": "Tesla V100-SXM2-16GB"},
		Resources: &drivers.Resources{LinuxResources: &drivers.LinuxResources{}},
	}
	if err := task.EncodeConcreteDriverConfig(map[string]any{"command": "/bin/sh", "args": []string{"-c", trainerScript}}); err != nil {
		t.Fatal(err)
	}
	handle, _, err := d1.StartTask(task)
	if err != nil {
		t.Fatalf("StartTask: %v", err)
	}
	time.Sleep(time.Second)

	inst1.Kill()
	d2, _ := dispenseDriver(t, l)
	if err := d2.RecoverTask(handle); err != nil {
		t.Fatalf("RecoverTask in a new plugin process: %v", err)
	}
	t.Cleanup(func() { _ = d2.DestroyTask(task.ID, true) })
	st, err := d2.InspectTask(task.ID)
	if err != nil || st.State != drivers.TaskStateRunning {
		t.Fatalf("after the plugin was killed: %+v, %v; want the task running", st, err)
	}
	var pid int
	if _, err := fmt.Sscan(st.DriverAttributes["pid"], &pid); err != nil || syscall.Kill(pid, 0) != nil {
		t.Errorf("the task's process %q is not alive", st.DriverAttributes["pid"])
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := d2.TaskEvents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := d2.StopTask(task.ID, 10*time.Second, "SIGTERM"); err != nil {
		t.Fatalf("StopTask: %v", err)
	}
	select {
	case ev := <-events:
		if !strings.HasPrefix(ev.Message, "Checkpoint saved: 4.1 kB in ") || ev.Annotations["checkpoint_bytes"] != "4096" {
			t.Errorf("event %q %v", ev.Message, ev.Annotations)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no checkpoint event")
	}
	b, err := os.ReadFile(filepath.Join(td.LocalDir, "fft-progress.jsonl"))
	if err != nil || strings.Count(string(b), "\n") < 5 {
		t.Errorf("progress file: %d lines, %v", strings.Count(string(b), "\n"), err)
	}
}
