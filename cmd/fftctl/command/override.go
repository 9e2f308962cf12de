package command

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/cli"

	"github.com/nomad-fft/nomad-fft/allocator/consulstore"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// The operator's overrides: park, pin and resume a job by hand. Each writes
// the job's key under <prefix>/overrides/ in Consul, which every round
// reads; Consul's ACLs decide who may (only an operator's token can write
// there with the shipped policies).

// ParkCommand keeps a job off the GPUs until it is resumed.
type ParkCommand struct{ overrideFlags }

// PinCommand lets a job run on one GPU model only, until it is resumed.
type PinCommand struct{ overrideFlags }

// ResumeCommand lifts a job's park or pin.
type ResumeCommand struct{ overrideFlags }

var (
	_ cli.Command = &ParkCommand{}
	_ cli.Command = &PinCommand{}
	_ cli.Command = &ResumeCommand{}
)

// overrideFlags are what the three commands share.
type overrideFlags struct {
	Meta
	by, note string
}

func (c *overrideFlags) ownFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.by, "by", "", "Who decides, for the audit log, on a Consul without ACLs (default $USER). With Consul ACLs it is the token's identity (its description and accessor ID) and -by is not taken.")
	fs.StringVar(&c.note, "note", "", "Why, for the audit log.")
}

const overrideHelp = `
Every round of the fft-allocator reads the operators' overrides from Consul
(<prefix>/overrides/<namespace>/<job>) and respects them until they are
lifted with fftctl resume; fftctl status, explain and the audit log show
them. Writing there takes a Consul token allowed to (the operator's; the
allocator's own token only reads it).
`

func (c *ParkCommand) Synopsis() string { return "Keep a job off the GPUs until resumed" }
func (c *ParkCommand) Help() string {
	return helpText("park [options] JOB", `
Parks the job: the next round stops it if it runs (with its kill_timeout to
checkpoint), and no round starts it until fftctl resume. While parked it is
out of the fairness set, its rho kept as it was.
`+overrideHelp, consulOptions|namespaceOption, "Park", c.ownFlags)
}
func (c *ParkCommand) Run(args []string) int {
	rest, ok := c.parse(c, "park", consulOptions|namespaceOption, c.ownFlags, args, "JOB")
	if !ok {
		return 1
	}
	return c.set(rest[0], loop.Override{Action: loop.OverridePark})
}

func (c *PinCommand) Synopsis() string { return "Let a job run on one GPU model only" }
func (c *PinCommand) Help() string {
	return helpText("pin [options] JOB MODEL", `
Pins the job to the GPU model MODEL (its name as fftctl status shows it):
rounds still decide whether it runs, but only ever there. A job that
declares no throughput on MODEL is held, saying why.
`+overrideHelp, consulOptions|namespaceOption, "Pin", c.ownFlags)
}
func (c *PinCommand) Run(args []string) int {
	rest, ok := c.parse(c, "pin", consulOptions|namespaceOption, c.ownFlags, args, "JOB", "MODEL")
	if !ok {
		return 1
	}
	if strings.TrimSpace(rest[1]) == "" {
		return c.fail("Error: MODEL is empty: name a GPU model, such as %q", "NVIDIA A100-SXM4-40GB")
	}
	return c.set(rest[0], loop.Override{Action: loop.OverridePin, Model: rest[1]})
}

func (c *ResumeCommand) Synopsis() string { return "Lift a job's park or pin" }
func (c *ResumeCommand) Help() string {
	return helpText("resume [options] JOB", `
Lifts the operator's park or pin of the job: from the next round on, the
allocator schedules it as any other.
`+overrideHelp, consulOptions|namespaceOption, "Resume", c.ownFlags)
}
func (c *ResumeCommand) Run(args []string) int {
	rest, ok := c.parse(c, "resume", consulOptions|namespaceOption, c.ownFlags, args, "JOB")
	if !ok {
		return 1
	}
	id, store, err := c.conn.jobStore(rest[0])
	if err != nil {
		return c.fail("Error: %v", err)
	}
	ctx := context.Background()
	all, err := store.Overrides(ctx)
	if err != nil {
		return c.fail("Error reading the overrides from Consul at %s: %v%s", c.conn.consulAddress(), err, consulHint(err, c.conn.consulAddress()))
	}
	o, ok := all[id]
	if !ok {
		return c.fail("Error: %s has no override to lift (fftctl status shows the jobs an operator parked or pinned)", id)
	}
	if err := store.LiftOverride(ctx, id); err != nil {
		return c.fail("Error lifting the override of %s: %v%s%s", id, err, aclHint(err, store.OverrideKey(id)), consulHint(err, c.conn.consulAddress()))
	}
	c.Ui.Output(fmt.Sprintf("Lifted %s (%s); the next round schedules it as any other job", id, o))
	return 0
}

// set writes an override for JOB.
func (c *overrideFlags) set(arg string, o loop.Override) int {
	id, store, err := c.conn.jobStore(arg)
	if err != nil {
		return c.fail("Error: %v", err)
	}
	ident, acls, err := store.TokenIdentity(context.Background())
	if err != nil {
		return c.fail("Error: %v%s%s", err, aclHint(err, store.OverrideKey(id)), consulHint(err, c.conn.consulAddress()))
	}
	o.By = ident
	if !acls {
		// Without ACLs anyone may write the key: the name is only a label.
		if o.By = c.by; o.By == "" {
			o.By = os.Getenv("USER")
		}
	} else if c.by != "" && c.by != ident {
		c.Ui.Warn(fmt.Sprintf("-by %q is not taken: with Consul ACLs the audit log names the token, %s", c.by, ident))
	}
	o.Note, o.At = c.note, time.Now().UTC()
	if err := store.SetOverride(context.Background(), id, o); err != nil {
		return c.fail("Error writing the override of %s: %v%s%s", id, err, aclHint(err, store.OverrideKey(id)), consulHint(err, c.conn.consulAddress()))
	}
	c.Ui.Output(fmt.Sprintf("%s: %s, from the next round until fftctl resume", id, o))
	return 0
}

// aclHint explains a refusal by Consul's ACLs (consulstore.Denied).
func aclHint(err error, key string) string {
	if consulstore.Denied(err) {
		return fmt.Sprintf("\n\nConsul refused the write: the token (-consul-token or CONSUL_HTTP_TOKEN) needs key_prefix write on %q; overrides are for operators", key)
	}
	return ""
}
