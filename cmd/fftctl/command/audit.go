package command

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/hashicorp/cli"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// AuditCommand shows a job's ledger over time from the audit log.
type AuditCommand struct {
	Meta
	asJSON bool
	since  int
}

var _ cli.Command = &AuditCommand{}

func (c *AuditCommand) Synopsis() string { return "Show a job's fairness ledger over time" }

func (c *AuditCommand) Help() string {
	return helpText("audit [options] JOB", `
Reads the audit log the fft-allocator keeps in Consul and shows, for every
round that mentions JOB, the action taken (start, migrate, park, keep), the
GPU model, rho before and after the round and the cost of the chosen
option (or why the job waited). JOB is a job ID, or namespace/job.
`, jobReadOptions, "Audit", c.ownFlags)
}

func (c *AuditCommand) ownFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.asJSON, "json", false, "Print the rows as JSON.")
	fs.IntVar(&c.since, "since", 0, "Show rounds from this `round` on.")
}

func (c *AuditCommand) Run(args []string) int {
	rest, ok := c.parse(c, "audit", jobReadOptions, c.ownFlags, args, "JOB")
	if !ok {
		return 1
	}
	id, store, err := c.conn.jobStore(rest[0])
	if err != nil {
		return c.fail("Error: %v", err)
	}
	recs, err := store.ReadRounds(context.Background(), c.since)
	if err != nil {
		return c.fail("Error reading the audit log from Consul at %s: %v%s", c.conn.consulAddress(), err, consulHint(err, c.conn.consulAddress()))
	}
	rows := auditRows(recs, id)
	if c.asJSON {
		return c.outputJSON(rows)
	}
	if len(rows) == 0 {
		return c.fail("No round from %d on in the audit log (%s in Consul at %s) mentions job %q.",
			c.since, c.conn.consulPrefix, c.conn.consulAddress(), id)
	}
	c.Ui.Output(formatAudit(id, rows))
	return 0
}

// auditRow is one round's entry for a job.
type auditRow struct {
	Round     int         `json:"round"`
	Start     string      `json:"start"`
	Action    loop.Action `json:"action,omitempty"`
	Model     string      `json:"model,omitempty"`
	RhoBefore float64     `json:"rho_before"`
	RhoAfter  float64     `json:"rho_after"`
	// Cost is the chosen option's cost, nil when the job did not run.
	Cost *float64 `json:"cost,omitempty"`
	// Reason is why the job did not run; for a job rejected for bad meta,
	// the contract error.
	Reason string `json:"reason,omitempty"`
}

// auditRows picks job id's entries out of the round records, in round
// order. It is pure.
func auditRows(recs []*loop.RoundRecord, id string) []auditRow {
	rows := []auditRow{}
	for _, rec := range recs {
		if msg := invalidError(rec, id); msg != "" {
			rows = append(rows, auditRow{Round: rec.Round, Start: rec.Start, Reason: "rejected: " + strings.ReplaceAll(msg, "\n", "; ")})
			continue
		}
		ja := jobLine(rec, id)
		if ja == nil {
			continue
		}
		row := auditRow{Round: rec.Round, Start: rec.Start, Action: ja.Action, Model: ja.Model,
			RhoBefore: ja.RhoBefore, RhoAfter: ja.RhoAfter, Reason: ja.Reason}
		if ja.Model != "" {
			cost := ja.Chosen.Cost
			row.Cost = &cost
		}
		rows = append(rows, row)
	}
	return rows
}

// formatAudit renders the rows as a table.
func formatAudit(id string, rows []auditRow) string {
	t := [][]string{{"Round", "Started", "Action", "Model", "Rho Before", "Rho After", "Cost", "Reason"}}
	for _, r := range rows {
		cost := "-"
		if r.Cost != nil {
			cost = fmt.Sprintf("%.4g", *r.Cost)
		}
		t = append(t, []string{fmt.Sprint(r.Round), startTime(r.Start), orDash(string(r.Action)), orDash(r.Model),
			fmt.Sprintf("%.4g", r.RhoBefore), fmt.Sprintf("%.4g", r.RhoAfter), cost, orDash(r.Reason)})
	}
	return "Job " + id + "\n" + strings.TrimRight(table(t, ""), "\n")
}
