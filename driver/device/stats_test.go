package device

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/plugins/device"
	"github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/nomad-fft/nomad-fft/devices"
)

func TestStatsGroups(t *testing.T) {
	at := time.Unix(1700000000, 0)
	u32 := func(v uint32) *uint32 { return &v }
	u64 := func(v uint64) *uint64 { return &v }
	i64 := func(v int64) *int64 { return &v }
	models := map[string]string{"GPU-a": modelV100, "GPU-b": modelA100}
	model := func(uuid string) (string, bool) { m, ok := models[uuid]; return m, ok }

	got := StatsGroups([]devices.Stats{
		{UUID: "GPU-a", GPUUtilPercent: u32(87), MemoryUsedMiB: u64(1024), MemoryTotalMiB: u64(16384), PowerW: u32(120)},
		{UUID: "GPU-b", TemperatureC: u32(40), ECCUncorrected: u64(0)},
		{UUID: "GPU-ignored", PowerW: u32(1)},
	}, model, at)

	want := []*device.DeviceGroupStats{
		{Vendor: "nvidia", Type: "gpu", Name: modelA100, InstanceStats: map[string]*device.DeviceStats{
			"GPU-b": {Timestamp: at, Stats: &structs.StatObject{Attributes: map[string]*structs.StatValue{
				StatTemperature:    {IntNumeratorVal: i64(40), Unit: "C", Desc: "GPU temperature"},
				StatECCUncorrected: {IntNumeratorVal: i64(0), Desc: "Uncorrected ECC errors since boot"},
			}}},
		}},
		{Vendor: "nvidia", Type: "gpu", Name: modelV100, InstanceStats: map[string]*device.DeviceStats{
			"GPU-a": {
				Timestamp: at,
				Summary:   &structs.StatValue{IntNumeratorVal: i64(1024), IntDenominatorVal: i64(16384), Unit: structs.UnitMiB, Desc: "Memory in use"},
				Stats: &structs.StatObject{Attributes: map[string]*structs.StatValue{
					StatGPUUtilization: {IntNumeratorVal: i64(87), Unit: "%", Desc: "GPU utilization"},
					StatMemoryUsed:     {IntNumeratorVal: i64(1024), Unit: structs.UnitMiB, Desc: "Memory in use"},
					StatPower:          {IntNumeratorVal: i64(120), Unit: structs.UnitW, Desc: "Power draw"},
				}},
			},
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("StatsGroups (-want,+got):\n%s", diff)
	}
}
