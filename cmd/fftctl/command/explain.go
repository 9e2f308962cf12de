package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/cli"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/consulstore"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/placement"
	"github.com/nomad-fft/nomad-fft/allocator/profile"
)

// ExplainCommand reads back why the last round decided what it did for a job.
type ExplainCommand struct {
	Meta
	asJSON bool
}

var _ cli.Command = &ExplainCommand{}

const jobReadOptions = consulOptions | namespaceOption

func (c *ExplainCommand) Synopsis() string { return "Explain the last round's decision for a job" }

func (c *ExplainCommand) Help() string {
	return helpText("explain [options] JOB", `
Reads the latest round record in the audit log that mentions JOB and shows
the decision: the GPU model chosen and the action taken, or why the job was
not scheduled; its rho before and after the round; and the cost terms of
every model it may use (cost = wait + volume + switch - credit, lowest wins;
allocator/README.md, "The round problem"). Nothing is recomputed: this is
what the round recorded. JOB is a job ID, or namespace/job.
`, jobReadOptions, "Explain", c.ownFlags)
}

func (c *ExplainCommand) ownFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.asJSON, "json", false, "Print the explanation as JSON.")
}

func (c *ExplainCommand) Run(args []string) int {
	rest, ok := c.parse(c, "explain", jobReadOptions, c.ownFlags, args, "JOB")
	if !ok {
		return 1
	}
	id, store, err := c.conn.jobStore(rest[0])
	if err != nil {
		return c.fail("Error: %v", err)
	}
	rec, err := latestMention(context.Background(), store, id)
	if errors.Is(err, errNoMention) {
		return c.fail("No round in the audit log (%s in Consul at %s) mentions job %q: is it FFT-managed (fft. meta), and has a round run since it was submitted?",
			c.conn.consulPrefix, c.conn.consulAddress(), id)
	}
	if err != nil {
		return c.fail("Error reading the audit log from Consul at %s: %v%s", c.conn.consulAddress(), err, consulHint(err, c.conn.consulAddress()))
	}
	v := explainJob(rec, id)
	if c.asJSON {
		return c.outputJSON(v)
	}
	c.Ui.Output(formatExplain(v))
	return 0
}

var errNoMention = errors.New("no round mentions the job")

// latestMention returns the newest round record that mentions job id.
func latestMention(ctx context.Context, s *consulstore.Store, id string) (*loop.RoundRecord, error) {
	rounds, err := s.RoundNumbers(ctx)
	if err != nil {
		return nil, err
	}
	for k := len(rounds) - 1; k >= 0; k-- {
		rec, err := s.ReadRound(ctx, rounds[k])
		if err != nil {
			return nil, err
		}
		if mentions(rec, id) {
			return rec, nil
		}
	}
	return nil, errNoMention
}

func mentions(rec *loop.RoundRecord, id string) bool {
	return jobLine(rec, id) != nil || invalidError(rec, id) != ""
}

// jobLine returns the job's line of a round record, nil if it has none.
func jobLine(rec *loop.RoundRecord, id string) *loop.JobAudit {
	for k := range rec.Jobs {
		if rec.Jobs[k].ID == id {
			return &rec.Jobs[k]
		}
	}
	return nil
}

// invalidError returns the error a round recorded for the job's bad meta.
func invalidError(rec *loop.RoundRecord, id string) string {
	for _, inv := range rec.Invalid {
		if inv.ID == id {
			return inv.Err
		}
	}
	return ""
}

// explanation is what explain shows (and prints with -json).
type explanation struct {
	Job   string `json:"job"`
	Round int    `json:"round"`
	Start string `json:"start"`
	// Invalid is the contract error when the round rejected the job's meta;
	// the fields below are then empty.
	Invalid string      `json:"invalid,omitempty"`
	Action  loop.Action `json:"action,omitempty"`
	Model   string      `json:"model,omitempty"`
	Reason  string      `json:"reason,omitempty"`
	// ReasonCode is the stable code of Reason; Override the operator's
	// park or pin in force (fftctl park, pin).
	ReasonCode allocator.ReasonCode `json:"reason_code,omitempty"`
	Override   string               `json:"override,omitempty"`
	// Restart is how the job's restarts were priced when its task driver
	// measured them.
	Restart   *loop.RestartPrice `json:"restart,omitempty"`
	GPUs      int                `json:"gpus,omitempty"`
	RhoBefore float64            `json:"rho_before"`
	RhoAfter  float64            `json:"rho_after"`
	// Options are the cost terms on every model the job may use, cheapest
	// first.
	Options []allocator.Terms `json:"options"`
	// Throughput is each model's throughput as the round used it, with its
	// source (declared, measured, estimated, prior) and error (log sd).
	Throughput map[string]profile.Throughput `json:"throughput,omitempty"`
	// Learn is the model a job without data was run on to be measured.
	Learn      *profile.Choice    `json:"learn,omitempty"`
	Mismatches []profile.Mismatch `json:"mismatches,omitempty"`
	// Hosts are the nodes the round runs the job on (names where the
	// record has them), Move the placement stage's move of the job, if any.
	Hosts []string        `json:"hosts,omitempty"`
	Move  *placement.Move `json:"move,omitempty"`
	// Distrusted says why the job's claims no longer count (issue 20).
	Distrusted string `json:"distrusted,omitempty"`
}

// hostNames names each slot's node ("name (GPUs)"), by the name the round
// observed when it has one.
func hostNames(rec *loop.RoundRecord, slots []placement.Slot) []string {
	names := map[string]string{}
	for _, h := range rec.Hosts {
		if h.Name != "" {
			names[h.ID] = h.Name
		}
	}
	var out []string
	for _, s := range slots {
		n := names[s.Host]
		if n == "" {
			n = s.Host
		}
		out = append(out, fmt.Sprintf("%s (%d GPUs)", n, s.GPUs))
	}
	return out
}

// explainJob reads job id's decision out of a round record that mentions
// it. It is pure.
func explainJob(rec *loop.RoundRecord, id string) explanation {
	e := explanation{Job: id, Round: rec.Round, Start: rec.Start, Options: []allocator.Terms{}}
	if msg := invalidError(rec, id); msg != "" {
		e.Invalid = msg
		return e
	}
	if ja := jobLine(rec, id); ja != nil {
		e.Action, e.Model, e.Reason, e.GPUs = ja.Action, ja.Model, ja.Reason, ja.GPUs
		e.ReasonCode, e.Override, e.Restart = ja.ReasonCode, ja.Override, ja.Restart
		e.RhoBefore, e.RhoAfter = ja.RhoBefore, ja.RhoAfter
		e.Options = append(e.Options, ja.Options...)
		e.Throughput, e.Learn, e.Mismatches, e.Distrusted = ja.Throughput, ja.Learn, ja.Mismatches, ja.Distrusted
		e.Hosts, e.Move = hostNames(rec, ja.Hosts), moveOf(rec, id)
		sort.SliceStable(e.Options, func(a, b int) bool { return e.Options[a].Cost < e.Options[b].Cost })
	}
	return e
}

// formatExplain renders an explanation as Nomad-style text.
func formatExplain(e explanation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Job        = %s\n", e.Job)
	fmt.Fprintf(&b, "Round      = %d, started %s\n", e.Round, startTime(e.Start))
	if e.Invalid != "" {
		b.WriteString("Decision   = rejected: the job's fft. meta breaks the contract; it is left untouched\n\nErrors\n")
		for _, line := range strings.Split(e.Invalid, "\n") {
			b.WriteString("  " + line + "\n")
		}
		b.WriteString("\nFix each key named above in the job's meta and submit it again.")
		return b.String()
	}
	switch {
	case e.Learn != nil && e.Model != "":
		fmt.Fprintf(&b, "Decision   = runs on %s (%s) to be measured: %s has no fft.throughput and no measurement yet (%s)\n", e.Model, e.Action, e.Job, e.Learn.Reason)
	case e.Model != "":
		fmt.Fprintf(&b, "Decision   = runs on %s (%s)\n", e.Model, e.Action)
	default:
		fmt.Fprintf(&b, "Decision   = not scheduled (%s): %s\n", e.Action, orDash(e.Reason))
	}
	if e.Distrusted != "" {
		fmt.Fprintf(&b, "Distrusted = %s\n", e.Distrusted)
	}
	if r := e.Restart; r != nil {
		fmt.Fprintf(&b, "Restart    = %.4g s (%s), checkpoint %.4g GB (%s): the prices of a park, resume or move\n",
			r.Seconds, r.SecondsSource, r.CheckpointGB, r.CheckpointSource)
		if r.ClaimedSeconds > 0 || r.ClaimedCheckpointGB > 0 {
			fmt.Fprintf(&b, "Claimed    = restart %.4g s, checkpoint %.4g GB: above what is priced (a longer restart or a larger checkpoint would make the job harder to park or move)\n",
				r.ClaimedSeconds, r.ClaimedCheckpointGB)
		}
	}
	if e.Override != "" {
		fmt.Fprintf(&b, "Override   = %s (fftctl resume lifts it)\n", e.Override)
	}
	fmt.Fprintf(&b, "GPUs       = %s\n", countOrDash(e.GPUs))
	if len(e.Hosts) > 0 {
		fmt.Fprintf(&b, "Hosts      = %s\n", strings.Join(e.Hosts, ", "))
	}
	if m := e.Move; m != nil {
		fmt.Fprintf(&b, "Move       = put on other hosts of its model to make room for %s, priced %.3g GPU-rounds (its restart and checkpoint)\n", m.For, m.Price)
	}
	fmt.Fprintf(&b, "Rho        = %.4g before the round, %.4g after\n", e.RhoBefore, e.RhoAfter)
	for _, m := range e.Mismatches {
		fmt.Fprintf(&b, "Warning    = %s\n", m)
	}
	if len(e.Options) == 0 {
		if e.Learn == nil {
			b.WriteString("\nNo model was priced for this job: no model with capacity can run it.")
		} else {
			b.WriteString("\nNo model was priced for this job: it runs outside the policy until one round on a model measures it.")
		}
		return b.String()
	}
	b.WriteString("\nOptions (cost = wait + volume + switch - credit; cheapest first; source: where the throughput comes from, log sd its error)\n")
	rows := [][]string{{"Model", "Throughput", "Source", "Log SD", "Wait", "Volume", "Switch", "Credit", "Cost", "Chosen"}}
	for _, o := range e.Options {
		chosen := ""
		if o.Model == e.Model {
			chosen = "yes"
		}
		src, sd := sourceOf(e.Throughput, o.Model)
		rows = append(rows, []string{o.Model, fmt.Sprintf("%.4g", o.Throughput), src, sd, fmt.Sprintf("%.4g", o.Wait),
			fmt.Sprintf("%.4g", o.Volume), fmt.Sprintf("%.4g", o.Switch), fmt.Sprintf("%.4g", o.Credit),
			fmt.Sprintf("%.4g", o.Cost), chosen})
	}
	b.WriteString(table(rows, ""))
	return strings.TrimRight(b.String(), "\n")
}

// sourceOf renders a throughput's source and error for a table; a record
// written before throughputs were recorded has neither ("-").
func sourceOf(tp map[string]profile.Throughput, model string) (source, logSD string) {
	th, ok := tp[model]
	if !ok {
		return "-", "-"
	}
	return th.Source.String(), fmt.Sprintf("%.2f", th.LogSD)
}
