package devices

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
)

// FakeGPU asks a [Fake] for Count GPUs of one model.
type FakeGPU struct {
	// Model is the NVML name the GPUs report, for example "Tesla V100-SXM2-16GB".
	Model string
	// Count is how many GPUs of the model to present (at least 1).
	Count int
	// MemoryMiB is the framebuffer size. Zero takes the size of the model in go-nvml's mock
	// catalogue (A100, A30, H100, H200, B200); other models must set it.
	MemoryMiB uint64
	// ComputeCapability is "major.minor". Empty takes the catalogue's value; for other
	// models NVML then answers "not supported".
	ComputeCapability string
	// UUIDSeed is mixed into the GPUs' UUIDs: fakes given different seeds (one per host of a
	// dev cluster or test) present different GPUs, as real hosts do. Empty derives each UUID
	// from the model and position alone.
	UUIDSeed string
}

// Values every fake GPU reports for facts that go-nvml's mock servers leave unset.
const (
	FakeDriverVersion    = "550.54.15"
	FakePowerLimitW      = 300
	FakeSMClockMHz       = 1410
	FakeMemoryClockMHz   = 1215
	FakePCIeGen          = 4
	FakePCIeWidth        = 16
	fakePowerDrawW       = 60
	fakeTemperatureC     = 35
	fakeNVMLVersion      = "12.550.54.15"
	fakeCUDADriver       = 12040
	fakeEventQueueLength = 16
)

// fakeUUIDSpace is the namespace of fake GPU UUIDs.
var fakeUUIDSpace = uuid.MustParse("6c0f5d4e-2b0a-4e57-9a55-6e6f6d616466")

// Fake is an in-process NVML that presents chosen GPU models: go-nvml's mock server
// (pkg/nvml/mock/server), completed with the facts, stats and event sets the real code path
// reads. Queries it has no value for answer ERROR_NOT_SUPPORTED, as on real GPUs without the
// feature. Each call is recorded by the mock, so memory grows slowly with use (tens of MB a
// day for a few GPUs at Nomad's default 1 s stats interval); it is meant for development
// and tests.
type Fake struct {
	*server.Server

	events chan nvml.EventData
	mu     sync.Mutex
	masks  map[string]uint64 // events registered per UUID
}

var _ nvml.Interface = (*Fake)(nil)

// NewFake builds a fake NVML presenting the given GPUs, in order.
func NewFake(spec []FakeGPU) (*Fake, error) {
	var cfgs []gpus.Config
	for i, g := range spec {
		cfg, err := fakeConfig(g)
		if err != nil {
			return nil, fmt.Errorf("fake GPU %d: %w", i, err)
		}
		cfgs = append(cfgs, gpus.Multiple(g.Count, cfg)...)
	}
	srv, err := server.New(
		server.WithGPUs(cfgs...),
		server.WithDriverVersion(FakeDriverVersion),
		server.WithNVMLVersion(fakeNVMLVersion),
		server.WithCUDADriverVersion(fakeCUDADriver),
	)
	if err != nil {
		return nil, fmt.Errorf("building mock NVML server: %w", err)
	}
	// Fake UUIDs are stable: the same seed, model and position always yield the same UUID.
	perModel := map[string]int{}
	noCC := map[int]bool{}
	k := 0
	for _, g := range spec {
		for n := 0; n < g.Count; n++ {
			d := srv.Devices[k].(*server.Device)
			d.UUID = fakeUUID(g, perModel[g.Model])
			perModel[g.Model]++
			noCC[k] = d.Config.CudaMajor == 0
			k++
		}
	}
	f := completeServer(srv, noCC)
	return f, nil
}

// fakeUUID is the UUID of the GPU at position n of g's model.
func fakeUUID(g FakeGPU, n int) string {
	name := g.Model + "/" + strconv.Itoa(n)
	if g.UUIDSeed != "" {
		name = g.UUIDSeed + "/" + name
	}
	return "GPU-" + uuid.NewSHA1(fakeUUIDSpace, []byte(name)).String()
}

// NewFakeSource returns a Source over a [Fake]: the same NVML code path as on a GPU machine.
func NewFakeSource(spec []FakeGPU, logger hclog.Logger) (*NVML, *Fake, error) {
	f, err := NewFake(spec)
	if err != nil {
		return nil, nil, err
	}
	return NewNVML(f, logger), f, nil
}

// ErrFakeNoSuchGPU is returned when an injected event names a GPU the fake does not have.
var ErrFakeNoSuchGPU = errors.New("devices: fake has no GPU with this UUID")

// InjectEvent delivers an NVML event (for example nvml.EventTypeXidCriticalError with an XID
// as data) for the GPU with the given UUID, if that GPU registered for it.
func (f *Fake) InjectEvent(gpuUUID string, eventType, data uint64) error {
	for _, d := range f.Devices {
		dev := d.(*server.Device)
		if dev.UUID != gpuUUID {
			continue
		}
		f.mu.Lock()
		mask := f.masks[gpuUUID]
		f.mu.Unlock()
		if mask&eventType == 0 {
			return nil
		}
		f.events <- nvml.EventData{Device: dev, EventType: eventType, EventData: data}
		return nil
	}
	return fmt.Errorf("%w: %q", ErrFakeNoSuchGPU, gpuUUID)
}

// Validate reports what NewFake would refuse in g.
func (g FakeGPU) Validate() error {
	_, err := fakeConfig(g)
	return err
}

// fakeConfig resolves a FakeGPU against go-nvml's mock catalogue.
func fakeConfig(g FakeGPU) (gpus.Config, error) {
	if strings.TrimSpace(g.Model) == "" {
		return gpus.Config{}, errors.New("model must not be empty")
	}
	if g.Count < 1 {
		return gpus.Config{}, fmt.Errorf("count must be at least 1, got %d", g.Count)
	}
	cfg, known := catalogue()[g.Model]
	if !known {
		if g.MemoryMiB == 0 {
			return gpus.Config{}, fmt.Errorf("memory_mib must be set for model %q, which go-nvml's mock catalogue does not know", g.Model)
		}
		cfg = gpus.Config{Brand: nvml.BRAND_NVIDIA, Architecture: nvml.DEVICE_ARCH_UNKNOWN}
	}
	cfg.Name = g.Model
	if g.MemoryMiB != 0 {
		cfg.MemoryMB = g.MemoryMiB
	}
	if g.ComputeCapability != "" {
		major, minor, err := ParseComputeCapability(g.ComputeCapability)
		if err != nil {
			return gpus.Config{}, err
		}
		cfg.CudaMajor, cfg.CudaMinor = major, minor
	}
	return cfg, nil
}

// ParseComputeCapability parses "major.minor", for example "8.0".
func ParseComputeCapability(s string) (major, minor int, err error) {
	a, b, ok := strings.Cut(s, ".")
	if ok {
		major, err = strconv.Atoi(a)
		if err == nil {
			minor, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || major < 1 || minor < 0 {
		return 0, 0, fmt.Errorf("compute capability %q is not of the form major.minor, for example \"8.0\"", s)
	}
	return major, minor, nil
}

// catalogue maps model names to go-nvml's mock GPU configurations. The mock names its
// A100-SXM4-40GB "Mock NVIDIA A100-SXM4-40GB"; the prefix is dropped.
func catalogue() map[string]gpus.Config {
	out := map[string]gpus.Config{}
	for _, c := range []gpus.Config{
		gpus.A100_PCIE_40GB, gpus.A100_PCIE_80GB, gpus.A100_SXM4_40GB, gpus.A100_SXM4_80GB,
		gpus.A30_PCIE_24GB, gpus.H100_SXM5_80GB, gpus.H200_SXM5_141GB, gpus.B200_SXM5_180GB,
	} {
		out[strings.TrimPrefix(c.Name, "Mock ")] = c
	}
	return out
}

// completeDevice sets what go-nvml's mock device leaves unset.
func (f *Fake) completeDevice(d *server.Device, hasCC bool) {
	// NVML's form: 8-digit domain, upper-case hex.
	d.PciBusID = fmt.Sprintf("00000000:%02X:00.0", d.Index+1)
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		p := nvml.PciInfo{PciDeviceId: d.Config.PciDeviceId, Bus: uint32(d.Index)}
		for i := 0; i < len(d.PciBusID) && i < len(p.BusId)-1; i++ {
			p.BusId[i] = int8(d.PciBusID[i])
		}
		return p, nvml.SUCCESS
	}
	if !hasCC {
		d.GetCudaComputeCapabilityFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }
	}
	d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return FakePowerLimitW * 1000, nvml.SUCCESS }
	d.GetPowerManagementLimitFunc = d.GetEnforcedPowerLimitFunc
	d.GetMaxClockInfoFunc = func(t nvml.ClockType) (uint32, nvml.Return) {
		switch t {
		case nvml.CLOCK_SM, nvml.CLOCK_GRAPHICS:
			return FakeSMClockMHz, nvml.SUCCESS
		case nvml.CLOCK_MEM:
			return FakeMemoryClockMHz, nvml.SUCCESS
		}
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	d.GetCurrPcieLinkGenerationFunc = func() (int, nvml.Return) { return FakePCIeGen, nvml.SUCCESS }
	d.GetCurrPcieLinkWidthFunc = func() (int, nvml.Return) { return FakePCIeWidth, nvml.SUCCESS }
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.SUCCESS }
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return fakePowerDrawW * 1000, nvml.SUCCESS }
	d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return fakeTemperatureC, nvml.SUCCESS }
	d.GetTotalEccErrorsFunc = func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) { return 0, nvml.SUCCESS }
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		m := d.MemoryInfo
		m.Free = m.Total - m.Used
		return m, nvml.SUCCESS
	}
	d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return healthEvents, nvml.SUCCESS }
	d.RegisterEventsFunc = func(mask uint64, _ nvml.EventSet) nvml.Return {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.masks[d.UUID] |= mask
		return nvml.SUCCESS
	}
	if len(d.Config.MIGProfiles.GpuInstanceProfiles) == 0 {
		d.GetMigModeFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }
	}
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 0, nvml.SUCCESS }
	fillUnsupported(&d.Device)
}

// completeServer wraps a go-nvml mock server and sets what it leaves unset. Devices listed in
// noCC answer ERROR_NOT_SUPPORTED for their compute capability.
func completeServer(srv *server.Server, noCC map[int]bool) *Fake {
	f := &Fake{
		Server: srv,
		events: make(chan nvml.EventData, fakeEventQueueLength),
		masks:  map[string]uint64{},
	}
	for k, d := range srv.Devices {
		f.completeDevice(d.(*server.Device), !noCC[k])
	}
	f.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		set := &mock.EventSet{
			WaitFunc: func(timeoutMs uint32) (nvml.EventData, nvml.Return) {
				select {
				case e := <-f.events:
					return e, nvml.SUCCESS
				case <-time.After(time.Duration(timeoutMs) * time.Millisecond):
					return nvml.EventData{}, nvml.ERROR_TIMEOUT
				}
			},
			FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		}
		fillUnsupported(set)
		return set, nvml.SUCCESS
	}
	fillUnsupported(&f.Server.Interface)
	fillUnsupported(&f.Server.ExtendedInterface)
	return f
}

var returnType = reflect.TypeOf(nvml.SUCCESS)

// fillUnsupported sets every nil XxxFunc field of a moq mock struct to a function that
// returns zero values and, where the method returns an nvml.Return, ERROR_NOT_SUPPORTED.
// moq mocks panic on unset methods; real GPUs answer "not supported".
func fillUnsupported(mockPtr any) {
	v := reflect.ValueOf(mockPtr).Elem()
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := v.Field(i)
		if !t.Field(i).IsExported() || f.Kind() != reflect.Func || !f.IsNil() || !strings.HasSuffix(t.Field(i).Name, "Func") {
			continue
		}
		ft := f.Type()
		f.Set(reflect.MakeFunc(ft, func([]reflect.Value) []reflect.Value {
			out := make([]reflect.Value, ft.NumOut())
			for k := range out {
				out[k] = reflect.Zero(ft.Out(k))
				if ft.Out(k) == returnType {
					out[k] = reflect.ValueOf(nvml.ERROR_NOT_SUPPORTED)
				}
			}
			return out
		}))
	}
}
