package nomadapi

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/allocator/jobmeta"
)

// Two holds keep Nomad from placing a job before a round selects it.
//
// The node pool: the GPU clients are in their own pool (client { node_pool =
// "gpu" }), so a job in any other pool, as a plain `nomad job run` leaves it
// (pool "default"), stays pending with Nomad's own reason ("No nodes were
// eligible for evaluation"); a start moves it into the pool.
//
// The gate: a job-level constraint that no node satisfies. While it is in
// place a new job stays pending (Nomad's placement failure names it), and a
// stopped allocation is not rescheduled; lifting it places the job. Nodes
// never carry meta.fft_gate, so the constraint filters every node. Parking
// uses it, since a job already in the pool must stay there.
const (
	GateAttribute = "${meta.fft_gate}"
	GateValue     = "held"
	// ModelAttribute is the device attribute the steering constraint uses.
	ModelAttribute = "${device.model}"
	// GPUVendor and GPUType are the device plugin's vendor and type.
	GPUVendor = "nvidia"
	GPUType   = "gpu"
)

// GateConstraint returns the constraint that holds a job. Without a GPU node
// pool (fft-allocator -node-pool ""), job authors put it in their jobspec, so
// that even a plain `nomad job run` never starts the job before a round
// selects it:
//
//	constraint {
//	  attribute = "${meta.fft_gate}"
//	  value     = "held"
//	}
func GateConstraint() *api.Constraint {
	return &api.Constraint{LTarget: GateAttribute, RTarget: GateValue, Operand: "="}
}

// Gated reports whether the job carries the gate constraint.
func Gated(job *api.Job) bool {
	for _, c := range job.Constraints {
		if c != nil && c.LTarget == GateAttribute {
			return true
		}
	}
	return false
}

// SetGate puts the gate on the job or lifts it, and reports whether the job
// changed.
func SetGate(job *api.Job, on bool) bool {
	if Gated(job) == on {
		return false
	}
	if on {
		job.Constraints = append(job.Constraints, GateConstraint())
		return true
	}
	dropConstraints(job, GateAttribute)
	return true
}

// dropConstraints removes the job-level constraints on attribute.
func dropConstraints(job *api.Job, attribute string) {
	kept := job.Constraints[:0]
	for _, c := range job.Constraints {
		if c != nil && c.LTarget != attribute {
			kept = append(kept, c)
		}
	}
	job.Constraints = kept
}

// InPool reports whether Nomad may place the job on the nodes of pool: the
// job's node pool is pool, or "all". With pool "" (no GPU pool) every job
// may go anywhere.
func InPool(job *api.Job, pool string) bool {
	if pool == "" {
		return true
	}
	p := deref(job.NodePool)
	return p == pool || p == api.NodePoolAll
}

// SetPool moves the job into pool ("" leaves it where it is) and reports
// whether the job changed.
func SetPool(job *api.Job, pool string) bool {
	if pool == "" || deref(job.NodePool) == pool {
		return false
	}
	job.NodePool = &pool
	return true
}

// gpuRequest reports whether a device request asks for the plugin's GPUs:
// "gpu", "nvidia/gpu" or "nvidia/gpu/<model>".
func gpuRequest(d *api.RequestedDevice) bool {
	parts := strings.Split(d.Name, "/")
	switch len(parts) {
	case 1:
		return parts[0] == GPUType
	case 2, 3:
		return parts[0] == GPUVendor && parts[1] == GPUType
	}
	return false
}

// eachGPURequest calls f on every GPU device request of every task.
func eachGPURequest(job *api.Job, f func(tg *api.TaskGroup, d *api.RequestedDevice)) {
	for _, tg := range job.TaskGroups {
		for _, task := range tg.Tasks {
			if task == nil || task.Resources == nil {
				continue
			}
			for _, d := range task.Resources.Devices {
				if d != nil && gpuRequest(d) {
					f(tg, d)
				}
			}
		}
	}
}

// GPUDemand returns d_j: the GPUs the job needs at once, the sum over its
// task groups of count times the GPU device counts of its tasks (a device
// block without count asks for 1). The sum saturates: a demand beyond
// jobmeta.MaxGPUs, a negative group count, or a device or group count beyond
// it (even in a group of count 0) give jobmeta.MaxGPUs+1, which jobmeta.Parse refuses
// (device counts are uint64 in Nomad's API: 2^64-1 and 2 must not sum to 1).
func GPUDemand(job *api.Job) int {
	const over = jobmeta.MaxGPUs + 1
	total := uint64(0)
	eachGPURequest(job, func(tg *api.TaskGroup, d *api.RequestedDevice) {
		n, count := uint64(1), int64(1)
		if tg.Count != nil {
			count = int64(*tg.Count)
		}
		if d.Count != nil {
			n = *d.Count
		}
		switch {
		case count < 0 || n > over || uint64(count) > over:
			total = over
		case total < over:
			// Both factors are at most over (2^16+1), so the product fits.
			total = min(total+n*uint64(count), over)
		}
	})
	return int(total)
}

// modelConstraint is the steering constraint for a model. A purely numeric
// model name would be compared as a number by "=", so such names (and any
// that starts like a number) use an anchored regexp instead.
func modelConstraint(model string) *api.Constraint {
	if model != "" && strings.ContainsRune("0123456789.-+", rune(model[0])) {
		return &api.Constraint{LTarget: ModelAttribute, RTarget: "^" + regexp.QuoteMeta(model) + "$", Operand: "regexp"}
	}
	return &api.Constraint{LTarget: ModelAttribute, RTarget: model, Operand: "="}
}

// constraintModel reads back the model a steering constraint names, "" if
// the constraint is not one modelConstraint writes.
func constraintModel(c *api.Constraint) string {
	if c == nil || c.LTarget != ModelAttribute {
		return ""
	}
	switch c.Operand {
	case "=", "==", "is":
		return c.RTarget
	case "regexp":
		s := c.RTarget
		if len(s) < 2 || s[0] != '^' || s[len(s)-1] != '$' {
			return ""
		}
		s = s[1 : len(s)-1]
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
			} else if strings.ContainsRune(`.+*?()|[]{}^$`, rune(s[i])) {
				return "" // a real pattern, not a quoted name
			}
			b.WriteByte(s[i])
		}
		return b.String()
	}
	return ""
}

// SteeredModel returns the model the job's GPU requests are constrained to,
// "" when they name none or disagree.
func SteeredModel(job *api.Job) string {
	model, first := "", true
	eachGPURequest(job, func(_ *api.TaskGroup, d *api.RequestedDevice) {
		m := ""
		if parts := strings.Split(d.Name, "/"); len(parts) == 3 {
			m = parts[2]
		}
		for _, c := range d.Constraints {
			if cm := constraintModel(c); cm != "" {
				m = cm
			}
		}
		if first {
			model, first = m, false
		} else if m != model {
			model = ""
		}
	})
	return model
}

// Steer rewrites every GPU device request of the job to ask for model: any
// model named in the request or constrained on ${device.model} is replaced
// by one steering constraint. It returns an error when the job has no GPU
// request to steer.
func Steer(job *api.Job, model string) error {
	n := 0
	eachGPURequest(job, func(_ *api.TaskGroup, d *api.RequestedDevice) {
		n++
		if parts := strings.Split(d.Name, "/"); len(parts) == 3 {
			d.Name = parts[0] + "/" + parts[1]
		}
		kept := d.Constraints[:0]
		for _, c := range d.Constraints {
			if c != nil && c.LTarget != ModelAttribute {
				kept = append(kept, c)
			}
		}
		d.Constraints = append(kept, modelConstraint(model))
	})
	if n == 0 {
		return fmt.Errorf("job %q has no device \"nvidia/gpu\" request to steer to %q", deref(job.ID), model)
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// NodeAttribute is the attribute the placement pin constrains: the node's
// unique ID, which Nomad never reuses.
const NodeAttribute = "${node.unique.id}"

// GPUPieces are the GPUs of each allocation the job asks for: per task
// group, its tasks' GPU device counts summed, once per instance (count).
// Each allocation is placed on one node, so each piece must fit one host.
func GPUPieces(job *api.Job) []int {
	per := map[*api.TaskGroup]int{}
	var groups []*api.TaskGroup
	eachGPURequest(job, func(tg *api.TaskGroup, d *api.RequestedDevice) {
		if _, seen := per[tg]; !seen {
			groups = append(groups, tg)
		}
		n := 1
		if d.Count != nil {
			n = int(*d.Count)
		}
		per[tg] += n
	})
	var out []int
	for _, tg := range groups {
		count := 1
		if tg.Count != nil {
			count = *tg.Count
		}
		for i := 0; i < count && i < maxPieces; i++ {
			out = append(out, per[tg])
		}
	}
	return out
}

// maxPieces bounds the allocations one job's pieces list (a count beyond it
// is refused by the jobmeta bound on d_j anyway).
const maxPieces = 1 << 12

// PinnedNodes are the node IDs the job's placement pin names (nil: none).
func PinnedNodes(job *api.Job) []string {
	for _, c := range job.Constraints {
		if c == nil || c.LTarget != NodeAttribute {
			continue
		}
		if c.Operand == "=" || c.Operand == "==" {
			return []string{c.RTarget}
		}
		return strings.Split(c.RTarget, ",")
	}
	return nil
}

// Pin constrains the job to the nodes (sorted, none: unpinned) and reports
// whether the job changed. One node is "=", several "set_contains_any" (true
// when the node's ID is one of them): on Nomad 1.6.1 both re-place a running
// allocation whose node the new pin leaves out (the in-place check fails).
func Pin(job *api.Job, nodes []string) bool {
	if strings.Join(PinnedNodes(job), ",") == strings.Join(nodes, ",") {
		return false
	}
	dropConstraints(job, NodeAttribute)
	switch len(nodes) {
	case 0:
	case 1:
		job.Constraints = append(job.Constraints, &api.Constraint{LTarget: NodeAttribute, RTarget: nodes[0], Operand: "="})
	default:
		job.Constraints = append(job.Constraints, &api.Constraint{LTarget: NodeAttribute, RTarget: strings.Join(nodes, ","), Operand: "set_contains_any"})
	}
	return true
}
