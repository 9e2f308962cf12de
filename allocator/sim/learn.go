package sim

import "strings"

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

// runsEverywhere reports whether the job has a rate on every model of the
// cluster whose GPUs can hold its gang: in learning mode the loop cannot
// know where a job does not run, so a job that does not run on some model
// is rejected at admission rather than left to make no progress there.
func (c *Cluster) runsEverywhere(spec *JobSpec) bool {
	for _, m := range c.models {
		if m.GPUs >= spec.GPUs && !(spec.Rate[m.Name] > 0) {
			return false
		}
	}
	return true
}
