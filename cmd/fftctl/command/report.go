package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/hashicorp/cli"
)

// ReportCommand records a job's progress, from inside its task.
type ReportCommand struct {
	Meta
	job   string
	quiet bool
	// getenv reads the task's environment; os.Getenv when nil.
	getenv func(string) string
}

var _ cli.Command = &ReportCommand{}

func (c *ReportCommand) Synopsis() string { return "Report a job's progress (from inside its task)" }

func (c *ReportCommand) Help() string {
	return helpText("report [options] WORK_DONE", `
Records that the job has done WORK_DONE work units in total (in the unit of
its fft.work), where the fft-allocator reads progress: the key
<prefix>/progress/<namespace>/<job> in Consul. The next round uses it in
place of its estimate. Run it from the job's task: the job is the one Nomad
names in NOMAD_NAMESPACE and NOMAD_JOB_ID, unless -job names another.
Nomad passes the client's environment (CONSUL_HTTP_ADDR, ...) to raw_exec
and exec tasks; else give -consul-addr.
`, consulOptions, "Report", c.ownFlags)
}

func (c *ReportCommand) ownFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.job, "job", "", "The job, as `namespace/job`, instead of NOMAD_NAMESPACE/NOMAD_JOB_ID.")
	fs.BoolVar(&c.quiet, "quiet", false, "Print nothing on success.")
}

func (c *ReportCommand) Run(args []string) int {
	rest, ok := c.parse(c, "report", consulOptions, c.ownFlags, args, "WORK_DONE")
	if !ok {
		return 1
	}
	done, err := parseWorkDone(rest[0])
	if err != nil {
		return c.fail("Error: %v", err)
	}
	getenv := c.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	id, err := reportJob(c.job, getenv)
	if err != nil {
		return c.fail("Error: %v", err)
	}
	store, err := c.conn.store()
	if err != nil {
		return c.fail("Error: %v", err)
	}
	if err := store.ReportProgress(context.Background(), id, done); err != nil {
		return c.fail("Error reporting progress to Consul at %s: %v", c.conn.consulAddress(), err)
	}
	if !c.quiet {
		c.Ui.Output(fmt.Sprintf("Reported %s work units done for %s", strconv.FormatFloat(done, 'g', -1, 64), id))
	}
	return 0
}

// parseWorkDone reads WORK_DONE: a finite number >= 0.
func parseWorkDone(arg string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(arg), 64)
	if err != nil || !(v >= 0) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("WORK_DONE = %q: expected the work units done so far, a number >= 0", arg)
	}
	return v, nil
}

// reportJob returns the job to report for: -job, else the task's
// NOMAD_NAMESPACE/NOMAD_JOB_ID.
func reportJob(flagJob string, getenv func(string) string) (string, error) {
	if flagJob != "" {
		ns, job, ok := strings.Cut(flagJob, "/")
		if !ok || ns == "" || job == "" || strings.Contains(job, "/") {
			return "", fmt.Errorf("-job = %q: expected namespace/job, such as default/fft-train", flagJob)
		}
		return flagJob, nil
	}
	ns, job := getenv("NOMAD_NAMESPACE"), getenv("NOMAD_JOB_ID")
	var missing []string
	if ns == "" {
		missing = append(missing, "NOMAD_NAMESPACE")
	}
	if job == "" {
		missing = append(missing, "NOMAD_JOB_ID")
	}
	if len(missing) > 0 {
		return "", errors.New(strings.Join(missing, " and ") +
			" not set: run fftctl report inside the job's Nomad task (Nomad sets both), or name the job with -job namespace/job")
	}
	return ns + "/" + job, nil
}
