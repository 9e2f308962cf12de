package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/cli"
	consul "github.com/hashicorp/consul/api"
	nomad "github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/consulstore"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/placement"
	"github.com/nomad-fft/nomad-fft/allocator/solver"
	"github.com/nomad-fft/nomad-fft/cmd/fftctl/devcluster"
	"github.com/nomad-fft/nomad-fft/jobspecs"
)

// DevCommand runs a local FFT cluster and shows its rounds.
type DevCommand struct {
	Meta
	round      time.Duration
	dir        string
	rounds     int
	noWorkload bool
	workload   string
	// python is the interpreter that imports torch, for -workload torch.
	python string
}

// The sample workloads -workload names.
const (
	workloadSample = "sample"
	workloadTorch  = "torch"
)

var _ cli.Command = &DevCommand{}

func (c *DevCommand) Synopsis() string { return "Run a local FFT cluster with fake GPUs" }

func (c *DevCommand) Help() string {
	return helpText("dev [options]", `
Starts a local cluster on 127.0.0.1: a Consul dev agent, a Nomad server,
four Nomad clients (node pool "gpu") whose nomad-device-fft plugin presents
fake GPUs (2 x NVIDIA H100 80GB HBM3; NVIDIA A100-SXM4-40GB on two hosts
of 2, so that rounds place jobs on hosts; 4 x Tesla V100-SXM2-16GB), two
more clients
(node pool "default", a Consul client agent each) for the fft-allocator,
which runs as the Nomad job jobspecs/fft-allocator.nomad.hcl (two
replicas, one leading, registered in Consul with a health check; its
tokens in the Nomad Variable nomad/jobs/fft-allocator), and a sample
workload of seven training jobs (one arrives after round 8) from
jobspecs/fft-train-driver.nomad.hcl, submitted held as "fftctl run" does.
They run on the clients' fft task driver (nomad-driver-fft), which reports
their progress, throughput and checkpoints to the allocator (through a
proxy in fftctl to the leading replica); a preempted
job resumes from its checkpoint, on any client. Then
it prints every round as the allocator records it, until Ctrl-C (or
-rounds), and stops everything it started.

With -workload torch the sample jobs are real PyTorch training jobs instead,
from jobspecs/torch-train.nomad.hcl: a small MLP trained on synthetic data
on CPU, with DistributedDataParallel over gloo, one process per GPU of the
job; they checkpoint when parked and resume, bit for bit, on any client.
They need PyTorch for a python3 here (Debian: apt-get install
python3-torch; FFT_PYTHON names another interpreter); fftctl dev says so
and starts nothing when it is missing.

Nomad's HTTP API is on 127.0.0.1:4646 and Consul's on 127.0.0.1:8500 when
those ports are free (other ports otherwise; the addresses are printed).

The agents come from FFT_NOMAD_BIN and FFT_CONSUL_BIN, else PATH, else the
repository's .cache/agents ("make agents" builds them). nomad-device-fft,
nomad-driver-fft and fft-allocator come from FFT_PLUGIN_BIN, FFT_DRIVER_BIN
and FFT_ALLOCATOR_BIN, else next to fftctl ("make build" puts them in
bin/), else "go build" makes them.
`, 0, "Dev", c.ownFlags)
}

func (c *DevCommand) ownFlags(fs *flag.FlagSet) {
	fs.DurationVar(&c.round, "round", 10*time.Second, "Round length of the fft-allocator (at least 1s).")
	fs.StringVar(&c.dir, "dir", "", "State `folder` for the agents' configuration, data and logs; it must be new or empty, and is kept on exit. By default a temporary folder, removed on exit.")
	fs.IntVar(&c.rounds, "rounds", 0, "Stop after this many rounds (0: run until Ctrl-C).")
	fs.BoolVar(&c.noWorkload, "no-workload", false, "Submit no sample jobs.")
	fs.StringVar(&c.workload, "workload", workloadSample, `The sample jobs: "sample" (shell training loops) or "torch" (PyTorch training jobs; needs PyTorch).`)
}

func (c *DevCommand) Run(args []string) int {
	if _, ok := c.parse(c, "dev", 0, c.ownFlags, args); !ok {
		return 1
	}
	if err := c.check(); err != nil {
		return c.fail("Error: %v", err)
	}
	if c.workload == workloadTorch && !c.noWorkload {
		py, version, err := jobspecs.TorchPython(context.Background())
		if err != nil {
			return c.fail("Error: -workload torch runs PyTorch jobs: %v", err)
		}
		c.python = py
		c.progress(fmt.Sprintf("PyTorch %s found for %s", version, py))
	}

	// The first Ctrl-C (or SIGTERM) stops the cluster in order; a second
	// one stops it at once.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopCtx, force := context.WithCancel(context.Background())
	defer force()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		for _, f := range []context.CancelFunc{cancel, force} {
			select {
			case <-sigs:
				f()
			case <-stopCtx.Done():
				return
			}
		}
	}()

	cfg := devcluster.Config{Dir: c.dir, Progress: c.progress}
	if cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "fftctl-dev-")
		if err != nil {
			return c.fail("Error creating the state folder: %v", err)
		}
		cfg.Dir, cfg.RemoveDir = dir, true
	} else if abs, err := filepath.Abs(cfg.Dir); err == nil {
		cfg.Dir = abs // agents and the clean-up match paths as given
	}
	keep := "removed on exit"
	if !cfg.RemoveDir {
		keep = "kept on exit"
	}
	c.progress(fmt.Sprintf("Starting a dev cluster in %s (%s)", cfg.Dir, keep))
	cluster, err := devcluster.Start(ctx, cfg)
	if err != nil {
		return c.fail("Error starting the dev cluster: %v", err)
	}
	code := c.run(ctx, cluster)
	c.progress("Stopping the dev cluster")
	if err := cluster.Stop(stopCtx); err != nil {
		c.Ui.Error(fmt.Sprintf("Error cleaning up: %v", err))
		code = 1
	}
	c.progress("Stopped")
	return code
}

// check validates the flags.
func (c *DevCommand) check() error {
	switch {
	case c.round < time.Second:
		return fmt.Errorf("-round = %s: expected at least 1s", c.round)
	case c.rounds < 0:
		return fmt.Errorf("-rounds = %d: expected 0 (until Ctrl-C) or more", c.rounds)
	case c.workload != workloadSample && c.workload != workloadTorch:
		return fmt.Errorf("-workload = %q: expected %q or %q", c.workload, workloadSample, workloadTorch)
	}
	return nil
}

func (c *DevCommand) progress(msg string) { c.Ui.Output("==> " + msg) }

// run submits the workload, starts the allocator and shows rounds until
// ctx ends, -rounds is reached or a program of the cluster dies. It returns
// the exit code.
func (c *DevCommand) run(ctx context.Context, cluster *devcluster.Cluster) int {
	nc, err := nomad.NewClient(&nomad.Config{Address: cluster.NomadAddr})
	if err != nil {
		return c.fail("Error: %v", err)
	}
	arrive := func(int) error { return nil }
	if !c.noWorkload {
		if arrive, err = c.submitWorkload(ctx, nc, cluster.Dir()); err != nil {
			return c.fail("Error submitting the sample workload: %v", err)
		}
	}
	if err := cluster.StartAllocator(ctx, c.round); err != nil {
		return c.fail("Error starting fft-allocator: %v", err)
	}
	c.Ui.Output(readyText(cluster, c.workloadJobs()))

	cc, err := consul.NewClient(&consul.Config{Address: cluster.ConsulAddr})
	if err != nil {
		return c.fail("Error: %v", err)
	}
	store := consulstore.New(cc, consulstore.DefaultPrefix)
	shown := 0
	errEnough := errors.New("enough rounds")
	followCtx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	followed := make(chan error, 1)
	go func() {
		var prev *loop.RoundRecord
		followed <- followRounds(followCtx, store, func(rec *loop.RoundRecord) error {
			c.Ui.Output(formatRound(rec, endedStatus(followCtx, store, ended(prev, rec)), time.Local))
			prev = rec
			shown++
			if err := arrive(rec.Round); err != nil {
				return err
			}
			if c.rounds > 0 && shown >= c.rounds {
				return errEnough
			}
			return nil
		})
	}()
	select {
	case err := <-followed:
		if errors.Is(err, errEnough) {
			return 0
		}
		if ctx.Err() != nil {
			return 0
		}
		return c.fail("Error following the rounds in Consul: %v", err)
	case name := <-cluster.Exited():
		return c.fail("Error: %s exited unexpectedly; the end of its log (%s):\n%s", name, cluster.Logs()[name], cluster.Tail(name, 30))
	case <-ctx.Done():
		return 0
	}
}

// sampleJob is one job of the sample workload: fft-train-driver with these
// variables (work steps of step_seconds each), submitted when the cluster
// starts or, with arrive > 0, once round arrive is shown. Throughputs are
// steps per 10 s round on each model; the gang sizes add up to more than
// the 10 GPUs, so jobs wait and start. The works are set so that the A100
// hosts of 2 show placement: resnet50 leaves a100-1 first and vit-base
// takes one of its GPUs, lstm-lm then leaves a100-2 beside t5-small, and
// llama-ft (2 GPUs, A100 only) arrives to find one free GPU on each host:
// the round moves one small job next to the other (a consolidation, with
// its price) to give the gang a whole host. Real time decides when steps
// end, so the rounds may differ by one from run to run.
type sampleJob struct {
	id     string
	vars   []string
	arrive int
}

var sampleWorkload = []sampleJob{
	{"resnet50", []string{"gpu_count=2", "work=10", "step_seconds=3",
		"throughput=" + devcluster.ModelH100 + "=4," + devcluster.ModelA100 + "=3," + devcluster.ModelV100 + "=1.5"}, 0},
	{"bert-large", []string{"gpu_count=2", "work=40", "step_seconds=3",
		"throughput=" + devcluster.ModelH100 + "=5," + devcluster.ModelA100 + "=3," + devcluster.ModelV100 + "=1"}, 0},
	{"gpt2-medium", []string{"gpu_count=4", "work=20", "step_seconds=4.5",
		"throughput=" + devcluster.ModelH100 + "=4," + devcluster.ModelV100 + "=2"}, 0},
	{"vit-base", []string{"gpu_count=1", "work=30", "step_seconds=3",
		"throughput=" + devcluster.ModelH100 + "=3," + devcluster.ModelA100 + "=2.5," + devcluster.ModelV100 + "=1"}, 0},
	{"lstm-lm", []string{"gpu_count=1", "work=14", "step_seconds=4.5",
		"throughput=" + devcluster.ModelA100 + "=1.5," + devcluster.ModelV100 + "=1"}, 0},
	{"t5-small", []string{"gpu_count=1", "work=40", "step_seconds=3",
		"throughput=" + devcluster.ModelA100 + "=2," + devcluster.ModelV100 + "=1"}, 0},
	{"llama-ft", []string{"gpu_count=2", "work=20", "step_seconds=3",
		"throughput=" + devcluster.ModelA100 + "=3"}, 8},
}

// torchWorkload is -workload torch: torch-train jobs (work steps of at least
// step_seconds each), fewer than the sample's, since each GPU is a process
// with PyTorch loaded (about 200 MB). They fit the 8 GPUs together: "fftctl
// park" one, or run more, to see a checkpoint and a resume.
var torchWorkload = []sampleJob{
	{"mlp-a", []string{"gpu_count=2", "work=3000", "step_seconds=0.1", "seed=1",
		"throughput=" + devcluster.ModelH100 + "=120," + devcluster.ModelA100 + "=100," + devcluster.ModelV100 + "=60"}, 0},
	{"mlp-b", []string{"gpu_count=2", "work=2000", "step_seconds=0.1", "seed=2",
		"throughput=" + devcluster.ModelH100 + "=150," + devcluster.ModelA100 + "=100," + devcluster.ModelV100 + "=40"}, 0},
	{"mlp-c", []string{"gpu_count=1", "work=1500", "step_seconds=0.1", "seed=3",
		"throughput=" + devcluster.ModelA100 + "=80," + devcluster.ModelV100 + "=60"}, 0},
}

// workloadJobs is the sample jobs -workload and -no-workload ask for.
func (c *DevCommand) workloadJobs() []sampleJob {
	switch {
	case c.noWorkload:
		return nil
	case c.workload == workloadTorch:
		return torchWorkload
	}
	return sampleWorkload
}

// submitWorkload submits the sample jobs that arrive at the start held, as
// fftctl run does, and returns a function that submits the others once
// their round is shown. They run on the fft task driver, which reports their
// progress to the allocator and keeps their checkpoints in the state folder,
// so that a preempted job resumes where it stopped, on any client. PyTorch
// jobs run the embedded python files, written to <dir>/python.
func (c *DevCommand) submitWorkload(ctx context.Context, nc *nomad.Client, dir string) (func(round int) error, error) {
	name, common := jobspecs.TrainDriver, []string{"checkpoint_kb=256"}
	if c.workload == workloadTorch {
		pyDir := filepath.Join(dir, "python")
		if err := jobspecs.WritePython(pyDir); err != nil {
			return nil, err
		}
		name, common = jobspecs.TorchTrain, []string{"python=" + c.python, "python_dir=" + pyDir}
	}
	src, err := jobspecs.FS.ReadFile(name)
	if err != nil {
		return nil, err
	}
	submit := func(sj sampleJob, when string) error {
		vars, _, err := mergeVariables(nil, append(append([]string(nil), common...), sj.vars...))
		if err != nil {
			return err
		}
		job, err := heldJob(nc, jobspec{HCL: string(src), Variables: vars, Namespace: "default", ID: sj.id})
		if err != nil {
			return fmt.Errorf("job %s: %w", sj.id, err)
		}
		if _, err := register(ctx, nc, job); err != nil {
			return err
		}
		c.progress(fmt.Sprintf("Submitted default/%s (GPUs: %d), held for FFT%s", sj.id, gangSize(job), when))
		return nil
	}
	var later []sampleJob
	for _, sj := range c.workloadJobs() {
		if sj.arrive > 0 {
			later = append(later, sj)
			continue
		}
		if err := submit(sj, ""); err != nil {
			return nil, err
		}
	}
	return func(round int) error {
		for len(later) > 0 && later[0].arrive <= round {
			if err := submit(later[0], fmt.Sprintf(", arriving after round %d", round)); err != nil {
				return fmt.Errorf("submitting a later job of the sample workload: %w", err)
			}
			later = later[1:]
		}
		return nil
	}, nil
}

// gangSize is the job's GPU count as the sample jobspec sets it.
func gangSize(job *nomad.Job) int {
	for _, tg := range job.TaskGroups {
		for _, t := range tg.Tasks {
			if t.Resources != nil && len(t.Resources.Devices) > 0 && t.Resources.Devices[0].Count != nil {
				return int(*t.Resources.Devices[0].Count)
			}
		}
	}
	return 0
}

// endedStatus looks up the ledger status of the jobs that left the queue;
// one that cannot be read shows as stopped.
func endedStatus(ctx context.Context, store *consulstore.Store, ids []string) map[string]string {
	if len(ids) == 0 {
		return nil
	}
	status := map[string]string{}
	ledger, err := store.Load(ctx)
	for _, id := range ids {
		if err == nil {
			status[id] = ledger.Jobs[id].Status
		} else {
			status[id] = ""
		}
	}
	return status
}

// readyText tells the user where the cluster is and what to try.
func readyText(cl *devcluster.Cluster, workload []sampleJob) string {
	job := "JOB"
	if len(workload) > 0 {
		job = "default/" + workload[0].id
	}
	ctl := selfName()
	var b strings.Builder
	b.WriteString("==> The dev cluster is up. In another terminal:\n\n")
	fmt.Fprintf(&b, "      export NOMAD_ADDR=%s CONSUL_HTTP_ADDR=%s\n", cl.NomadAddr, cl.ConsulAddr)
	bin := cl.Binaries()
	if line := pathExport(bin.Nomad, bin.Consul, exec.LookPath); line != "" {
		fmt.Fprintf(&b, "      %-46s # the agents' own CLIs: nomad alloc stop, consul kv get\n", line)
	}
	for _, l := range [][2]string{
		{ctl + " status", "the queue and the GPU models"},
		{ctl + " explain " + job, "why a job runs where it does, or waits"},
		{ctl + " audit " + job, "its ledger, round by round"},
		{ctl + " run jobspecs/fft-train-driver.nomad.hcl", "one more job"},
		{"curl " + cl.AllocatorAddr + "/v1/status", "the allocator's own view"},
		{cl.AllocatorAddr + "/ui", "its status page, in a browser"},
	} {
		fmt.Fprintf(&b, "      %-46s # %s\n", l[0], l[1])
	}
	fmt.Fprintf(&b, "\n    Logs and data are in %s. Ctrl-C stops the cluster.\n\n==> Rounds", cl.Dir())
	return b.String()
}

// pathExport returns the line that puts the agents the cluster runs on
// PATH, so that `nomad` and `consul` in another terminal are the same
// versions (make dev builds them into .cache/agents, off PATH); "" when
// PATH already finds both there.
func pathExport(nomadBin, consulBin string, lookPath func(string) (string, error)) string {
	var dirs []string
	for _, b := range [][2]string{{"nomad", nomadBin}, {"consul", consulBin}} {
		if b[1] == "" {
			continue
		}
		abs, err := filepath.Abs(b[1])
		if err != nil {
			abs = b[1]
		}
		if found, err := lookPath(b[0]); err == nil {
			if f, err := filepath.Abs(found); err == nil && f == abs {
				continue
			}
		}
		if dir := filepath.Dir(abs); !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
	}
	if len(dirs) == 0 {
		return ""
	}
	return "export PATH=" + strings.Join(dirs, ":") + ":$PATH"
}

// selfName is how to run this fftctl from the working directory: its
// relative path when it lies below (make dev runs bin/fftctl), else fftctl.
func selfName() string {
	exe, err1 := os.Executable()
	wd, err2 := os.Getwd()
	if err1 != nil || err2 != nil {
		return "fftctl"
	}
	if rel, err := filepath.Rel(wd, exe); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return "fftctl"
}

// followRounds calls each with every round record, in order, as the
// allocator records them, until ctx ends or each returns an error. It
// waits with blocking queries on the ledger.
func followRounds(ctx context.Context, s *consulstore.Store, each func(*loop.RoundRecord) error) error {
	next, index := 0, uint64(0)
	for {
		n, idx, err := s.NextRound(ctx, index)
		if err != nil {
			return err
		}
		for ; next < n; next++ {
			rec, err := s.ReadRound(ctx, next)
			if err != nil {
				return err
			}
			if rec.State == loop.RoundApplying && next == n-1 {
				// Being applied: its full record comes with the next ledger change. An
				// intent with later rounds after it was left by a leader that died.
				break
			}
			if err := each(rec); err != nil {
				return err
			}
		}
		index = idx
	}
}

// startWhy says why a start or a move was worth its restart, from the cost
// terms the round recorded (policies without them record none): the
// round's optimum took it at this cost, its restart priced in. It is ""
// without terms.
func startWhy(ja loop.JobAudit) string {
	c := ja.Chosen
	if c.Model == "" {
		return ""
	}
	return fmt.Sprintf(": cost %.3g, of which its restart %.3g", c.Cost, c.Switch)
}

// parkWhy says why a round parked a job, in terms that add up: a round
// minimises the sum of its jobs' costs, so one job's cost beside another's
// does not explain a park (a gang needs the GPUs of several smaller jobs,
// and the round must keep K(t) GPUs busy). It solves the round's recorded
// costs again with the job kept on its best model, and says what the
// round's total would have been and which jobs would have given way. It
// falls back to the recorded reason without terms.
func parkWhy(ja loop.JobAudit, rec *loop.RoundRecord) string {
	switch {
	case ja.ReasonCode == loop.CodeParkedByOperator:
		return ": parked by an operator"
	case ja.ReasonCode == loop.CodeUnhealthyGPU:
		return ": " + ja.Reason
	case len(ja.Options) == 0 || rec.OptionsOmitted:
		if ja.Reason != "" {
			return ": " + ja.Reason
		}
		return ""
	}
	best := ja.Options[0]
	for _, o := range ja.Options[1:] {
		if o.Cost < best.Cost {
			best = o
		}
	}
	cf, err := keptOn(rec, ja.ID, best.Model)
	kept := fmt.Sprintf(": kept on %s (cost %.3g)", best.Model, best.Cost)
	switch {
	case errors.Is(err, solver.ErrInfeasible):
		return fmt.Sprintf("%s, the round could not keep %d GPUs busy, as it must (K(t))", kept, cf.minUsage)
	case err != nil || cf.total < cf.chosen:
		// The record does not reproduce its round (a policy outside the
		// solver, a job run to be measured): say only what was chosen.
		return fmt.Sprintf(": its best option (%s) costs %.3g; the round's optimum left it waiting", best.Model, best.Cost)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s, the round would total %.3g, not %.3g", kept, cf.total, cf.chosen)
	if len(cf.wait) > 0 {
		fmt.Fprintf(&b, "; %s would wait", strings.Join(cf.wait, ", "))
	}
	if len(cf.moved) > 0 {
		fmt.Fprintf(&b, "; %s would move", strings.Join(cf.moved, ", "))
	}
	return b.String()
}

// counterfactual is a round solved again with one job kept on a model.
type counterfactual struct {
	// chosen is the recorded decision's total cost, total the
	// counterfactual's (the kept job's cost included).
	chosen, total float64
	// wait and moved are the jobs that ran in the round and would wait,
	// or run on another model (with it, "b (to M)"), short IDs, sorted.
	wait, moved []string
	minUsage    int
}

// errNoRoom: the model has fewer GPUs (left by jobs the record cannot
// price) than the job needs.
var errNoRoom = errors.New("not enough GPUs on the model")

// keptOn solves rec's round again from its recorded costs with job id
// forced onto model: the other jobs the round considered (those running
// and those it did not select) share the rest of the GPUs, and the round
// must still keep K(t) of them busy.
func keptOn(rec *loop.RoundRecord, id, model string) (counterfactual, error) {
	var cf counterfactual
	index := map[string]int{}
	p := &solver.Problem{}
	for i, m := range rec.Models {
		index[m.Name] = i
		p.Capacity = append(p.Capacity, m.GPUs)
	}
	var jobs []loop.JobAudit
	forced := -1
	for _, ja := range rec.Jobs {
		if ja.Model != "" {
			cf.chosen += ja.Chosen.Cost
		}
		considered := ja.Model != "" || ja.ReasonCode == allocator.CodeNotSelected || ja.ID == id
		if !considered || ja.GPUs <= 0 || len(ja.Options) == 0 {
			if ja.Model != "" {
				// A job the record cannot price keeps its GPUs.
				if i, ok := index[ja.Model]; ok {
					p.Capacity[i] = max(0, p.Capacity[i]-ja.GPUs)
				}
			}
			continue
		}
		if ja.ID == id {
			forced = len(jobs)
		}
		jobs = append(jobs, ja)
		p.Size = append(p.Size, ja.GPUs)
		row := make([]float64, len(rec.Models))
		for i := range row {
			row[i] = math.Inf(1)
		}
		for _, o := range ja.Options {
			if i, ok := index[o.Model]; ok {
				row[i] = o.Cost
			}
		}
		p.Cost = append(p.Cost, row...)
	}
	m, ok := index[model]
	if forced < 0 || !ok {
		return cf, fmt.Errorf("job %s or model %s is not in round %d", id, model, rec.Round)
	}
	ctx := context.Background()
	pack, err := solver.MaxUsage(ctx, p, solver.Options{})
	if err != nil {
		return cf, err
	}
	// The job takes its GPUs on model; the others solve the rest.
	kept := p.Cost[forced*len(rec.Models)+m]
	d := p.Size[forced]
	rest := &solver.Problem{Capacity: slices.Clone(p.Capacity), MinUsage: max(0, pack.Usage-d)}
	rest.Capacity[m] -= d
	if rest.Capacity[m] < 0 {
		return cf, fmt.Errorf("%w: %s has %d, job %s needs %d", errNoRoom, model, p.Capacity[m], id, d)
	}
	var others []loop.JobAudit
	for j, ja := range jobs {
		if j == forced {
			continue
		}
		others = append(others, ja)
		rest.Size = append(rest.Size, p.Size[j])
		rest.Cost = append(rest.Cost, p.Cost[j*len(rec.Models):(j+1)*len(rec.Models)]...)
	}
	cf.minUsage = pack.Usage
	res, err := solver.Solve(ctx, rest, solver.Options{})
	if err != nil {
		return cf, err
	}
	cf.total = kept + res.Objective
	for j, ja := range others {
		switch choice := res.Choice[j]; {
		case ja.Model == "":
		case choice < 0:
			cf.wait = append(cf.wait, shortID(ja.ID))
		case rec.Models[choice].Name != ja.Model:
			cf.moved = append(cf.moved, fmt.Sprintf("%s (to %s)", shortID(ja.ID), rec.Models[choice].Name))
		}
	}
	sort.Strings(cf.wait)
	sort.Strings(cf.moved)
	return cf, nil
}

// ended returns the jobs that prev listed and rec does not, sorted: they
// left the queue between the two rounds (finished, failed or stopped).
func ended(prev, rec *loop.RoundRecord) []string {
	if prev == nil {
		return nil
	}
	now := map[string]bool{}
	for _, ja := range rec.Jobs {
		now[ja.ID] = true
	}
	for _, inv := range rec.Invalid {
		now[inv.ID] = true
	}
	var gone []string
	for _, ja := range prev.Jobs {
		if !now[ja.ID] {
			gone = append(gone, ja.ID)
		}
	}
	sort.Strings(gone)
	return gone
}

// endLine is the printout's line for a job that left the queue, by its
// status in the ledger ("" when the ledger no longer has it).
func endLine(id, status string) string {
	switch status {
	case loop.StatusFinished:
		return fmt.Sprintf("    %-8s %s: its work is done", "finish", shortID(id))
	case loop.StatusFailed:
		return fmt.Sprintf("    %-8s %s: Nomad gave it up (its allocation failed)", "failed", shortID(id))
	default:
		return fmt.Sprintf("    %-8s %s: no longer registered (stopped)", "gone", shortID(id))
	}
}

// formatRound renders one round record as a short block: what ran, the
// GPUs busy per model, the jobs that left the queue since the previous
// round (ended: ID to ledger status) and each change the round made. It is
// pure.
func formatRound(rec *loop.RoundRecord, ended map[string]string, loc *time.Location) string {
	at := rec.Start
	if t, err := time.Parse(time.RFC3339Nano, rec.Start); err == nil {
		at = t.In(loc).Format("15:04:05")
	}
	running, waiting, noFit := 0, 0, 0
	var changes []string
	for _, id := range slices.Sorted(maps.Keys(ended)) {
		changes = append(changes, endLine(id, ended[id]))
	}
	for _, ja := range rec.Jobs {
		switch {
		case ja.Model != "":
			running++
		case len(ja.Options) == 0:
			noFit++
		default:
			waiting++
		}
		switch ja.Action {
		case loop.ActionStart, loop.ActionMigrate:
			on := ja.Model
			if hosts := hostNames(rec, ja.Hosts); len(hosts) > 0 {
				on += " (" + strings.Join(hosts, ", ") + ")"
			}
			why := startWhy(ja)
			if m := moveOf(rec, ja.ID); m != nil {
				why = fmt.Sprintf(": moved to make room for %s on one host, priced %.3g GPU-rounds", shortID(m.For), m.Price)
			}
			changes = append(changes, fmt.Sprintf("    %-8s %s on %s%s", ja.Action, shortID(ja.ID), on, why))
		case loop.ActionPark:
			changes = append(changes, fmt.Sprintf("    %-8s %s%s", ja.Action, shortID(ja.ID), parkWhy(ja, rec)))
		}
	}
	busy, total := 0, 0
	var usage []string
	for _, m := range rec.Models {
		busy += rec.Usage[m.Name]
		total += m.GPUs
		usage = append(usage, fmt.Sprintf("%s %d/%d", m.Name, rec.Usage[m.Name], m.GPUs))
	}
	sort.Strings(usage)
	var b strings.Builder
	fmt.Fprintf(&b, "Round %d at %s", rec.Round, at)
	switch rec.Trigger {
	case "", loop.TriggerSchedule, loop.TriggerManual:
	default:
		fmt.Fprintf(&b, " (early: %s)", rec.Trigger)
	}
	fmt.Fprintf(&b, ": %d running, %d waiting", running, waiting)
	if noFit > 0 {
		fmt.Fprintf(&b, ", %d fit no model", noFit)
	}
	if len(rec.Invalid) > 0 {
		fmt.Fprintf(&b, ", %d rejected (bad fft. meta)", len(rec.Invalid))
	}
	fmt.Fprintf(&b, "; %d of %d GPUs busy", busy, total)
	if len(changes) == 0 {
		b.WriteString("; no changes")
	}
	if len(usage) > 0 {
		b.WriteString("\n    GPUs: " + strings.Join(usage, ", "))
	}
	for _, ch := range changes {
		b.WriteString("\n" + ch)
	}
	return b.String()
}

// moveOf is the placement stage's move of job id in the round, nil if none.
func moveOf(rec *loop.RoundRecord, id string) *placement.Move {
	for k := range rec.Moves {
		if rec.Moves[k].Job == id {
			return &rec.Moves[k]
		}
	}
	return nil
}

// shortID drops the default namespace from a job ID, for compact lines.
func shortID(id string) string { return strings.TrimPrefix(id, "default/") }
