package sim

import (
	"strings"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/workload"
)

// Learning mode (Config.Learn): the jobs declare no throughput, as jobs
// submitted without fft.throughput; the cluster still runs them at their
// true rates and reports their true progress, so the loop measures and
// estimates (allocator/loop, profile.go) and every policy sees only the
// loop's values. Each job carries its family, as fft.family would.

// Family is a job type's family as the throughput estimator's priors name
// it: Gavel's model column, the type without its batch size
// ("ResNet-50 (batch size 64)" is "ResNet-50").
func Family(jobType string) string {
	f, _, _ := strings.Cut(jobType, " (")
	return strings.TrimSpace(f)
}

// runsEverywhere reports whether the job runs everywhere in the cluster
// (RunsEverywhere).
func (c *Cluster) runsEverywhere(spec *workload.JobSpec) bool { return RunsEverywhere(c.models, spec) }

// RunsEverywhere reports whether the job has a rate on every model whose
// GPUs can hold its gang: in learning mode the loop cannot know where a job
// does not run, so a job that does not run on some model is rejected at
// admission rather than left to make no progress there.
func RunsEverywhere(models []allocator.Model, spec *workload.JobSpec) bool {
	for _, m := range models {
		if m.GPUs >= spec.GPUs && !(spec.Rate[m.Name] > 0) {
			return false
		}
	}
	return true
}
