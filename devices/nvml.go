package devices

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/hashicorp/go-hclog"
)

// ErrUnavailable wraps NVML failures that leave the machine without GPU facts (the driver is
// not loaded, no permission, …). A missing NVML library is not an error: it yields no GPUs.
var ErrUnavailable = errors.New("devices: NVML unavailable")

const bytesPerMiB = 1 << 20

// NVML is a [Source] over an [nvml.Interface]: the machine's NVML library (see [OpenSystem])
// or an in-process fake (see [NewFake]); both run the same code below.
type NVML struct {
	lib    nvml.Interface
	logger hclog.Logger

	mu      sync.Mutex
	inited  bool
	initRet nvml.Return // last failed Init result, to log each new failure once
	events  *eventWatcher
	// handles maps the UUIDs last returned by GPUs to their NVML handles, for Stats.
	handles map[string]nvml.Device
	// byIndex remembers what each GPU index reported, so a GPU that is lost before its
	// UUID can be read again is still reported, unhealthy.
	byIndex map[int][]GPU
	// lost holds UUIDs that answered ERROR_GPU_IS_LOST; sticky until Close.
	lost map[string]bool
	// warned records (uuid, field, return) triples already logged.
	warned  map[string]bool
	changes chan struct{}
}

var (
	_ Source   = (*NVML)(nil)
	_ Notifier = (*NVML)(nil)
)

// OpenSystem returns a Source over the machine's NVML library (libnvidia-ml.so.1). It never
// fails: without the library it reports no GPUs and logs that once.
func OpenSystem(logger hclog.Logger) *NVML {
	return NewNVML(nvml.New(), logger)
}

// NewNVML returns a Source over lib. NVML is initialised on first use.
func NewNVML(lib nvml.Interface, logger hclog.Logger) *NVML {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &NVML{
		lib:     lib,
		logger:  logger,
		handles: map[string]nvml.Device{},
		byIndex: map[int][]GPU{},
		lost:    map[string]bool{},
		warned:  map[string]bool{},
		changes: make(chan struct{}, 1),
	}
}

// Changes implements [Notifier]: it fires after a health event or a lost GPU.
func (s *NVML) Changes() <-chan struct{} { return s.changes }

func (s *NVML) notify() {
	select {
	case s.changes <- struct{}{}:
	default:
	}
}

// init initialises NVML once. It reports false when NVML is not usable now; err is nil when
// the reason is a missing library (the normal case on machines without NVIDIA drivers).
func (s *NVML) init() (bool, error) {
	if s.inited {
		return true, nil
	}
	ret := s.lib.Init()
	if ret == nvml.SUCCESS {
		s.inited = true
		s.initRet = nvml.SUCCESS
		s.events = newEventWatcher(s.lib, s.logger.Named("events"), s.notify)
		return true, nil
	}
	first := ret != s.initRet
	s.initRet = ret
	if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
		if first {
			s.logger.Info("NVML library not found; this machine reports no NVIDIA GPUs", "library", "libnvidia-ml.so.1")
		}
		return false, nil
	}
	if first {
		s.logger.Warn("NVML failed to initialise; reporting no NVIDIA GPUs until it does", "error", ret)
	}
	return false, fmt.Errorf("%w: initialising NVML: %w", ErrUnavailable, ret)
}

// GPUs implements [Source].
func (s *NVML) GPUs(ctx context.Context) ([]GPU, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	ok, err := s.init()
	if !ok {
		return nil, err
	}

	driver, ret := s.lib.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		s.warnOnce("", "driver version", ret)
		driver = ""
	}
	count, ret := s.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("counting GPUs: %w", ret)
	}

	var out []GPU
	handles := map[string]nvml.Device{}
	byIndex := map[int][]GPU{}
	for i := 0; i < count; i++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("discovering GPUs: %w", err)
		}
		found, err := s.discover(i, driver, handles)
		if err != nil {
			s.logger.Warn("skipping GPU", "index", i, "error", err)
			continue
		}
		byIndex[i] = found
		out = append(out, found...)
	}
	s.handles, s.byIndex = handles, byIndex
	sort.Slice(out, func(a, b int) bool { return out[a].UUID < out[b].UUID })
	return out, nil
}

// discover describes GPU index i: the GPU itself, or its MIG instances when MIG is enabled.
func (s *NVML) discover(i int, driver string, handles map[string]nvml.Device) ([]GPU, error) {
	dev, ret := s.lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return s.lostOrErr(i, ret, "getting handle")
	}
	uuid, ret := dev.GetUUID()
	if ret != nvml.SUCCESS {
		return s.lostOrErr(i, ret, "reading UUID")
	}
	name, ret := dev.GetName()
	if ret != nvml.SUCCESS {
		if ret == nvml.ERROR_GPU_IS_LOST {
			s.markLost(uuid)
		}
		return s.lostOrErr(i, ret, "reading name")
	}

	q := query{s: s, uuid: uuid}
	g := GPU{UUID: uuid, Model: name, Index: i, DriverVersion: driver}
	if mem, ret := dev.GetMemoryInfo(); q.ok("memory", ret) {
		g.MemoryMiB = mem.Total / bytesPerMiB
	}
	if major, minor, ret := dev.GetCudaComputeCapability(); q.ok("compute capability", ret) {
		g.ComputeCapability = fmt.Sprintf("%d.%d", major, minor)
	}
	if pci, ret := dev.GetPciInfo(); q.ok("PCI info", ret) {
		g.PCIBusID = busID(pci.BusId)
	}
	g.PowerLimitW = powerLimitW(dev, &q)
	if mhz, ret := dev.GetMaxClockInfo(nvml.CLOCK_SM); q.ok("max SM clock", ret) {
		g.SMClockMHz = mhz
	}
	if mhz, ret := dev.GetMaxClockInfo(nvml.CLOCK_MEM); q.ok("max memory clock", ret) {
		g.MemoryClockMHz = mhz
	}
	if gen, ret := dev.GetCurrPcieLinkGeneration(); q.ok("PCIe generation", ret) {
		g.PCIeGen = gen
	}
	if width, ret := dev.GetCurrPcieLinkWidth(); q.ok("PCIe width", ret) {
		g.PCIeWidth = width
	}
	g.MIG = MIGUnsupported
	if current, _, ret := dev.GetMigMode(); q.ok("MIG mode", ret) {
		g.MIG = MIGDisabled
		if current == nvml.DEVICE_MIG_ENABLE {
			g.MIG = MIGEnabled
		}
	}

	s.events.register(uuid, dev)
	g.Health = s.health(uuid, q.lost)

	if g.MIG != MIGEnabled {
		handles[uuid] = dev
		return []GPU{g}, nil
	}
	// A partitioned GPU cannot be handed out whole: report its instances instead.
	return s.migInstances(dev, g, handles), nil
}

// migInstances describes the MIG instances of a partitioned GPU. Instances share the parent's
// PCI, power, clock and PCIe facts, and its health.
func (s *NVML) migInstances(parent nvml.Device, pg GPU, handles map[string]nvml.Device) []GPU {
	q := query{s: s, uuid: pg.UUID}
	n, ret := parent.GetMaxMigDeviceCount()
	if !q.ok("MIG device count", ret) {
		return nil
	}
	var out []GPU
	for j := 0; j < n; j++ {
		mig, ret := parent.GetMigDeviceHandleByIndex(j)
		if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue // an empty slot
		}
		if !q.ok("MIG device handle", ret) {
			continue
		}
		uuid, ret := mig.GetUUID()
		if !q.ok("MIG device UUID", ret) {
			continue
		}
		name, ret := mig.GetName()
		if !q.ok("MIG device name", ret) {
			continue
		}
		g := pg
		g.UUID, g.Model, g.MIG, g.ParentUUID = uuid, name, MIGInstance, pg.UUID
		g.MemoryMiB = 0
		if mem, ret := mig.GetMemoryInfo(); q.ok("MIG device memory", ret) {
			g.MemoryMiB = mem.Total / bytesPerMiB
		}
		if q.lost {
			s.markLost(pg.UUID)
			g.Health = s.health(pg.UUID, true)
		}
		handles[uuid] = mig
		out = append(out, g)
	}
	return out
}

// lostOrErr handles a failed query that left GPU i unidentified: a lost GPU seen before is
// reported again as lost; anything else is an error for the caller to log.
func (s *NVML) lostOrErr(i int, ret nvml.Return, doing string) ([]GPU, error) {
	if ret == nvml.ERROR_GPU_IS_LOST {
		if prev := s.byIndex[i]; len(prev) > 0 {
			out := make([]GPU, len(prev))
			for k, g := range prev {
				s.markLost(g.UUID)
				g.Health = s.health(g.UUID, true)
				out[k] = g
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("%s of GPU %d: %w", doing, i, ret)
}

func (s *NVML) markLost(uuid string) {
	if !s.lost[uuid] {
		s.lost[uuid] = true
		s.logger.Error("GPU is lost; reporting it unhealthy", "uuid", uuid)
	}
}

// health applies the policy documented on [Health].
func (s *NVML) health(uuid string, lost bool) Health {
	if lost {
		s.markLost(uuid)
	}
	if s.lost[uuid] {
		return Health{Healthy: false, Known: true, Description: HealthDescLost}
	}
	return s.events.health(uuid)
}

func (s *NVML) warnOnce(uuid, field string, ret nvml.Return) {
	key := fmt.Sprintf("%s/%s/%d", uuid, field, int32(ret))
	if s.warned[key] {
		return
	}
	s.warned[key] = true
	s.logger.Warn("NVML query failed; leaving the fact out", "uuid", uuid, "field", field, "error", ret)
}

// query classifies the results of the optional queries on one device.
type query struct {
	s    *NVML
	uuid string
	lost bool
}

// ok reports whether ret is SUCCESS. ERROR_NOT_SUPPORTED is silent, ERROR_GPU_IS_LOST marks
// the device lost, and other failures are logged once.
func (q *query) ok(field string, ret nvml.Return) bool {
	switch ret {
	case nvml.SUCCESS:
		return true
	case nvml.ERROR_NOT_SUPPORTED:
	case nvml.ERROR_GPU_IS_LOST:
		q.lost = true
	default:
		q.s.warnOnce(q.uuid, field, ret)
	}
	return false
}

// powerLimitW reads the enforced power limit, falling back to the management limit.
func powerLimitW(dev nvml.Device, q *query) uint32 {
	if mw, ret := dev.GetEnforcedPowerLimit(); q.ok("enforced power limit", ret) {
		return mw / 1000
	}
	if mw, ret := dev.GetPowerManagementLimit(); q.ok("power management limit", ret) {
		return mw / 1000
	}
	return 0
}

// busID converts NVML's NUL-terminated C string.
func busID(raw [32]int8) string {
	b := make([]byte, 0, len(raw))
	for _, c := range raw {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}

// Stats implements [Source].
func (s *NVML) Stats(ctx context.Context) ([]Stats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.inited {
		return nil, nil
	}
	uuids := make([]string, 0, len(s.handles))
	for uuid := range s.handles {
		uuids = append(uuids, uuid)
	}
	sort.Strings(uuids)

	out := make([]Stats, 0, len(uuids))
	for _, uuid := range uuids {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("sampling GPU stats: %w", err)
		}
		if s.lost[uuid] {
			continue
		}
		st, lost := sample(uuid, s.handles[uuid], &query{s: s, uuid: uuid})
		if lost {
			s.markLost(uuid)
			s.notify()
			continue
		}
		out = append(out, st)
	}
	return out, nil
}

func sample(uuid string, dev nvml.Device, q *query) (Stats, bool) {
	st := Stats{UUID: uuid}
	if u, ret := dev.GetUtilizationRates(); q.ok("utilization", ret) {
		st.GPUUtilPercent, st.MemoryUtilPercent = ptr(u.Gpu), ptr(u.Memory)
	}
	if mem, ret := dev.GetMemoryInfo(); q.ok("memory", ret) {
		st.MemoryUsedMiB, st.MemoryTotalMiB = ptr(mem.Used/bytesPerMiB), ptr(mem.Total/bytesPerMiB)
	}
	if mw, ret := dev.GetPowerUsage(); q.ok("power usage", ret) {
		st.PowerW = ptr(mw / 1000)
	}
	if c, ret := dev.GetTemperature(nvml.TEMPERATURE_GPU); q.ok("temperature", ret) {
		st.TemperatureC = ptr(c)
	}
	if n, ret := dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC); q.ok("corrected ECC errors", ret) {
		st.ECCCorrected = ptr(n)
	}
	if n, ret := dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); q.ok("uncorrected ECC errors", ret) {
		st.ECCUncorrected = ptr(n)
	}
	return st, q.lost
}

func ptr[T any](v T) *T { return &v }

// Close implements [Source].
func (s *NVML) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.inited {
		return nil
	}
	s.events.close()
	s.inited = false
	if ret := s.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("shutting down NVML: %w", ret)
	}
	return nil
}
