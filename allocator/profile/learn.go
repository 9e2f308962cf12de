package profile

import (
	"fmt"
	"sort"
)

// The reasons LearnModel gives for its choice.
const (
	// ReasonFastest: the model with enough free GPUs whose expected speed
	// for this job (its family and gang size) is highest.
	ReasonFastest = "fastest expected model with enough free GPUs"
	// ReasonMostFree: no candidate model has a speed factor yet; the
	// model with the most free GPUs.
	ReasonMostFree = "no model has a speed factor yet: the model with the most free GPUs"
	// ReasonWait: no candidate has enough free GPUs; the best of them by
	// the same order, where the job should wait.
	ReasonWait = "no model has enough free GPUs: the best of them by expected speed, then free GPUs, to wait for"
)

// speedTie is the log-speed difference below which two models count as
// equally fast (then more free GPUs wins, then the name).
const speedTie = 1e-9

// Choice is the model a job is first run on so that it gets measured.
type Choice struct {
	Model    string `json:"model"`
	FreeGPUs int    `json:"free_gpus"`
	// RelativeLogSpeed and LogSD are the model's expected log speed for
	// this job apart from the job's own factor (0, 0 when unknown).
	RelativeLogSpeed float64 `json:"relative_log_speed"`
	LogSD            float64 `json:"log_sd"`
	Reason           string  `json:"reason"`
}

// LearnModel chooses where to run a job that has no measurement and no
// declaration, so that its first round measures it: among the models in
// freeGPUs (model -> free GPUs this round) with at least the job's gang
// free, the one whose expected speed for the job's family and gang size is
// highest; ties go to more free GPUs, then to the name. The rule costs no
// reserved GPU: the job runs a normal round, and loses only the gap to its
// true fastest model when the factors rank the models wrongly. Its
// estimates elsewhere then come from the factors, and each model it later
// runs on replaces its estimate there by a measurement.
func (e *Estimator) LearnModel(id JobID, freeGPUs map[string]int) (Choice, error) {
	j, ok := e.jobs[id]
	if !ok {
		return Choice{}, fmt.Errorf("choosing a model to learn job %q on: %w: add it first", id, ErrUnknownJob)
	}
	if len(freeGPUs) == 0 {
		return Choice{}, fmt.Errorf("choosing a model to learn job %q on: no GPU models given", id)
	}
	f := e.fitted()
	type cand struct {
		Choice
		fits, known bool
	}
	var cs []cand
	for _, m := range sortedKeys(freeGPUs) {
		c := cand{Choice: Choice{Model: m, FreeGPUs: freeGPUs[m]}, fits: freeGPUs[m] >= j.GPUs}
		c.RelativeLogSpeed, c.LogSD, c.known = f.relative(j.Job, m)
		cs = append(cs, c)
	}
	anyKnown := false
	for _, c := range cs {
		anyKnown = anyKnown || c.known
	}
	better := func(a, b cand) bool {
		if a.fits != b.fits {
			return a.fits
		}
		if anyKnown {
			if a.known != b.known {
				return a.known
			}
			if d := a.RelativeLogSpeed - b.RelativeLogSpeed; d > speedTie || d < -speedTie {
				return d > 0
			}
		}
		if a.FreeGPUs != b.FreeGPUs {
			return a.FreeGPUs > b.FreeGPUs
		}
		return a.Model < b.Model
	}
	sort.SliceStable(cs, func(a, b int) bool { return better(cs[a], cs[b]) })
	best := cs[0]
	switch {
	case !best.fits:
		best.Reason = ReasonWait
	case !anyKnown:
		best.Reason = ReasonMostFree
	default:
		best.Reason = ReasonFastest
	}
	return best.Choice, nil
}
