package device

import (
	"context"
	"reflect"
	"sort"
	"time"

	"github.com/hashicorp/nomad/plugins/device"
	"github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/nomad-fft/nomad-fft/devices"
)

// Attribute names of a fingerprinted device group (Nomad: ${device.attr.<name>}).
const (
	AttrMemory            = "memory"             // MiB
	AttrComputeCapability = "compute_capability" // "8.0"
	AttrPowerLimit        = "power_limit"        // W, the enforced limit
	AttrCoresClock        = "cores_clock"        // MHz, maximum SM clock
	AttrMemoryClock       = "memory_clock"       // MHz, maximum memory clock
	AttrPCIeGen           = "pcie_gen"
	AttrPCIeWidth         = "pcie_width"
	AttrMIGMode           = "mig_mode" // unsupported, disabled, instance
	AttrDriverVersion     = "driver_version"
)

// Fingerprint implements device.DevicePlugin. It sends the device groups at once, then again
// whenever the set of devices, their health or their attributes change; it reads them every
// fingerprint_period and whenever the source announces a change. NVML errors are logged and
// never end the stream (Nomad would stop the plugin).
func (p *Plugin) Fingerprint(ctx context.Context) (<-chan *device.FingerprintResponse, error) {
	src, cfg, err := p.source()
	if err != nil {
		return nil, err
	}
	out := make(chan *device.FingerprintResponse)
	go p.fingerprintLoop(ctx, src, cfg.FingerprintPeriod, out)
	return out, nil
}

func (p *Plugin) fingerprintLoop(ctx context.Context, src devices.Source, period time.Duration, out chan<- *device.FingerprintResponse) {
	defer close(out)
	var changes <-chan struct{}
	if n, ok := src.(devices.Notifier); ok {
		changes = n.Changes()
	}
	timer := time.NewTimer(0)
	defer timer.Stop()

	var last []*device.DeviceGroup
	sent := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			timer.Reset(period)
		case <-changes:
		}
		gpus, err := src.GPUs(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.logger.Warn("reading GPUs failed; keeping the last fingerprint", "error", err)
			if sent {
				continue
			}
			gpus = nil // the agent waits for a first fingerprint: send an empty one
		}
		gpus = p.filterIgnored(gpus)
		p.setKnown(gpus)
		groups := Groups(gpus)
		if sent && reflect.DeepEqual(groups, last) {
			continue
		}
		p.logger.Debug("sending fingerprint", "groups", len(groups), "devices", len(gpus))
		if !send(ctx, out, device.NewFingerprint(groups...)) {
			return
		}
		last, sent = groups, true
	}
}

// Groups turns devices into Nomad device groups: one per model, sorted by model, devices
// sorted by UUID. A group's attributes are those its devices share: a string attribute
// appears when all devices that report it agree; a numeric one is the smallest value
// reported (the conservative choice for constraints), and is left out when none reports it.
func Groups(gpus []devices.GPU) []*device.DeviceGroup {
	byModel := map[string][]devices.GPU{}
	for _, g := range gpus {
		byModel[g.Model] = append(byModel[g.Model], g)
	}
	models := make([]string, 0, len(byModel))
	for m := range byModel {
		models = append(models, m)
	}
	sort.Strings(models)

	groups := make([]*device.DeviceGroup, 0, len(models))
	for _, m := range models {
		members := byModel[m]
		sort.Slice(members, func(i, j int) bool { return members[i].UUID < members[j].UUID })
		g := &device.DeviceGroup{
			Vendor:     Vendor,
			Type:       DeviceType,
			Name:       m,
			Attributes: attributes(members),
		}
		for _, d := range members {
			dev := &device.Device{ID: d.UUID, Healthy: d.Health.Healthy, HealthDesc: d.Health.Description}
			if d.PCIBusID != "" {
				dev.HwLocality = &device.DeviceLocality{PciBusID: d.PCIBusID}
			}
			g.Devices = append(g.Devices, dev)
		}
		groups = append(groups, g)
	}
	return groups
}

func attributes(members []devices.GPU) map[string]*structs.Attribute {
	attrs := map[string]*structs.Attribute{}
	minInt := func(name, unit string, value func(devices.GPU) int64) {
		var best int64
		for _, d := range members {
			if v := value(d); v > 0 && (best == 0 || v < best) {
				best = v
			}
		}
		if best > 0 {
			attrs[name] = structs.NewIntAttribute(best, unit)
		}
	}
	common := func(name string, value func(devices.GPU) string) {
		var s string
		for _, d := range members {
			v := value(d)
			if v == "" {
				continue
			}
			if s != "" && v != s {
				return
			}
			s = v
		}
		if s != "" {
			attrs[name] = structs.NewStringAttribute(s)
		}
	}
	minInt(AttrMemory, structs.UnitMiB, func(d devices.GPU) int64 { return int64(d.MemoryMiB) })
	minInt(AttrPowerLimit, structs.UnitW, func(d devices.GPU) int64 { return int64(d.PowerLimitW) })
	minInt(AttrCoresClock, structs.UnitMHz, func(d devices.GPU) int64 { return int64(d.SMClockMHz) })
	minInt(AttrMemoryClock, structs.UnitMHz, func(d devices.GPU) int64 { return int64(d.MemoryClockMHz) })
	minInt(AttrPCIeGen, "", func(d devices.GPU) int64 { return int64(d.PCIeGen) })
	minInt(AttrPCIeWidth, "", func(d devices.GPU) int64 { return int64(d.PCIeWidth) })
	common(AttrComputeCapability, func(d devices.GPU) string { return d.ComputeCapability })
	common(AttrMIGMode, func(d devices.GPU) string { return d.MIG.String() })
	common(AttrDriverVersion, func(d devices.GPU) string { return d.DriverVersion })
	return attrs
}
