package policy

// Descriptions are the registry's one-line descriptions by name, for
// `fftctl simulate -list`. A parallel map, so that adding a policy to
// Builtin stays a one-line change; TestEveryPolicyDescribed keeps the two
// in step.
var Descriptions = map[string]string{
	FFTName:              "The paper's FFT (Mo et al., ICS'25): the exact optimum of each round's program",
	FFTRemainingName:     "FFT with the volume term on remaining work, not total (our variant)",
	FFTStickyName:        "FFT that prices each park and resume at the restart time (our variant)",
	FFTUnitsName:         "Paper's terms, rho in rounds of the fastest model, weight 1000, restarts priced",
	FFTLagName:           "Unit-free FFT: debt = work behind the fair share, in GPU-rounds; restarts priced",
	FFTLateName:          "Unit-free FFT: debt = lateness against the fair finish time; restarts priced",
	FFTRateName:          "Unit-free FFT: completion-rate volume, debt = FTF lost so far; restarts priced",
	"fft-rate-w0.25":     "fft-rate with the fairness weight 0.25 (the best measured, HEADLINE.md)",
	"fft-rate-w4":        "fft-rate with the fairness weight 4",
	FFTRateW16Name:       "fft-rate with the fairness weight 16",
	FFTRateW0Name:        "fft-rate with no fairness credit: rate volume and restart prices alone",
	FFTStarveName:        "The paper's FFT, but a job 2 rounds late may win GPUs against bound (7)",
	FFTRateLowStarveName: "The default (fft-rate-w0.25), but a job 2 rounds late may win GPUs against (7)",
	FIFOName:             "Gavel's FIFO: arrival order, heterogeneity-agnostic, through Gavel's rounds",
	FIFOPerfName:         "FIFO, heterogeneity-aware: the queue's head takes the fastest model with room",
	BinpackName:          "What Nomad does alone: arrival order, fullest model first, never preempts",
	LASName:              "Max-min fairness (least attained service), heterogeneity-agnostic (Gavel)",
	GavelLASName:         "Gavel's heterogeneity-aware max-min fairness (LP over normalised throughputs)",
	FTFName:              "Finish-time fairness (Themis-like), heterogeneity-agnostic (Gavel)",
	GavelFTFName:         "Gavel's heterogeneity-aware finish-time fairness (LP descent on max rho)",
	IsolatedName:         "Gavel's isolated policy: a 1/m share of every model; the FTF reference",
	TiresiasName:         "Tiresias: two-queue discretised least attained service, one pair per model",
	AlloXName:            "AlloX: min-cost matching of jobs to model slots, least total completion time",
	SiaName:              "Sia-like integer program for rigid jobs (goodput, restarts), solved exactly",
}

// Describe is the one-line description of the named policy ("" if none).
func Describe(name string) string { return Descriptions[name] }
