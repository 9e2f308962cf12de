package allocator

import "github.com/nomad-fft/nomad-fft/fairness"

// Ranges of every value the engine multiplies or divides. Validate rejects
// a value outside its range with a *FieldError, so that every cost term
// stays finite (and far from overflow) for any accepted instance. With the
// bounds below, the largest magnitudes are (w = a weight <= MaxWeight):
//
//	Wait   = w * (t - a_j) * theta / W     <= 1e6 * 1e12 * 1e15          = 1e33
//	Volume = w * d_j * W / theta           <= 1e6 * 65536 * 1e15         < 1e27
//	Switch = w * d_j * (restart + 8*state/gbps) / R
//	                                       <= 1e6 * 65536 * (1e9 + 8e9/1e-6) / 1e-3 < 1e34
//	Credit = w * rho * theta               <= 1e6 * 1e100 * 1e15         = 1e121
//
// and a round's objective, a sum of at most one term per job, stays below
// 1e130 for any number of jobs that fits in memory.
const (
	// MaxRound bounds the round index t (and so t - a_j): a million
	// years of one-minute rounds.
	MaxRound = 1e12
	// MaxWork bounds W_j (work units); W_j must also be > 0.
	MaxWork = 1e15
	// MaxThroughput bounds theta_j^i (work units per round); 0 means the
	// job cannot run on the model.
	MaxThroughput = 1e15
	// MaxWorkRatio bounds both W_j/theta and theta/W_j for every theta >
	// 0: on each model it can use, a job finishes in at least 1e-15 and
	// at most 1e15 rounds. It keeps the wait and volume terms finite.
	MaxWorkRatio = 1e15
	// MaxJobGPUs bounds d_j; MaxModelGPUs bounds Y_i (the solver's
	// state space is a product of Y_i + 1, so it must not overflow).
	MaxJobGPUs   = 1 << 16
	MaxModelGPUs = 1 << 24
	// MaxStateGB bounds a checkpoint (an exabyte); MaxMemoryGB bounds the
	// memory of a GPU or a job's need per GPU.
	MaxStateGB  = 1e9
	MaxMemoryGB = 1e9
	// MaxWeight bounds each cost weight; 0 turns a term off.
	MaxWeight = 1e6
	// MinRoundSeconds and MaxRoundSeconds bound R, which divides the
	// switching penalty.
	MinRoundSeconds = 1e-3
	MaxRoundSeconds = 1e9
	// MinTransferGbps and MaxTransferGbps bound the checkpoint transfer
	// rate, which divides the checkpoint size.
	MinTransferGbps = 1e-6
	MaxTransferGbps = 1e9
	// MaxRestartSeconds bounds the restart time (about 30 years).
	MaxRestartSeconds = 1e9
	// MaxRho bounds rho_j in the fairness state; the ledger never grows
	// rho past it (fairness.MaxRho).
	MaxRho = fairness.MaxRho
	// MaxFairnessWeight bounds w_j in the fairness state (0 means 1).
	MaxFairnessWeight = 1e6
)

// inRange reports whether v is a number (not NaN, not infinite) in [lo, hi].
func inRange(v, lo, hi float64) bool { return v >= lo && v <= hi }

// ValidRoundSeconds reports whether v is a round length R the engine accepts.
func ValidRoundSeconds(v float64) bool { return inRange(v, MinRoundSeconds, MaxRoundSeconds) }

// ValidRestartSeconds reports whether v is a restart time the engine accepts (0 included).
func ValidRestartSeconds(v float64) bool { return inRange(v, 0, MaxRestartSeconds) }

// inOpenRange reports whether v is a number in (lo, hi].
func inOpenRange(v, lo, hi float64) bool { return v > lo && v <= hi }
