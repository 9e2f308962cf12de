package device

import (
	"context"
	"sort"
	"time"

	"github.com/hashicorp/nomad/plugins/device"
	"github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/nomad-fft/nomad-fft/devices"
)

// Statistic names of a device (nomad node status -stats, the client metrics).
const (
	StatGPUUtilization    = "gpu_utilization"    // %
	StatMemoryUtilization = "memory_utilization" // %
	StatMemoryUsed        = "memory_used"        // MiB
	StatPower             = "power"              // W, current draw
	StatTemperature       = "temperature"        // °C
	StatECCCorrected      = "ecc_errors_corrected"
	StatECCUncorrected    = "ecc_errors_uncorrected"
)

// Stats implements device.DevicePlugin: every interval it samples the devices last
// fingerprinted. Sampling errors are logged and the sample is skipped.
func (p *Plugin) Stats(ctx context.Context, interval time.Duration) (<-chan *device.StatsResponse, error) {
	src, _, err := p.source()
	if err != nil {
		return nil, err
	}
	if interval <= 0 {
		interval = time.Second
	}
	out := make(chan *device.StatsResponse)
	go p.statsLoop(ctx, src, interval, out)
	return out, nil
}

func (p *Plugin) statsLoop(ctx context.Context, src devices.Source, interval time.Duration, out chan<- *device.StatsResponse) {
	defer close(out)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			timer.Reset(interval)
		}
		samples, err := src.Stats(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.logger.Warn("sampling GPU statistics failed", "error", err)
			continue
		}
		groups := StatsGroups(samples, p.model, p.opts.now())
		if !send(ctx, out, &device.StatsResponse{Groups: groups}) {
			return
		}
	}
}

// StatsGroups turns samples into Nomad's per-model statistics, sorted by model. model names
// each sample's device; samples of devices it does not know (not fingerprinted, ignored)
// are dropped. The summary is memory used over memory total.
func StatsGroups(samples []devices.Stats, model func(uuid string) (string, bool), at time.Time) []*device.DeviceGroupStats {
	byModel := map[string]*device.DeviceGroupStats{}
	for _, s := range samples {
		m, ok := model(s.UUID)
		if !ok {
			continue
		}
		g := byModel[m]
		if g == nil {
			g = &device.DeviceGroupStats{Vendor: Vendor, Type: DeviceType, Name: m, InstanceStats: map[string]*device.DeviceStats{}}
			byModel[m] = g
		}
		g.InstanceStats[s.UUID] = deviceStats(s, at)
	}
	models := make([]string, 0, len(byModel))
	for m := range byModel {
		models = append(models, m)
	}
	sort.Strings(models)
	out := make([]*device.DeviceGroupStats, 0, len(models))
	for _, m := range models {
		out = append(out, byModel[m])
	}
	return out
}

func deviceStats(s devices.Stats, at time.Time) *device.DeviceStats {
	attrs := map[string]*structs.StatValue{}
	add := func(name, unit, desc string, v *int64) {
		if v != nil {
			attrs[name] = &structs.StatValue{IntNumeratorVal: v, Unit: unit, Desc: desc}
		}
	}
	add(StatGPUUtilization, "%", "GPU utilization", i64(s.GPUUtilPercent))
	add(StatMemoryUtilization, "%", "Memory bandwidth utilization", i64(s.MemoryUtilPercent))
	add(StatMemoryUsed, structs.UnitMiB, "Memory in use", i64(s.MemoryUsedMiB))
	add(StatPower, structs.UnitW, "Power draw", i64(s.PowerW))
	add(StatTemperature, "C", "GPU temperature", i64(s.TemperatureC))
	add(StatECCCorrected, "", "Corrected ECC errors since boot", i64(s.ECCCorrected))
	add(StatECCUncorrected, "", "Uncorrected ECC errors since boot", i64(s.ECCUncorrected))

	ds := &device.DeviceStats{Stats: &structs.StatObject{Attributes: attrs}, Timestamp: at}
	if s.MemoryUsedMiB != nil && s.MemoryTotalMiB != nil {
		ds.Summary = &structs.StatValue{
			IntNumeratorVal:   i64(s.MemoryUsedMiB),
			IntDenominatorVal: i64(s.MemoryTotalMiB),
			Unit:              structs.UnitMiB,
			Desc:              "Memory in use",
		}
	}
	return ds
}

// i64 widens an optional NVML counter.
func i64[T uint32 | uint64](v *T) *int64 {
	if v == nil {
		return nil
	}
	n := int64(*v)
	return &n
}
