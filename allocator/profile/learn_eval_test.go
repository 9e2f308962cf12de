package profile

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// learnCost runs LearnModel for every single-GPU job type of rows, with
// only the other types known (as priors derived from them, or as measured
// jobs), all models free, and returns how often the choice was the type's
// true fastest model and the mean fraction of speed lost against it.
func learnCost(t *testing.T, rows []tableRow, asPriors, withFamily bool) (hit, meanLoss float64) {
	rows = singleGPU(rows)
	for i, held := range rows {
		var others []tableRow
		for k, r := range rows {
			if k != i {
				others = append(others, r)
			}
		}
		var e *Estimator
		free := map[string]int{}
		for m := range held.rates {
			free[m] = 8
		}
		if asPriors {
			e = newEst(t, renamed(derivePriors(others)))
		} else {
			e = newEst(t, nil)
			for k, r := range others {
				id := JobID(fmt.Sprint(k))
				must(t, e.AddJob(Job{ID: id, Family: r.family, GPUs: 1}))
				for m, v := range r.rates {
					must(t, e.Measure(id, m, v))
				}
			}
		}
		must(t, e.AddModels(sortedKeys(free)...))
		job := Job{ID: "held", GPUs: 1}
		if withFamily {
			job.Family = held.family
		}
		must(t, e.AddJob(job))
		c, err := e.LearnModel("held", free)
		if err != nil {
			t.Fatal(err)
		}
		best := 0.0
		for _, v := range held.rates {
			best = math.Max(best, v)
		}
		if held.rates[c.Model] == best {
			hit++
		}
		meanLoss += 1 - held.rates[c.Model]/best
	}
	return hit / float64(len(rows)), meanLoss / float64(len(rows))
}

// renamed maps derivePriors' V100/P100/K80 rows onto the table's v100,
// p100, k80 model names.
func renamed(p *Priors) *Priors {
	out := &Priors{rows: map[priorKey]Prior{}}
	for k, r := range p.rows {
		r.Model = strings.ToLower(r.Model)
		out.rows[priorKey{r.Model, k.family}] = r
	}
	return out
}

// TestLearnModelCost measures the learn rule's cost on Gavel's and
// Shockwave's single-GPU tables: each job type in turn is new, the others
// are known; the rule must lose less speed than picking a model at random
// (the mean loss over the models), and the table is in README.md.
func TestLearnModelCost(t *testing.T) {
	var out strings.Builder
	out.WriteString("\n| table | others known as | job family | fastest model chosen | mean speed lost vs fastest | random model's mean loss |\n|---|---|---|---|---|---|\n")
	for _, tbl := range []struct{ name, path string }{
		{"gavel", "testdata/gavel_isolated_throughputs.csv"},
		{"shockwave", "testdata/shockwave_isolated_throughputs.csv"},
	} {
		rows := loadTable(t, tbl.path)
		random := 0.0
		for _, r := range singleGPU(rows) {
			best := 0.0
			for _, v := range r.rates {
				best = math.Max(best, v)
			}
			for _, v := range r.rates {
				random += (1 - v/best) / float64(len(r.rates))
			}
		}
		random /= float64(len(singleGPU(rows)))
		for _, asPriors := range []bool{true, false} {
			for _, fam := range []bool{true, false} {
				hit, loss := learnCost(t, rows, asPriors, fam)
				known := map[bool]string{true: "prior table", false: "measured jobs"}[asPriors]
				fmt.Fprintf(&out, "| %s | %s | %v | %.0f%% | %.1f%% | %.1f%% |\n", tbl.name, known, map[bool]string{true: "given", false: "none"}[fam], 100*hit, 100*loss, 100*random)
				if loss >= random {
					t.Errorf("%s, %s, family %v: mean loss %.3f, not below a random model's %.3f", tbl.name, known, fam, loss, random)
				}
			}
		}
	}
	t.Log(out.String())
}
