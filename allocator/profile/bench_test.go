package profile

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// benchEstimator is a cluster-sized estimator: jobs on 6 models, 20
// families, gang sizes 1 to 8, each job measured on 1 to 3 models.
func benchEstimator(b *testing.B, jobs int) (*Estimator, []string) {
	r := rand.New(rand.NewPCG(3, 4))
	models := []string{"V100", "P100", "K80", "A100", "T4", "A10"}
	e := newEst(b, GavelPriors(), WithRefitLogTolerance(0))
	must(b, e.AddModels(models...))
	for j := 0; j < jobs; j++ {
		id := jobID(j)
		must(b, e.AddJob(Job{ID: id, Family: fmt.Sprintf("f%d", r.IntN(20)), GPUs: 1 << r.IntN(4)}))
		for _, m := range r.Perm(len(models))[:1+r.IntN(3)] {
			must(b, e.Measure(id, models[m], math.Exp(3+r.NormFloat64())))
		}
	}
	return e, models
}

// BenchmarkRound is what one round costs the estimator: a new measurement
// (so a refit) and every job's throughput on every model.
func BenchmarkRound(b *testing.B) {
	for _, jobs := range []int{100, 1000} {
		b.Run(fmt.Sprintf("jobs=%d", jobs), func(b *testing.B) {
			e, models := benchEstimator(b, jobs)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				must(b, e.Measure(jobID(i%jobs), models[i%len(models)], 10))
				for j := 0; j < jobs; j++ {
					for _, m := range models {
						_ = e.Throughput(jobID(j), m)
					}
				}
			}
		})
	}
}
