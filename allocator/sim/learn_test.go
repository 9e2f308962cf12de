package sim_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/policy"
	"github.com/nomad-fft/nomad-fft/allocator/profile"
	"github.com/nomad-fft/nomad-fft/allocator/sim"
	"github.com/nomad-fft/nomad-fft/allocator/sim/metrics"
	"github.com/nomad-fft/nomad-fft/allocator/workload"
)

var headlineCluster = []allocator.Model{{Name: "v100", GPUs: 12}, {Name: "p100", GPUs: 12}, {Name: "k80", GPUs: 12}}

// In learning mode no job declares a throughput: every value a round uses
// is the loop's (measured or estimated, never declared), a measured value is
// the true rate, the policy decides on the loop's values, and every job
// still finishes.
func TestLearnModeSeesOnlyTheLoopsValues(t *testing.T) {
	for _, name := range []string{policy.FFTName, policy.GavelLASName} {
		t.Run(name, func(t *testing.T) {
			pol, _ := policy.New(name, policy.Options{Seed: 1})
			lg, err := sim.Run(context.Background(), pol, workload.NewGenerator(workload.GenConfig{Rate: 2, Seed: 3, MultiGPU: true, Jobs: 40}),
				sim.Config{Cluster: headlineCluster, Learn: true, KeepRecords: true})
			if err != nil {
				t.Fatal(err)
			}
			if _, s := metrics.Analyse(lg, nil); s.Unfinished != 0 || lg.Stopped != "" {
				t.Fatalf("%d jobs unfinished, stopped %q", s.Unfinished, lg.Stopped)
			}
			truth := map[string]map[string]float64{}
			for _, j := range lg.Jobs {
				truth[j.ID] = j.Rate
			}
			count := map[profile.Source]int{}
			learned := 0
			for _, rec := range lg.Records {
				for _, line := range rec.Jobs {
					if line.Learn != nil {
						learned++
					}
					for m, th := range line.Throughput {
						count[th.Source]++
						want := truth[line.ID][m] * lg.RoundSeconds
						if th.Source == profile.SourceMeasured && math.Abs(th.UnitsPerRound-want) > 1e-6*want {
							t.Fatalf("round %d, %s on %s: measured %g, true %g", rec.Round, line.ID, m, th.UnitsPerRound, want)
						}
					}
					if th, ok := line.Throughput[line.Model]; ok && line.Model != "" {
						if want := math.Min(th.Expected(), th.UnitsPerRound*math.Exp(0.5)); math.Abs(line.Chosen.Throughput-want) > 1e-9*want {
							t.Fatalf("round %d, %s on %s: the policy used %g, the loop's value is %g (%+v)", rec.Round, line.ID, line.Model, line.Chosen.Throughput, want, th)
						}
					}
				}
			}
			if count[profile.SourceDeclared] > 0 || count[profile.SourceMeasured] == 0 || count[profile.SourceEstimated]+count[profile.SourcePrior] == 0 || learned == 0 {
				t.Fatalf("sources %v, %d lines run to be measured: want no declared value, some measured, some estimated, some profiling", count, learned)
			}
		})
	}
}

// everywhere drops the jobs that do not run on every model their gang fits
// (learning mode rejects them), so the oracle and the learning runs of the
// cost-of-learning table see the same jobs.
type everywhere struct {
	src     workload.Source
	cluster []allocator.Model
	dropped int
}

func (e *everywhere) Next() (workload.JobSpec, error) {
	for {
		j, err := e.src.Next()
		if err != nil {
			return j, err
		}
		if sim.RunsEverywhere(e.cluster, &j) {
			return j, nil
		}
		e.dropped++
	}
}

// TestLearnCost is the cost-of-learning table of allocator/profile/README.md:
// the headline setting with the true rates declared (oracle) and with none
// (learned online). It runs only with SIM_LONG=learn (minutes of CPU);
// SIM_LEARN_JOBS overrides the 400 jobs, SIM_LEARN_RESTART_S the restart
// time (0, as Gavel's simulator).
func TestLearnCost(t *testing.T) {
	if os.Getenv("SIM_LONG") != "learn" {
		t.Skip("set SIM_LONG=learn to run")
	}
	jobs := 400
	if v := os.Getenv("SIM_LEARN_JOBS"); v != "" {
		fmt.Sscan(v, &jobs)
	}
	restart := 0.0
	if v := os.Getenv("SIM_LEARN_RESTART_S"); v != "" {
		fmt.Sscan(v, &restart)
	}
	policies := []string{policy.FFTName, policy.GavelFTFName, policy.GavelLASName}
	seeds := []uint64{0, 1, 2}
	type agg struct{ jct, ftf, ftfMax, unfair, preempt, switches float64 }
	res := map[string]*agg{}
	dropped := 0
	for _, p := range policies {
		for _, learn := range []bool{false, true} {
			key := fmt.Sprintf("%s/%v", p, learn)
			res[key] = &agg{}
			for _, seed := range seeds {
				pol, _ := policy.New(p, policy.Options{Seed: int64(seed)})
				src := &everywhere{src: workload.NewGenerator(workload.GenConfig{Rate: 0.6, Seed: seed, MultiGPU: true, Jobs: jobs}), cluster: headlineCluster}
				lg, err := sim.Run(context.Background(), pol, src, sim.Config{Cluster: headlineCluster, Learn: learn, RestartSeconds: restart})
				if err != nil {
					t.Fatal(err)
				}
				_, s := metrics.Analyse(lg, nil)
				if s.Unfinished != 0 || s.Rejected != 0 {
					t.Fatalf("%s seed %d: %d unfinished, %d rejected", key, seed, s.Unfinished, s.Rejected)
				}
				if p == policies[0] && !learn {
					dropped += src.dropped
				}
				a := res[key]
				a.jct += s.JCT.Mean / 3600 / float64(len(seeds))
				a.ftf += s.FTF.Mean / float64(len(seeds))
				a.ftfMax += s.FTF.Max / float64(len(seeds))
				a.unfair += s.FTF.Unfair / float64(len(seeds))
				a.preempt += float64(s.Preemptions) / float64(len(seeds))
				a.switches += float64(s.Switches) / float64(len(seeds))
				t.Logf("%s seed %d: JCT %.2f h, FTF mean %.3f max %.2f, %d rounds, %.1fs", key, seed, s.JCT.Mean/3600, s.FTF.Mean, s.FTF.Max, s.Rounds, lg.Wall.Seconds())
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%d jobs per seed generated, %d of 3 seeds' jobs dropped (not run on every model), restart %g s\n\n", jobs, dropped, restart)
	fmt.Fprintln(&b, "| policy | oracle JCT (h) | learned JCT (h) | JCT cost | oracle FTF mean / max | learned FTF mean / max | FTF mean cost | unfair oracle / learned | preemptions oracle / learned | switches oracle / learned |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|---|---|---|---|")
	for _, p := range policies {
		o, l := res[p+"/false"], res[p+"/true"]
		fmt.Fprintf(&b, "| %s | %.2f | %.2f | %+.1f%% | %.3f / %.2f | %.3f / %.2f | %+.1f%% | %.0f%% / %.0f%% | %.0f / %.0f | %.0f / %.0f |\n", p, o.jct, l.jct, 100*(l.jct/o.jct-1),
			o.ftf, o.ftfMax, l.ftf, l.ftfMax, 100*(l.ftf/o.ftf-1), 100*o.unfair, 100*l.unfair, o.preempt, l.preempt, o.switches, l.switches)
	}
	_, _ = io.WriteString(os.Stdout, b.String())
}
