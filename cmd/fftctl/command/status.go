package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/cli"

	"github.com/nomad-fft/nomad-fft/allocator/consulstore"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/profile"
)

// StatusCommand shows the queue and the GPU models from the ledger.
type StatusCommand struct {
	Meta
	asJSON bool
}

var _ cli.Command = &StatusCommand{}

func (c *StatusCommand) Synopsis() string { return "Show the FFT queue and GPU models" }

func (c *StatusCommand) Help() string {
	return helpText("status [options]", `
Shows what the fft-allocator recorded in Consul: the GPU models with their
capacity and usage in the last round, every job with its state (running,
waiting, no-fit, finished, failed), GPU model, rho and progress, and the
jobs rejected for bad fft. meta with the error.
`, consulOptions, "Status", c.ownFlags)
}

func (c *StatusCommand) ownFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.asJSON, "json", false, "Print the status as JSON.")
}

func (c *StatusCommand) Run(args []string) int {
	if _, ok := c.parse(c, "status", consulOptions, c.ownFlags, args); !ok {
		return 1
	}
	store, err := c.conn.store()
	if err != nil {
		return c.fail("Error: %v", err)
	}
	v, err := readStatus(context.Background(), store)
	if err != nil {
		return c.fail("Error reading the ledger from Consul at %s: %v%s", c.conn.consulAddress(), err, consulHint(err, c.conn.consulAddress()))
	}
	if c.asJSON {
		return c.outputJSON(v)
	}
	if v.LastRound == nil && len(v.Jobs) == 0 {
		c.Ui.Output(fmt.Sprintf("No round recorded under %s in Consul at %s yet: is fft-allocator running, with this -consul-prefix?",
			c.conn.consulPrefix, c.conn.consulAddress()))
		return 0
	}
	c.Ui.Output(formatStatus(v))
	return 0
}

// statusView is what status shows (and prints with -json).
type statusView struct {
	NextRound int          `json:"next_round"`
	LastRound *roundHeader `json:"last_round,omitempty"`
	// Leader is the fft-allocator replica that holds the lock, "" if none.
	Leader string       `json:"leader"`
	Models []modelUsage `json:"models"`
	// Hosts are the GPU nodes the last round observed, with what it placed
	// on each.
	Hosts   []hostUsage    `json:"hosts,omitempty"`
	Jobs    []jobStatus    `json:"jobs"`
	Invalid []loop.Invalid `json:"invalid"`
	// Tenants are the last round's tenant shares (with a tenants block).
	Tenants []tenantStatus `json:"tenants,omitempty"`
}

// tenantStatus is one tenant's share and use in the last round.
type tenantStatus struct {
	loop.TenantAudit
	// Used is the GPUs the tenant's jobs hold after the round; Rho the sum
	// of its active jobs' rho.
	Used int     `json:"used"`
	Rho  float64 `json:"rho"`
}

type roundHeader struct {
	Round int    `json:"round"`
	Start string `json:"start"`
}

type modelUsage struct {
	Name string `json:"name"`
	GPUs int    `json:"gpus"`
	Used int    `json:"used"`
}

// hostUsage is one GPU node of one model after the last round.
type hostUsage struct {
	Node  string   `json:"node"`
	ID    string   `json:"id"`
	Model string   `json:"model"`
	GPUs  int      `json:"gpus"`
	Used  int      `json:"used"`
	Jobs  []string `json:"jobs,omitempty"`
}

// hostsAfter is each observed host with the GPUs and jobs the round placed
// on it.
func hostsAfter(last *loop.RoundRecord) []hostUsage {
	out := make([]hostUsage, 0, len(last.Hosts))
	index := map[string]int{}
	for _, h := range last.Hosts {
		index[h.Model+"\x00"+h.ID] = len(out)
		out = append(out, hostUsage{Node: orDash(h.Name), ID: h.ID, Model: h.Model, GPUs: h.GPUs})
	}
	for _, ja := range last.Jobs {
		for _, s := range ja.Hosts {
			if k, ok := index[ja.Model+"\x00"+s.Host]; ok {
				out[k].Used += s.GPUs
				if !slices.Contains(out[k].Jobs, ja.ID) {
					out[k].Jobs = append(out[k].Jobs, ja.ID)
				}
			}
		}
	}
	return out
}

type jobStatus struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	// Model is the model the last round runs the job on (for a finished
	// job, the last it ran on); GPUs its gang size, 0 when unknown.
	Model string  `json:"model,omitempty"`
	GPUs  int     `json:"gpus,omitempty"`
	Rho   float64 `json:"rho"`
	Done  float64 `json:"done"`
	Work  float64 `json:"work"`
	// Reason is why the last round did not run the job.
	Reason    string `json:"reason,omitempty"`
	Arrival   int    `json:"arrival"`
	RoundsRun int    `json:"rounds_run"`
	Switches  int    `json:"switches"`
	// Throughput is each model's throughput the last round used, with its
	// source and error (the ledger's).
	Throughput map[string]profile.Throughput `json:"throughput,omitempty"`
}

// readStatus reads the ledger, the last round record and the leader.
func readStatus(ctx context.Context, s *consulstore.Store) (statusView, error) {
	l, err := s.Load(ctx)
	if err != nil {
		return statusView{}, err
	}
	var last *loop.RoundRecord
	// The newest complete record: the round just claimed may still be an
	// intent (being applied), or one a dead leader left.
	for n := l.Round - 1; n >= 0 && n >= l.Round-3; n-- {
		last, err = s.ReadRound(ctx, n)
		if err != nil && !errors.Is(err, consulstore.ErrNoRound) {
			return statusView{}, err
		}
		if last != nil && last.State == "" {
			break
		}
	}
	leader, err := s.Leader(ctx)
	if err != nil {
		return statusView{}, err
	}
	return buildStatus(l, last, leader), nil
}

// statusOrder sorts jobs by state: what runs, what waits, what cannot run,
// then what is over.
var statusOrder = map[string]int{
	loop.StatusRunning: 0, loop.StatusWaiting: 1, loop.StatusParked: 2, loop.StatusNoFit: 3, loop.StatusFinished: 4, loop.StatusFailed: 5,
}

// buildStatus joins the ledger with the last round record (nil before any
// round). It is pure.
func buildStatus(l *loop.Ledger, last *loop.RoundRecord, leader string) statusView {
	v := statusView{NextRound: l.Round, Leader: leader, Models: []modelUsage{}, Jobs: []jobStatus{}, Invalid: []loop.Invalid{}}
	lines := map[string]loop.JobAudit{}
	if last != nil {
		v.LastRound = &roundHeader{Round: last.Round, Start: last.Start}
		for _, m := range last.Models {
			v.Models = append(v.Models, modelUsage{Name: m.Name, GPUs: m.GPUs, Used: last.Usage[m.Name]})
		}
		for _, ja := range last.Jobs {
			lines[ja.ID] = ja
		}
		v.Invalid = append(v.Invalid, last.Invalid...)
		v.Tenants = tenantUse(last, l)
		v.Hosts = hostsAfter(last)
	}
	for id, r := range l.Jobs {
		js := jobStatus{ID: id, Status: r.Status, Rho: r.Rho, Done: r.Done, Work: r.Work,
			Arrival: r.Arrival, RoundsRun: r.RoundsRun, Switches: r.Switches, Throughput: r.Throughput}
		if ja, ok := lines[id]; ok {
			js.Model, js.GPUs, js.Reason = ja.Model, ja.GPUs, ja.Reason
		}
		if r.Status == loop.StatusFinished || r.Status == loop.StatusFailed {
			js.Model = r.LastModel
		}
		v.Jobs = append(v.Jobs, js)
	}
	sort.Slice(v.Jobs, func(a, b int) bool {
		ja, jb := v.Jobs[a], v.Jobs[b]
		if statusOrder[ja.Status] != statusOrder[jb.Status] {
			return statusOrder[ja.Status] < statusOrder[jb.Status]
		}
		return ja.ID < jb.ID
	})
	return v
}

// formatStatus renders the status as Nomad-style text.
func formatStatus(v statusView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Next round  = %d\n", v.NextRound)
	if v.LastRound != nil {
		fmt.Fprintf(&b, "Last round  = %d, started %s\n", v.LastRound.Round, startTime(v.LastRound.Start))
	}
	leader := v.Leader
	if leader == "" {
		leader = "none (no fft-allocator holds the lock)"
	}
	fmt.Fprintf(&b, "Leader      = %s\n", leader)

	b.WriteString("\nGPU Models\n")
	rows := [][]string{{"Model", "GPUs", "Used"}}
	for _, m := range v.Models {
		rows = append(rows, []string{m.Name, fmt.Sprint(m.GPUs), fmt.Sprint(m.Used)})
	}
	b.WriteString(table(rows, "no healthy GPUs in the last round"))

	if len(v.Hosts) > 0 {
		b.WriteString("\nHosts\n")
		rows = [][]string{{"Node", "Model", "GPUs", "Used", "Jobs"}}
		for _, h := range v.Hosts {
			rows = append(rows, []string{h.Node, h.Model, fmt.Sprint(h.GPUs), fmt.Sprint(h.Used), orDash(strings.Join(h.Jobs, ", "))})
		}
		b.WriteString(table(rows, ""))
	}

	b.WriteString("\nJobs\n")
	rows = [][]string{{"ID", "Status", "Model", "GPUs", "Rho", "Progress", "Throughput", "Reason"}}
	estimated := false
	for _, j := range v.Jobs {
		tp, est := throughputCell(j)
		estimated = estimated || est
		rows = append(rows, []string{j.ID, j.Status, orDash(j.Model), countOrDash(j.GPUs),
			fmt.Sprintf("%.3f", j.Rho), progress(j.Done, j.Work), tp, orDash(j.Reason)})
	}
	b.WriteString(table(rows, "no FFT-managed jobs"))
	if estimated {
		b.WriteString("(* estimated: the job has not been measured on that model yet; fftctl explain JOB shows every model's source and error)\n")
	}

	if len(v.Tenants) > 0 {
		b.WriteString("\nTenants (the operator's shares of the fairness reference)\n")
		rows = [][]string{{"Tenant", "Share", "Fraction", "Jobs", "GPUs", "Rho"}}
		for _, t := range v.Tenants {
			rows = append(rows, []string{t.Tenant, fmt.Sprintf("%g", t.Share), fmt.Sprintf("%.3f", t.Fraction), fmt.Sprint(t.Jobs),
				fmt.Sprint(t.Used), fmt.Sprintf("%.3f", t.Rho)})
		}
		b.WriteString(table(rows, ""))
	}

	if len(v.Invalid) > 0 {
		b.WriteString("\nInvalid Jobs (bad fft. meta; left untouched)\n")
		rows = [][]string{{"ID", "Error"}}
		for _, inv := range v.Invalid {
			rows = append(rows, []string{inv.ID, strings.ReplaceAll(inv.Err, "\n", "; ")})
		}
		b.WriteString(table(rows, ""))
	}
	return strings.TrimRight(b.String(), "\n")
}

// tenantUse adds each tenant's GPUs and rho to the round's tenant lines.
func tenantUse(last *loop.RoundRecord, l *loop.Ledger) []tenantStatus {
	out := make([]tenantStatus, 0, len(last.Tenants))
	idx := map[string]int{}
	for _, t := range last.Tenants {
		idx[t.Tenant] = len(out)
		out = append(out, tenantStatus{TenantAudit: t})
	}
	for _, ja := range last.Jobs {
		k, ok := idx[ja.Tenant]
		if !ok {
			continue
		}
		if ja.Model != "" {
			out[k].Used += ja.GPUs
		}
		out[k].Rho += l.Jobs[ja.ID].Rho
	}
	return out
}

// throughputCell is the job's throughput on its model as the last round
// used it, marked "*" when it is an estimate rather than declared or
// measured; "-" when the job has no model or no recorded value.
func throughputCell(j jobStatus) (cell string, estimated bool) {
	th, ok := j.Throughput[j.Model]
	if !ok || j.Model == "" {
		return "-", false
	}
	switch th.Source {
	case profile.SourceEstimated, profile.SourcePrior:
		return fmt.Sprintf("%.4g*", th.UnitsPerRound), true
	default:
		return fmt.Sprintf("%.4g (%s)", th.UnitsPerRound, th.Source), false
	}
}

// table renders rows (the first is the header) with aligned columns, or
// the header and "(empty)" when there are no data rows.
func table(rows [][]string, empty string) string {
	if len(rows) == 1 && empty != "" {
		return "(" + empty + ")\n"
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func countOrDash(n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

// startTime shortens a round's RFC 3339 start to the second, in UTC; a
// value that does not parse is shown as it is.
func startTime(start string) string {
	t, err := time.Parse(time.RFC3339Nano, start)
	if err != nil {
		return start
	}
	return t.UTC().Format(time.RFC3339)
}

// progress renders work done out of the total, with the percentage.
func progress(done, work float64) string {
	if work <= 0 {
		return fmt.Sprintf("%.4g", done)
	}
	return fmt.Sprintf("%.4g/%.4g (%.0f%%)", done, work, 100*done/work)
}
