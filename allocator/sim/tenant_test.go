package sim_test

import (
	"context"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/policy"
	"github.com/nomad-fft/nomad-fft/allocator/sim"
	"github.com/nomad-fft/nomad-fft/allocator/sim/metrics"
	"github.com/nomad-fft/nomad-fft/allocator/workload"
)

// One tenant submits ten times the jobs of another. Without tenant shares every job is owed
// the same; with equal shares each tenant is owed half the cluster, split among its jobs.
// On the headline cluster, busy (1.5 jobs/hour, 220 jobs of the generator), under FFT: the
// lone tenant's jobs finish fairer (mean FTF down) at the crowd's expense. GPU time is
// logged but not the measure: every job finishes, so a tenant's GPU time over the run is its
// jobs' work over the speed of the models they ran on, and a tenant served first on the
// fastest models uses less of it (measured: the lone tenant's share of GPU time falls from
// 0.081 to 0.042 while its mean FTF falls from 1.006 to 0.753).
func TestTenantSharesInSimulation(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 2 simulations")
	}
	tenant := func(j workload.JobSpec) string {
		if j.Index%11 == 0 {
			return "solo"
		}
		return "crowd"
	}
	type result struct{ gpuFrac, ftf map[string]float64 }
	run := func(shares *loop.TenantShares) result {
		p, _ := policy.New(policy.FFTName, policy.Options{})
		lg, err := sim.Run(context.Background(), p, workload.NewGenerator(workload.GenConfig{Rate: 1.5, Seed: 3, MultiGPU: true, Jobs: 220}),
			sim.Config{Cluster: guardCluster, TenantOf: tenant, TenantShares: shares, KeepRecords: true})
		if err != nil {
			t.Fatal(err)
		}
		gpu := map[string]float64{}
		total := 0.0
		for _, rec := range lg.Records {
			for _, l := range rec.Jobs {
				if l.Model != "" {
					gpu[l.User] += float64(l.GPUs)
					total += float64(l.GPUs)
				}
			}
		}
		res := result{gpuFrac: map[string]float64{}, ftf: map[string]float64{}}
		for k, v := range gpu {
			res.gpuFrac[k] = v / total
		}
		jobs, _ := metrics.Analyse(lg, nil)
		n := map[string]int{}
		for _, j := range jobs {
			tn := tenant(lg.Jobs[j.Index])
			res.ftf[tn] += j.FTF
			n[tn]++
		}
		for k := range res.ftf {
			res.ftf[k] /= float64(n[k])
		}
		return res
	}
	per, shared := run(nil), run(&loop.TenantShares{By: loop.TenantByNamespace})
	for _, tn := range []string{"solo", "crowd"} {
		t.Logf("%-5s per-job reference / equal tenant shares: GPU time %.3f / %.3f, mean FTF %.3f / %.3f",
			tn, per.gpuFrac[tn], shared.gpuFrac[tn], per.ftf[tn], shared.ftf[tn])
	}
	if !(shared.ftf["solo"] < 0.9*per.ftf["solo"]) || !(shared.ftf["crowd"] >= per.ftf["crowd"]) {
		t.Errorf("the lone tenant gains nothing from its share: mean FTF %.3f -> %.3f (crowd %.3f -> %.3f)",
			per.ftf["solo"], shared.ftf["solo"], per.ftf["crowd"], shared.ftf["crowd"])
	}
}
