package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// DriverBinary is the task driver's executable file name (its plugin block label).
const DriverBinary = "nomad-driver-fft"

var (
	driverDirOnce sync.Once
	driverDir     string
	driverDirErr  error
)

// DriverPluginDir returns a folder holding the device plugin and the task driver, built once
// per test binary; cleanupPluginDir removes it.
func DriverPluginDir(t testing.TB) string {
	t.Helper()
	device := filepath.Join(PluginDir(t), PluginName)
	driver := MainBinary(t, DriverBinary)
	driverDirOnce.Do(func() {
		driverDir, driverDirErr = os.MkdirTemp("", "fft-driver-plugin-dir-")
		for _, bin := range []string{device, driver} {
			if driverDirErr == nil {
				driverDirErr = copyExecutable(bin, filepath.Join(driverDir, filepath.Base(bin)))
			}
		}
	})
	if driverDirErr != nil {
		t.Fatalf("preparing the driver's plugin dir: %v", driverDirErr)
	}
	return driverDir
}

func copyExecutable(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}

// AwaitFFTDriver waits until the fft task driver is healthy on each named client with
// checkpointRoot as its checkpoint_root.
func AwaitFFTDriver(t testing.TB, c *Cluster, checkpointRoot string, clients ...string) {
	t.Helper()
	for _, name := range clients {
		Eventually(t, 60*time.Second, 500*time.Millisecond, "driver fft healthy on "+name, func() error {
			n, _, err := c.API.Nodes().Info(c.NodeIDs[name], nil)
			if err != nil {
				return err
			}
			if d := n.Drivers["fft"]; d == nil || !d.Healthy || n.Attributes["driver.fft.checkpoint_root"] != checkpointRoot {
				return fmt.Errorf("driver fft on %s: %+v", name, d)
			}
			return nil
		})
	}
}
