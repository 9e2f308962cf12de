package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// reproduceArgs is the `fftctl simulate` command line of REPRODUCTION.md:
// Gavel's continuous multi-GPU setting (36 V100 + 36 P100 + 36 K80, jobs
// 4000-5000 measured) at 1.0 and 2.0 jobs/hour over seeds 0-2.
// It runs Gavel's fixed rounds (-min-round-gap 0s), as Gavel's simulator.
const reproduceArgs = "-policies fifo,las,gavel-las,gavel-ftf -cluster v100=36,p100=36,k80=36 -rates 1.0,2.0 -seeds 0,1,2 -jobs 0 -window 4000:5000 -min-round-gap 0s -plots=false -parallel 2"

// reproduceGavelArgs is reproduceArgs on Gavel's own workloads (-rng
// gavel: the jobs Gavel's simulator generates for seeds 0-2; Gavel's
// published numbers are its seed 0).
const reproduceGavelArgs = reproduceArgs + " -rng gavel"

// headlineArgs is the command line of HEADLINE.md's current rows: the
// allocator's default against the nearest baselines on the shipped
// schedule (EARLY_ROUNDS.md, G = 5s, S = 0).
const headlineArgs = "-policies fft-rate-w0.25,fft,gavel-las,gavel-ftf,sia,allox -cluster v100=12,p100=12,k80=12 -rates 0.6 -seeds 0,1,2,3,4 -jobs 0 -window 500:1500 -max-rounds 250000 -wide -min-round-gap 5s -plots=false -parallel 1 -reference none"

// TestLongRun runs a long command only when SIM_LONG names it
// ("reproduce", "reproduce-gavel" or "headline"); SIM_ARGS overrides the
// arguments. It is
// not a unit test: the reproduction takes many CPU-minutes.
func TestLongRun(t *testing.T) {
	var args string
	switch os.Getenv("SIM_LONG") {
	case "":
		t.Skip("set SIM_LONG=reproduce, reproduce-gavel or headline (or SIM_ARGS) to run")
	case "reproduce":
		args = reproduceArgs
	case "reproduce-gavel":
		args = reproduceGavelArgs
	case "headline":
		args = headlineArgs
	}
	if a := os.Getenv("SIM_ARGS"); a != "" {
		args = a
	}
	if !strings.Contains(args, "-out") {
		// go test runs in the package directory; write under the
		// repository's ignored out/ folder.
		args += " -out " + filepath.Join("..", "..", "..", "out", os.Getenv("SIM_LONG"))
	}
	if code := RunWith(append([]string{"simulate"}, strings.Fields(args)...), nil, os.Stdout, os.Stderr); code != 0 {
		t.Fatalf("simulate %s: exit %d", args, code)
	}
}
