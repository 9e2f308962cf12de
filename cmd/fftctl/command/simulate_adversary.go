package command

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/nomad-fft/nomad-fft/allocator/sim"
	"github.com/nomad-fft/nomad-fft/allocator/sim/metrics"
	"github.com/nomad-fft/nomad-fft/allocator/workload"
)

func adversaryKindNames() []string {
	var out []string
	for _, k := range sim.AdversaryKinds {
		out = append(out, string(k))
	}
	return out
}

// adversaryRow is one policy, rate and kind of lie, averaged over the seeds.
type adversaryRow struct {
	Policy string            `json:"policy"`
	Rate   float64           `json:"rate"`
	Kind   sim.AdversaryKind `json:"kind"`
	Seeds  int               `json:"seeds"`
	Liars  int               `json:"liars"`
	// Means over the seeds of each seed's ratios (metrics.AdversaryRow),
	// and of the honest jobs' mean JCT with liars over without.
	JCTRatio       float64 `json:"liar_jct_ratio"`
	GPURatio       float64 `json:"liar_gpu_ratio"`
	Gained         float64 `json:"liars_gained"`
	HonestJCTRatio float64 `json:"honest_jct_ratio"`
}

// runAdversaries runs every policy, rate and seed honest and with the
// liars, and prints the comparison; it writes it as adversaries.json in
// -out.
func runAdversaries(ctx context.Context, o *simulateOptions, trace *workload.Trace, stdout, stderr io.Writer) error {
	prog := &simProgress{w: stderr, quiet: o.quiet}
	type key struct {
		policy string
		rate   float64
		kind   sim.AdversaryKind
	}
	acc := map[key]*adversaryRow{}
	var order []key
	rates := o.rates
	if trace != nil {
		rates = []float64{0}
	}
	for _, p := range o.policies {
		for _, r := range rates {
			for _, s := range o.seeds {
				k := runKey{p, r, s}
				honest := runOneWith(ctx, o, k, trace, prog, nil)
				if honest.err != nil {
					return fmt.Errorf("%s rate %g seed %d, honest: %w", p, r, s, honest.err)
				}
				lying := runOneWith(ctx, o, k, trace, prog, o.adversaries)
				if lying.err != nil {
					return fmt.Errorf("%s rate %g seed %d, with liars: %w", p, r, s, lying.err)
				}
				if honest.log.Stopped != "" || lying.log.Stopped != "" {
					return fmt.Errorf("%s rate %g seed %d: a run stopped early (%q, %q): its comparison would be partial", p, r, s, honest.log.Stopped, lying.log.Stopped)
				}
				rep := metrics.Adversarial(honest.log, lying.log)
				for _, row := range rep.Rows {
					kk := key{p, r, row.Kind}
					a := acc[kk]
					if a == nil {
						a = &adversaryRow{Policy: p, Rate: r, Kind: row.Kind}
						acc[kk] = a
						order = append(order, kk)
					}
					a.Seeds++
					a.Liars += row.Liars
					a.JCTRatio += row.JCTRatio
					a.GPURatio += row.GPURatio
					a.Gained += row.Gained
					a.HonestJCTRatio += rep.HonestJCTRatio
				}
			}
		}
	}
	// order is policy, then rate, then kind (metrics sorts the rows).
	rows := make([]adversaryRow, 0, len(order))
	for _, k := range order {
		a := acc[k]
		n := float64(a.Seeds)
		a.JCTRatio, a.GPURatio, a.Gained, a.HonestJCTRatio = a.JCTRatio/n, a.GPURatio/n, a.Gained/n, a.HonestJCTRatio/n
		rows = append(rows, *a)
	}
	b, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the comparison: %w", err)
	}
	path := filepath.Join(o.out, "adversaries.json")
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if o.asJSON {
		_, err := stdout.Write(append(b, '\n'))
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\trate\tlie\tseeds\tliars\tliar JCT x\tliar GPU time x\tliars gained\thonest JCT x\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%g\t%s\t%d\t%d\t%.3f\t%.3f\t%.0f%%\t%.4f\t\n", r.Policy, r.Rate, r.Kind, r.Seeds, r.Liars, r.JCTRatio, r.GPURatio, 100*r.Gained, r.HonestJCTRatio)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nliar JCT x: a liar's JCT over the same job's when honest (split: its last part's finish), mean over liars, then seeds;\n"+
		"liars gained: the share of liars whose JCT fell by more than 2%%; honest JCT x: the honest jobs' mean JCT with liars over without.\nWritten to %s\n", path)
	return nil
}
