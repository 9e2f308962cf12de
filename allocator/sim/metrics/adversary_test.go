package metrics_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/policy"
	"github.com/nomad-fft/nomad-fft/allocator/sim"
	"github.com/nomad-fft/nomad-fft/allocator/sim/metrics"
	"github.com/nomad-fft/nomad-fft/allocator/workload"
)

// advCluster is a small heterogeneous cluster on which Gavel's generator at 1 job/hour keeps
// jobs waiting, so that a lie has something to win.
var advCluster = []allocator.Model{{Name: "v100", GPUs: 4}, {Name: "p100", GPUs: 4}, {Name: "k80", GPUs: 4}}

// adversaryRun runs pol on one random workload twice, honest and with 10% liars of kind,
// and compares them.
func adversaryRun(t *testing.T, name string, kind sim.AdversaryKind, seed uint64, jobs int) metrics.AdversaryReport {
	t.Helper()
	run := func(advs []sim.Adversary) *sim.Log {
		p, err := policy.New(name, policy.Options{Seed: int64(seed), RestartSeconds: 30})
		if err != nil {
			t.Fatal(err)
		}
		cfg := sim.Config{Cluster: advCluster, RestartSeconds: 30, Adversaries: advs}
		if kind == sim.AdvSplit {
			// Per-job fairness rewards a split by design; tenant shares
			// answer it: every job its own tenant, a split job's parts one.
			cfg.TenantOf, cfg.TenantShares = sim.TenantPerJob, &loop.TenantShares{By: loop.TenantByNamespace}
		}
		lg, err := sim.Run(context.Background(), p, workload.NewGenerator(workload.GenConfig{Rate: 1, Seed: seed, MultiGPU: true, Jobs: jobs}), cfg)
		if err != nil {
			t.Fatalf("%s seed %d: %v", name, seed, err)
		}
		if lg.Stopped != "" {
			t.Fatalf("%s seed %d: stopped: %s", name, seed, lg.Stopped)
		}
		return lg
	}
	return metrics.Adversarial(run(nil), run([]sim.Adversary{{Kind: kind, Fraction: 0.1}}))
}

// TestAdversariesGainNothing is the property test of issue 20: over random workloads (Gavel's
// generator, seeds drawn per run), for each kind of lie, under the default policy, the liars'
// mean JCT is no lower than the same jobs' when honest (within 2%), and the honest jobs' mean
// JCT rises by at most 2% against the run without liars. Averaged over the seeds, per kind.
// The split into many jobs is run with tenant shares (every job its own tenant) and reported,
// not asserted: see the comment at the end. FFT_ADV_POLICY runs it under another policy (the
// paper's fft, for the report), and FFT_ADV_SEEDS sets the number of workloads (default 3:
// 60 jobs of Gavel's generator at 1 job/hour on 4+4+4 GPUs, restarts 30 s).
func TestAdversariesGainNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 2 simulations per kind and seed")
	}
	name := policy.DefaultName
	if v := os.Getenv("FFT_ADV_POLICY"); v != "" {
		name = v
	}
	seeds := 3
	if v, err := strconv.Atoi(os.Getenv("FFT_ADV_SEEDS")); err == nil && v > 0 {
		seeds = v
	}
	for _, kind := range []sim.AdversaryKind{sim.AdvOverReport, sim.AdvInflate, sim.AdvPoison, sim.AdvSplit} {
		t.Run(string(kind), func(t *testing.T) {
			var liar, gpu, honest float64
			n := 0
			for s := 0; s < seeds; s++ {
				seed := uint64(100 + s)
				rep := adversaryRun(t, name, kind, seed, 60)
				for _, r := range rep.Rows {
					if r.Kind == kind && r.Liars > 0 {
						liar += r.JCTRatio
						gpu += r.GPURatio
						honest += rep.HonestJCTRatio
						n++
						t.Logf("%s seed %d: %d liars, JCT x%.3f, GPU time x%.3f, %.0f%% gained; %d honest jobs' mean JCT x%.4f",
							kind, seed, r.Liars, r.JCTRatio, r.GPURatio, 100*r.Gained, rep.HonestJobs, rep.HonestJCTRatio)
					}
				}
			}
			if n == 0 {
				t.Fatalf("%s: no liars in %d workloads", kind, seeds)
			}
			liar, gpu, honest = liar/float64(n), gpu/float64(n), honest/float64(n)
			msg := fmt.Sprintf("%s under %s over %d workloads: liars' JCT x%.3f of honest, GPU time x%.3f; honest jobs' mean JCT x%.4f", kind, name, n, liar, gpu, honest)
			t.Log(msg)
			if kind == sim.AdvSplit {
				// Not a lie the round can check: the parts are real jobs
				// that run at once on more GPUs, and shorter jobs go first
				// under every SRSF-like objective. Tenant shares bound the
				// parts' fairness reference to one job's, not their JCT
				// (allocator/loop/README.md, "Threat model"), so it is
				// measured and reported, not asserted.
				return
			}
			if liar < 0.98 {
				t.Errorf("%s: liars gain: %s", kind, msg)
			}
			if honest > 1.02 {
				t.Errorf("%s: honest jobs lose: %s", kind, msg)
			}
		})
	}
}
