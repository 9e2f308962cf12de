package devices

import "fmt"

// MIGMode says whether a GPU is partitioned into MIG instances, or whether a device is one.
type MIGMode int

const (
	// MIGUnsupported: the GPU has no MIG support, or NVML could not tell.
	MIGUnsupported MIGMode = iota
	// MIGDisabled: the GPU supports MIG and is used whole.
	MIGDisabled
	// MIGEnabled: the GPU is partitioned; its instances are reported instead of it.
	MIGEnabled
	// MIGInstance: the device is one MIG instance of a partitioned GPU.
	MIGInstance
)

// String returns the attribute value used in fingerprints.
func (m MIGMode) String() string {
	switch m {
	case MIGUnsupported:
		return "unsupported"
	case MIGDisabled:
		return "disabled"
	case MIGEnabled:
		return "enabled"
	case MIGInstance:
		return "instance"
	default:
		return fmt.Sprintf("MIGMode(%d)", int(m))
	}
}

// Health is what NVML tells about a device's fitness for work.
//
// The policy, in order:
//   - a device that answers a query with ERROR_GPU_IS_LOST is unhealthy;
//   - a device that raised a critical XID event (application-caused XIDs excepted, see
//     [IsApplicationXID]) or a double-bit ECC event is unhealthy until the plugin restarts,
//     since NVIDIA documents that such a GPU needs a reset;
//   - a device whose events NVML watches and that raised none of the above is healthy;
//   - a device whose events NVML cannot watch (ERROR_NOT_SUPPORTED, common on consumer and
//     virtualised GPUs) is reported healthy with Known false, and Description saying
//     "health unknown": it stays schedulable, and only a lost GPU is detected on it.
type Health struct {
	Healthy bool
	// Known is false when NVML events are not available for this device.
	Known bool
	// Description is a human-readable reason, shown by Nomad next to the device.
	Description string
}

// Health descriptions reported for devices; exported so callers and tests can match them.
const (
	HealthDescOK      = "healthy: NVML XID and ECC events watched"
	HealthDescUnknown = "health unknown: NVML events not supported for this device; only a lost GPU is detected"
	HealthDescLost    = "unhealthy: GPU is lost (NVML ERROR_GPU_IS_LOST)"
)

// GPU is one schedulable NVIDIA device: a whole GPU, or one MIG instance of a partitioned GPU.
// Zero numeric values and empty strings mean NVML did not report the fact (not supported).
type GPU struct {
	// UUID is NVML's identifier ("GPU-…", or "MIG-…" for an instance); it is what
	// NVIDIA_VISIBLE_DEVICES takes.
	UUID string
	// Model is NVML's device name, for example "NVIDIA A100-SXM4-40GB". MIG instances carry
	// the instance profile in it ("NVIDIA A100-SXM4-40GB MIG 1g.5gb").
	Model string
	// Index is NVML's index of the GPU (of the parent GPU for a MIG instance).
	Index int
	// MemoryMiB is the total framebuffer memory.
	MemoryMiB uint64
	// ComputeCapability is the CUDA compute capability, "major.minor".
	ComputeCapability string
	// PCIBusID is the PCI bus id ("00000000:3B:00.0"); the parent's for a MIG instance.
	PCIBusID string
	// PowerLimitW is the enforced power limit (not the current draw), in watts.
	PowerLimitW uint32
	// SMClockMHz and MemoryClockMHz are the maximum clocks.
	SMClockMHz     uint32
	MemoryClockMHz uint32
	// PCIeGen and PCIeWidth describe the current PCIe link.
	PCIeGen   int
	PCIeWidth int
	// MIG is the MIG mode of the GPU, or MIGInstance for an instance.
	MIG MIGMode
	// ParentUUID is the UUID of the partitioned GPU, for a MIG instance only.
	ParentUUID string
	// DriverVersion is the NVIDIA driver version of the machine.
	DriverVersion string
	// Health is the device's health under the policy documented on [Health].
	Health Health
}

// Stats is one sample of a device's statistics. Nil fields were not reported by NVML.
type Stats struct {
	UUID string
	// GPUUtilPercent and MemoryUtilPercent are NVML's utilisation rates over the last sample period.
	GPUUtilPercent    *uint32
	MemoryUtilPercent *uint32
	MemoryUsedMiB     *uint64
	MemoryTotalMiB    *uint64
	// PowerW is the current power draw.
	PowerW *uint32
	// TemperatureC is the GPU core temperature in degrees Celsius.
	TemperatureC *uint32
	// ECCCorrected and ECCUncorrected are volatile (since boot) ECC error counts.
	ECCCorrected   *uint64
	ECCUncorrected *uint64
}
