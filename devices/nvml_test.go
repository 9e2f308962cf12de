package devices

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
)

// syncBuffer is a log sink safe for the event watcher's goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func testLogger(t testing.TB) (hclog.Logger, *syncBuffer) {
	t.Helper()
	buf := &syncBuffer{}
	return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Output: buf, Level: hclog.Debug}), buf
}

// mockSource completes a go-nvml mock server and returns a Source over it, closed at the end.
func mockSource(t *testing.T, srv *server.Server) (*NVML, *Fake, *syncBuffer) {
	t.Helper()
	f := completeServer(srv, nil)
	logger, buf := testLogger(t)
	s := NewNVML(f, logger)
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, f, buf
}

func device(f *Fake, i int) *server.Device { return f.Devices[i].(*server.Device) }

func TestGPUsOnMockServers(t *testing.T) {
	cases := []struct {
		name      string
		srv       func() *server.Server
		model     string
		memoryMiB uint64
		cc        string
		driver    string
	}{
		{"dgxa100", dgxa100.New, "Mock NVIDIA A100-SXM4-40GB", 40960, "8.0", "550.54.15"},
		{"dgxh100", dgxh100.New, "NVIDIA H100 80GB HBM3", 81920, "9.0", "550.54.15"},
		{"dgxh200", dgxh200.New, "NVIDIA H200 141GB HBM3e", 144384, "9.0", "550.54.15"},
		{"dgxb200", dgxb200.New, "NVIDIA B200 180GB HBM3e", 184320, "10.0", "560.28.03"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := tc.srv()
			s, f, _ := mockSource(t, srv)
			got, err := s.GPUs(context.Background())
			if err != nil {
				t.Fatalf("GPUs: %v", err)
			}
			if len(got) != 8 {
				t.Fatalf("GPUs returned %d devices, want 8", len(got))
			}
			for i := 1; i < len(got); i++ {
				if got[i-1].UUID >= got[i].UUID {
					t.Errorf("GPUs not sorted by UUID: %q before %q", got[i-1].UUID, got[i].UUID)
				}
			}
			byUUID := map[string]GPU{}
			for _, g := range got {
				byUUID[g.UUID] = g
			}
			for i := range f.Devices {
				d := device(f, i)
				want := GPU{
					UUID: d.UUID, Model: tc.model, Index: i, MemoryMiB: tc.memoryMiB,
					ComputeCapability: tc.cc, PCIBusID: d.PciBusID,
					PowerLimitW: FakePowerLimitW, SMClockMHz: FakeSMClockMHz, MemoryClockMHz: FakeMemoryClockMHz,
					PCIeGen: FakePCIeGen, PCIeWidth: FakePCIeWidth, MIG: MIGDisabled, DriverVersion: tc.driver,
					Health: Health{Healthy: true, Known: true, Description: HealthDescOK},
				}
				if diff := cmp.Diff(want, byUUID[d.UUID]); diff != "" {
					t.Errorf("GPU %d (-want,+got):\n%s", i, diff)
				}
			}
		})
	}
}

// TestGPUsInjectedErrors injects NVML errors into single calls of a DGX H100 mock.
func TestGPUsInjectedErrors(t *testing.T) {
	cases := []struct {
		name   string
		inject func(f *Fake)
		// check runs on the GPUs of a successful discovery.
		check   func(t *testing.T, f *Fake, got []GPU)
		wantErr error
		wantLog string
	}{
		{
			name: "power limit not supported falls back to management limit",
			inject: func(f *Fake) {
				device(f, 0).GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
				device(f, 0).GetPowerManagementLimitFunc = func() (uint32, nvml.Return) { return 250000, nvml.SUCCESS }
			},
			check: func(t *testing.T, f *Fake, got []GPU) {
				if g := find(t, got, device(f, 0).UUID); g.PowerLimitW != 250 {
					t.Errorf("PowerLimitW = %d, want 250", g.PowerLimitW)
				}
			},
		},
		{
			name: "facts not supported are left out",
			inject: func(f *Fake) {
				d := device(f, 0)
				d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
				d.GetPowerManagementLimitFunc = d.GetEnforcedPowerLimitFunc
				d.GetCudaComputeCapabilityFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }
				d.GetMaxClockInfoFunc = func(nvml.ClockType) (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
				d.GetCurrPcieLinkGenerationFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
				d.GetMigModeFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }
			},
			check: func(t *testing.T, f *Fake, got []GPU) {
				g := find(t, got, device(f, 0).UUID)
				if g.PowerLimitW != 0 || g.ComputeCapability != "" || g.SMClockMHz != 0 || g.MemoryClockMHz != 0 || g.PCIeGen != 0 || g.MIG != MIGUnsupported {
					t.Errorf("unsupported facts reported: %+v", g)
				}
				if g.PCIeWidth != FakePCIeWidth || !g.Health.Healthy {
					t.Errorf("supported facts lost: %+v", g)
				}
			},
		},
		{
			name: "GPU lost on a query is unhealthy",
			inject: func(f *Fake) {
				device(f, 2).GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST }
			},
			check: func(t *testing.T, f *Fake, got []GPU) {
				want := Health{Healthy: false, Known: true, Description: HealthDescLost}
				if diff := cmp.Diff(want, find(t, got, device(f, 2).UUID).Health); diff != "" {
					t.Errorf("health (-want,+got):\n%s", diff)
				}
				if !find(t, got, device(f, 1).UUID).Health.Healthy {
					t.Errorf("other GPUs must stay healthy")
				}
			},
			wantLog: "GPU is lost",
		},
		{
			name: "GPU lost before its first discovery is skipped",
			inject: func(f *Fake) {
				srvGet := f.DeviceGetHandleByIndexFunc
				f.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
					if i == 3 {
						return nil, nvml.ERROR_GPU_IS_LOST
					}
					return srvGet(i)
				}
			},
			check: func(t *testing.T, f *Fake, got []GPU) {
				if len(got) != 7 {
					t.Errorf("got %d GPUs, want 7", len(got))
				}
			},
			wantLog: "skipping GPU",
		},
		{
			name: "unknown error on the name skips the GPU",
			inject: func(f *Fake) {
				device(f, 0).GetNameFunc = func() (string, nvml.Return) { return "", nvml.ERROR_UNKNOWN }
			},
			check: func(t *testing.T, f *Fake, got []GPU) {
				if len(got) != 7 {
					t.Errorf("got %d GPUs, want 7", len(got))
				}
			},
			wantLog: "reading name of GPU 0",
		},
		{
			name: "unexpected error on an optional fact is logged",
			inject: func(f *Fake) {
				device(f, 0).GetCurrPcieLinkWidthFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
			},
			check: func(t *testing.T, f *Fake, got []GPU) {
				if g := find(t, got, device(f, 0).UUID); g.PCIeWidth != 0 || !g.Health.Healthy {
					t.Errorf("got %+v, want PCIe width left out and GPU healthy", g)
				}
			},
			wantLog: "field=\"PCIe width\"",
		},
		{
			name: "events not supported by a GPU: health unknown",
			inject: func(f *Fake) {
				device(f, 0).GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
			},
			check: func(t *testing.T, f *Fake, got []GPU) {
				want := Health{Healthy: true, Known: false, Description: HealthDescUnknown}
				if diff := cmp.Diff(want, find(t, got, device(f, 0).UUID).Health); diff != "" {
					t.Errorf("health (-want,+got):\n%s", diff)
				}
				if !find(t, got, device(f, 1).UUID).Health.Known {
					t.Errorf("other GPUs must keep known health")
				}
			},
		},
		{
			name: "no event sets: every GPU's health unknown",
			inject: func(f *Fake) {
				f.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
			},
			check: func(t *testing.T, f *Fake, got []GPU) {
				for _, g := range got {
					if !g.Health.Healthy || g.Health.Known {
						t.Errorf("GPU %s health = %+v, want healthy and unknown", g.UUID, g.Health)
					}
				}
			},
			wantLog: "NVML event sets not available",
		},
		{
			name: "device count fails",
			inject: func(f *Fake) {
				f.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
			},
			wantErr: nvml.ERROR_UNKNOWN,
		},
		{
			name: "driver not loaded",
			inject: func(f *Fake) {
				f.InitFunc = func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED }
			},
			wantErr: ErrUnavailable,
			wantLog: "NVML failed to initialise",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, f, logs := mockSource(t, dgxh100.New())
			tc.inject(f)
			got, err := s.GPUs(context.Background())
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("GPUs error = %v, want %v", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatalf("GPUs: %v", err)
			} else {
				tc.check(t, f, got)
			}
			if tc.wantLog != "" && !strings.Contains(logs.String(), tc.wantLog) {
				t.Errorf("log does not contain %q:\n%s", tc.wantLog, logs)
			}
		})
	}
}

func find(t *testing.T, gpus []GPU, uuid string) GPU {
	t.Helper()
	for _, g := range gpus {
		if g.UUID == uuid {
			return g
		}
	}
	t.Fatalf("GPU %q not reported", uuid)
	return GPU{}
}

func TestGPULostAfterDiscoveryStaysReported(t *testing.T) {
	s, f, _ := mockSource(t, dgxa100.New())
	ctx := context.Background()
	if _, err := s.GPUs(ctx); err != nil {
		t.Fatalf("GPUs: %v", err)
	}
	lostUUID := device(f, 5).UUID
	device(f, 5).GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_GPU_IS_LOST }
	got, err := s.GPUs(ctx)
	if err != nil {
		t.Fatalf("GPUs: %v", err)
	}
	if len(got) != 8 {
		t.Fatalf("got %d GPUs, want 8 (the lost one reported unhealthy)", len(got))
	}
	if h := find(t, got, lostUUID).Health; h.Healthy || h.Description != HealthDescLost {
		t.Errorf("lost GPU health = %+v", h)
	}
}

func TestLibraryMissing(t *testing.T) {
	cases := []struct {
		name string
		lib  nvml.Interface
	}{
		// The real go-nvml library, pointed at a path that does not exist: dlopen fails.
		{"real library, no libnvidia-ml", nvml.New(nvml.WithLibraryPath("/nonexistent/libnvidia-ml.so.1"))},
		{"mock init", &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logger, logs := testLogger(t)
			s := NewNVML(tc.lib, logger)
			for i := 0; i < 3; i++ {
				got, err := s.GPUs(context.Background())
				if err != nil || len(got) != 0 {
					t.Fatalf("GPUs = %v, %v; want no GPUs and no error", got, err)
				}
				st, err := s.Stats(context.Background())
				if err != nil || len(st) != 0 {
					t.Fatalf("Stats = %v, %v; want nothing", st, err)
				}
			}
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], "NVML library not found") {
				t.Errorf("want exactly one log line about the missing library, got:\n%s", logs)
			}
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

func TestStats(t *testing.T) {
	s, f, _ := mockSource(t, dgxh200.New())
	ctx := context.Background()
	if _, err := s.GPUs(ctx); err != nil {
		t.Fatalf("GPUs: %v", err)
	}
	d0 := device(f, 0)
	d0.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 87, Memory: 40}, nvml.SUCCESS }
	d0.MemoryInfo.Used = 1024 * bytesPerMiB
	d1 := device(f, 1)
	d1.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d1.GetTotalEccErrorsFunc = func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) {
		return 0, nvml.ERROR_NOT_SUPPORTED
	}

	got, err := s.Stats(ctx)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if len(got) != 8 {
		t.Fatalf("got %d samples, want 8", len(got))
	}
	byUUID := map[string]Stats{}
	for _, st := range got {
		byUUID[st.UUID] = st
	}
	want0 := Stats{
		UUID: d0.UUID, GPUUtilPercent: ptr[uint32](87), MemoryUtilPercent: ptr[uint32](40),
		MemoryUsedMiB: ptr[uint64](1024), MemoryTotalMiB: ptr[uint64](144384),
		PowerW: ptr[uint32](fakePowerDrawW), TemperatureC: ptr[uint32](fakeTemperatureC),
		ECCCorrected: ptr[uint64](0), ECCUncorrected: ptr[uint64](0),
	}
	if diff := cmp.Diff(want0, byUUID[d0.UUID]); diff != "" {
		t.Errorf("stats of GPU 0 (-want,+got):\n%s", diff)
	}
	if st := byUUID[d1.UUID]; st.TemperatureC != nil || st.ECCCorrected != nil || st.PowerW == nil {
		t.Errorf("stats of GPU 1: unsupported fields must be nil, others set: %+v", st)
	}

	// A GPU lost while sampling is dropped from stats, announced, and reported unhealthy.
	d1.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST }
	got, err = s.Stats(ctx)
	if err != nil || len(got) != 7 {
		t.Fatalf("Stats = %d samples, %v; want 7", len(got), err)
	}
	select {
	case <-s.Changes():
	case <-time.After(time.Second):
		t.Fatal("no change announced for the lost GPU")
	}
	gpus, err := s.GPUs(ctx)
	if err != nil {
		t.Fatalf("GPUs: %v", err)
	}
	if find(t, gpus, d1.UUID).Health.Healthy {
		t.Errorf("GPU lost during stats still healthy")
	}
}

func TestMIGInstancesAreDevices(t *testing.T) {
	srv := dgxa100.New()
	s, f, _ := mockSource(t, srv)
	parent := device(f, 0)
	if ret := parent.SetMigModeFunc; ret == nil {
		t.Fatal("mock has no SetMigMode")
	}
	parent.SetMigMode(nvml.DEVICE_MIG_ENABLE)

	// Two 1g.5gb instances created through the mock server's own MIG machinery.
	profile, ret := parent.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	if ret != nvml.SUCCESS {
		t.Fatalf("GetGpuInstanceProfileInfo: %v", ret)
	}
	var migs []nvml.Device
	for j := 0; j < 2; j++ {
		if _, ret := parent.CreateGpuInstance(&profile); ret != nvml.SUCCESS {
			t.Fatalf("CreateGpuInstance: %v", ret)
		}
		uuid := "MIG-0000000" + string(rune('a'+j))
		mem := profile.MemorySizeMB * bytesPerMiB
		m := &mock.Device{
			GetUUIDFunc:       func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
			GetNameFunc:       func() (string, nvml.Return) { return "NVIDIA A100-SXM4-40GB MIG 1g.5gb", nvml.SUCCESS },
			GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: mem, Used: bytesPerMiB}, nvml.SUCCESS },
		}
		fillUnsupported(m)
		migs = append(migs, m)
	}
	parent.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	parent.GetMigDeviceHandleByIndexFunc = func(j int) (nvml.Device, nvml.Return) {
		if j < len(migs) {
			return migs[j], nvml.SUCCESS
		}
		return nil, nvml.ERROR_NOT_FOUND
	}

	got, err := s.GPUs(context.Background())
	if err != nil {
		t.Fatalf("GPUs: %v", err)
	}
	if len(got) != 9 {
		t.Fatalf("got %d devices, want 7 whole GPUs + 2 MIG instances", len(got))
	}
	for _, g := range got {
		if g.UUID == parent.UUID {
			t.Errorf("partitioned GPU %s reported as a whole device", g.UUID)
		}
	}
	mig := find(t, got, "MIG-0000000a")
	want := GPU{
		UUID: "MIG-0000000a", Model: "NVIDIA A100-SXM4-40GB MIG 1g.5gb", Index: 0,
		MemoryMiB: profile.MemorySizeMB, ComputeCapability: "8.0", PCIBusID: parent.PciBusID,
		PowerLimitW: FakePowerLimitW, SMClockMHz: FakeSMClockMHz, MemoryClockMHz: FakeMemoryClockMHz,
		PCIeGen: FakePCIeGen, PCIeWidth: FakePCIeWidth, MIG: MIGInstance, ParentUUID: parent.UUID,
		DriverVersion: "550.54.15", Health: Health{Healthy: true, Known: true, Description: HealthDescOK},
	}
	if diff := cmp.Diff(want, mig); diff != "" {
		t.Errorf("MIG instance (-want,+got):\n%s", diff)
	}
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	var sawMIG bool
	for _, x := range st {
		if x.UUID == "MIG-0000000b" {
			sawMIG = true
			if x.MemoryUsedMiB == nil || *x.MemoryUsedMiB != 1 || x.GPUUtilPercent != nil {
				t.Errorf("MIG stats = %+v, want memory used 1 MiB and no utilisation", x)
			}
		}
	}
	if !sawMIG {
		t.Errorf("no stats for MIG instance")
	}
}

func TestHealthEvents(t *testing.T) {
	cases := []struct {
		name      string
		eventType uint64
		data      uint64
		healthy   bool
		desc      string
	}{
		{"critical XID", nvml.EventTypeXidCriticalError, 79, false, "unhealthy: critical XID 79 reported by NVML"},
		{"double-bit ECC", nvml.EventTypeDoubleBitEccError, 0, false, "unhealthy: double-bit ECC error reported by NVML"},
		{"application XID", nvml.EventTypeXidCriticalError, 13, true, HealthDescOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logger, _ := testLogger(t)
			s, f, err := NewFakeSource([]FakeGPU{{Model: "Tesla V100-SXM2-16GB", Count: 2, MemoryMiB: 16384}}, logger)
			if err != nil {
				t.Fatalf("NewFakeSource: %v", err)
			}
			defer s.Close()
			ctx := context.Background()
			gpus, err := s.GPUs(ctx)
			if err != nil || len(gpus) != 2 {
				t.Fatalf("GPUs = %v, %v", gpus, err)
			}
			target := gpus[1].UUID
			if err := f.InjectEvent(target, tc.eventType, tc.data); err != nil {
				t.Fatalf("InjectEvent: %v", err)
			}
			if !tc.healthy {
				select {
				case <-s.Changes():
				case <-time.After(5 * time.Second):
					t.Fatal("no change announced after the event")
				}
			} else {
				time.Sleep(2 * eventWaitTimeout) // let the watcher consume it
			}
			gpus, err = s.GPUs(ctx)
			if err != nil {
				t.Fatalf("GPUs: %v", err)
			}
			want := Health{Healthy: tc.healthy, Known: true, Description: tc.desc}
			if diff := cmp.Diff(want, find(t, gpus, target).Health); diff != "" {
				t.Errorf("health (-want,+got):\n%s", diff)
			}
			if h := find(t, gpus, gpus[0].UUID).Health; gpus[0].UUID != target && !h.Healthy {
				t.Errorf("the other GPU became unhealthy: %+v", h)
			}
		})
	}
}

func TestIsApplicationXID(t *testing.T) {
	for xid, want := range map[uint64]bool{13: true, 31: true, 43: true, 45: true, 68: true, 109: true, 48: false, 79: false, 94: false} {
		if got := IsApplicationXID(xid); got != want {
			t.Errorf("IsApplicationXID(%d) = %v, want %v", xid, got, want)
		}
	}
}
