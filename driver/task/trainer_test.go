package task

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nomad-fft/nomad-fft/e2e/agentrun"
)

// The test binary doubles as the executor (the executor package's init) and as a fake
// trainer, run as `<test binary> fake-trainer [flags]`.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "fake-trainer" {
		os.Exit(fakeTrainer(os.Args[2:]))
	}
	// Executors are go-plugin servers, and go-plugin kills one that has not exited 2 s after
	// DestroyTask asked it to (on a loaded machine), leaving its socket in TMPDIR.
	os.Exit(agentrun.WithTempDir("fft-driver-test-", m.Run))
}

// fakeTrainer does one work unit every 1/rate seconds, paced to an absolute schedule so that
// its true rate is exactly rate after warm-up (sleep overshoot does not accumulate), and
// appends a progress line every `every` units to FFT_PROGRESS_FILE, and one for the last unit
// when it ends after total. On the checkpoint signal it writes a checkpoint of `bytes` bytes
// (taking ckpt-time) and its marker; on SIGINT or SIGTERM it does the same and exits 0. It
// resumes from the marker's step.
func fakeTrainer(args []string) int {
	fs := flag.NewFlagSet("fake-trainer", flag.ContinueOnError)
	rate := fs.Float64("rate", 100, "work units per second after warm-up")
	warmup := fs.Int("warmup", 0, "units done at a quarter of the rate first")
	every := fs.Int("every", 5, "units between progress lines")
	total := fs.Int("total", 0, "units to do, then exit 0 (0: until stopped)")
	restart := fs.Duration("restart", 0, "start-up time before the first unit")
	bytes := fs.Int("bytes", 1000, "checkpoint size")
	ckptTime := fs.Duration("ckpt-time", 100*time.Millisecond, "time to write a checkpoint")
	ignoreStop := fs.Bool("ignore-stop", false, "ignore SIGINT and SIGTERM (never checkpoint)")
	envOut := fs.String("env-out", "", "write the GPU environment here as JSON")
	stdout := fs.Bool("stdout", false, "print \"step N\" lines instead of writing the progress file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *envOut != "" {
		env := map[string]string{}
		for _, k := range []string{EnvCUDAVisibleDevices, EnvNVIDIAVisibleDevices, EnvGPUModel, EnvGPUCount, EnvCheckpointDir, EnvCheckpointSignal} {
			env[k] = os.Getenv(k)
		}
		b, _ := json.Marshal(env)
		_ = os.WriteFile(*envOut, b, 0o644)
	}
	stop := make(chan os.Signal, 1)
	ckpt := make(chan os.Signal, 1)
	if *ignoreStop {
		signal.Ignore(syscall.SIGINT, syscall.SIGTERM)
	} else {
		signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	}
	signal.Notify(ckpt, syscall.SIGUSR1)

	done := 0
	if b, err := os.ReadFile(os.Getenv(EnvCheckpointMarker)); err == nil {
		var m marker
		if json.Unmarshal(b, &m) == nil {
			done = int(m.Step)
		}
	}
	progress, err := os.OpenFile(os.Getenv(EnvProgressFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	writeCheckpoint := func() {
		time.Sleep(*ckptTime)
		dir := os.Getenv(EnvCheckpointDir)
		_ = os.WriteFile(filepath.Join(dir, "model.ckpt"), []byte(strings.Repeat("x", *bytes)), 0o644)
		b, _ := json.Marshal(marker{Step: float64(done), Bytes: float64(*bytes)})
		tmp := os.Getenv(EnvCheckpointMarker) + ".tmp"
		_ = os.WriteFile(tmp, b, 0o644)
		_ = os.Rename(tmp, os.Getenv(EnvCheckpointMarker))
	}
	writeProgress := func() {
		if *stdout {
			fmt.Printf("epoch 0 step %d loss 0.1\n", done)
			return
		}
		fmt.Fprintf(progress, "{\"t\": %.6f, \"done\": %d, \"phase\": \"train\"}\n", float64(time.Now().UnixNano())/1e9, done)
	}
	time.Sleep(*restart)
	next := time.Now()
	for i := 0; *total == 0 || i < *total; i++ {
		unit := time.Duration(float64(time.Second) / *rate)
		if i < *warmup {
			unit *= 4
		}
		next = next.Add(unit)
		select {
		case <-stop:
			writeCheckpoint()
			return 0
		case <-ckpt:
			writeCheckpoint()
		case <-time.After(time.Until(next)):
		}
		done++
		if done%*every == 0 {
			writeProgress()
		}
	}
	// Done with total: the last step is reported even off the `every` grid, as a trainer's
	// final log line does (a run resumed from step 23 ends at 53, not at the line for 50).
	if done%*every != 0 {
		writeProgress()
	}
	return 0
}
