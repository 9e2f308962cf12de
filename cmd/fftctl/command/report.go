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

	"github.com/nomad-fft/nomad-fft/allocator/jobid"
)

// ReportCommand records a job's progress, from inside its task.
type ReportCommand struct {
	Meta
	job   string
	quiet bool
	// allocator is how to reach the fft-allocator's HTTP API (-allocator-addr or
	// FFT_ALLOCATOR_ADDR, and its TLS settings); no address writes Consul KV instead.
	allocator allocatorConn
	// getenv reads the task's environment; os.Getenv when nil.
	getenv func(string) string
}

var _ cli.Command = &ReportCommand{}

func (c *ReportCommand) Synopsis() string { return "Report a job's progress (from inside its task)" }

func (c *ReportCommand) Help() string {
	return helpText("report [options] WORK_DONE", `
Records that the job has done WORK_DONE work units in total (in the unit of
its fft.work), for the fft-allocator. The next round uses it in place of its
estimate. Run it from the job's task: the job is the one Nomad names in
NOMAD_NAMESPACE and NOMAD_JOB_ID, unless -job names another.

With -allocator-addr (or FFT_ALLOCATOR_ADDR) the report goes to the
allocator's PUT /v1/progress/<namespace>/<job> with the task's workload
identity, NOMAD_TOKEN (give the task an identity { env = true } block), as
X-Nomad-Token: an allocator with -progress-auth=nomad takes it only from the
job's own tasks. An allocator that serves HTTPS (its -tls-cert-file) is
verified with -allocator-ca-cert (FFT_ALLOCATOR_CACERT); one that requires
client certificates also gets -allocator-client-cert and
-allocator-client-key. Without an allocator address the report is written
to the Consul key <prefix>/progress/<namespace>/<job>, which needs a Consul
token that may write it (see the fft-allocator's README: with Consul ACLs
only the allocator's may). Nomad passes the client's environment
(CONSUL_HTTP_ADDR, ...) to raw_exec and exec tasks; else give -consul-addr.
`, consulOptions, "Report", c.ownFlags)
}

func (c *ReportCommand) ownFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.job, "job", "", "The job, as `namespace/job`, instead of NOMAD_NAMESPACE/NOMAD_JOB_ID.")
	fs.BoolVar(&c.quiet, "quiet", false, "Print nothing on success.")
	c.allocator.flags(fs)
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
	if a := c.allocator.resolve(getenv); a.addr != "" {
		// A report of the task's own job names its allocation, which ties it to the job's
		// registration even where the allocator verifies no token.
		alloc := ""
		if c.job == "" {
			alloc = getenv("NOMAD_ALLOC_ID")
		}
		if err := reportHTTP(context.Background(), a, id, alloc, getenv("NOMAD_TOKEN"), done); err != nil {
			return c.fail("Error reporting progress to the fft-allocator at %s: %v%s", a.addr, err, allocatorHint(err, a.addr))
		}
	} else {
		store, err := c.conn.store()
		if err != nil {
			return c.fail("Error: %v", err)
		}
		if err := store.ReportProgress(context.Background(), id, done); err != nil {
			return c.fail("Error reporting progress to Consul at %s: %v%s", c.conn.consulAddress(), err, consulHint(err, c.conn.consulAddress()))
		}
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
		// The job ID may have slashes (a dispatched job's "parent/dispatch-…"); the
		// namespace has none.
		if _, _, err := jobid.Split(flagJob); err != nil {
			return "", fmt.Errorf("-job = %q: expected namespace/job, such as default/fft-train: %w", flagJob, err)
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
