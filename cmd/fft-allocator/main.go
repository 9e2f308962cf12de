package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/consulstore"
	"github.com/nomad-fft/nomad-fft/allocator/live"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/nomadapi"
	"github.com/nomad-fft/nomad-fft/allocator/policy"
	"github.com/nomad-fft/nomad-fft/allocator/profile"
	"github.com/nomad-fft/nomad-fft/allocator/telemetry"
	"github.com/nomad-fft/nomad-fft/allocator/ui"
	"github.com/nomad-fft/nomad-fft/cmd/internal/connect"
	"github.com/nomad-fft/nomad-fft/cmd/internal/helptext"
	"github.com/nomad-fft/nomad-fft/cmd/internal/version"
)

const usage = `Usage: fft-allocator [options]

  Runs FFT rounds on a Nomad cluster: every round it reads GPU capacity and
  the jobs that opt in with fft.* meta from Nomad, solves the round, starts,
  steers and parks jobs through the Nomad API, and records the fairness
  ledger and an audit record of the round in Consul KV.

  Settings come from defaults, then the environment (NOMAD_ADDR,
  NOMAD_TOKEN, NOMAD_CACERT, ..., CONSUL_HTTP_ADDR, CONSUL_HTTP_TOKEN,
  CONSUL_CACERT, ...), then the -config file, then flags; a flag overrides
  only when it is set.

Options:
`

// The values of -progress-auth.
const (
	progressAuthNomad = "nomad"
	progressAuthNone  = "none"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type flags struct {
	// nomad and consul say how to reach each API: the environment, then
	// the -config file, then the flags.
	nomad, consul connect.Settings
	prefix        string
	round         time.Duration
	minRoundGap   time.Duration
	nodePool      string
	httpAddr      string
	logLevel      string
	logJSON       bool
	metricsPerJob bool
	// metricsPerJobMax bounds the per-job series.
	metricsPerJobMax int
	once             bool
	id               string
	leaderTTL        time.Duration
	auditRounds      int
	// applyConcurrency is how many jobs a round's apply writes to Nomad at once.
	applyConcurrency int
	config           string
	// progressAuth is how progress reports are authenticated: "nomad"
	// (the task's workload identity, verified by Nomad) or "none".
	progressAuth string
	// readAuth is who may read /v1/status and /ui: "nomad" (a Nomad ACL token, which sees
	// the jobs of the namespaces it may read) or "none" (anyone sees every job).
	readAuth string
	version  bool
	// engine is the round engine's configuration (defaults, then -config).
	engine allocator.Config
	// tenantWeights counts fft.weight in the fairness shares (-config's
	// engine tenant_weights; off is the paper).
	tenantWeights bool
	// policy names the registry's policy that decides the rounds.
	policy string
	// tenants are the operator's shares between tenants (-config's tenants
	// block; nil: none, every job its own share).
	tenants *loop.TenantShares
	// listener is the HTTP API's own TLS (the -tls-* flags); tlsConfig is what it gives,
	// nil for plain HTTP.
	listener  listenerTLS
	tlsConfig *tls.Config
	// throughputPriors is the operator's prior table (-throughput-priors), read at start;
	// priors is the embedded table with its rows merged over, nil when none is given.
	throughputPriors string
	priors           *profile.Priors
}

func parse(args []string, stderr io.Writer) (_ *flags, err error) {
	f := &flags{}
	fs := flag.NewFlagSet("fft-allocator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		// The same help builder as fftctl's (and the generated REFERENCE.md).
		fmt.Fprint(stderr, usage+"\n"+helptext.Flags(fs)+"\n")
	}
	fs.BoolVar(&f.version, "version", false, "Print the version and the commit it was built from, and exit.")
	fs.StringVar(&f.config, "config", "", "An HCL (or .json) configuration file; flags given on the command line override it, and it overrides the environment.")
	f.nomad.Flags(fs, "nomad-", "Nomad", connect.NomadEnv)
	f.consul.Flags(fs, "consul-", "Consul", connect.ConsulEnv)
	fs.StringVar(&f.prefix, "consul-prefix", consulstore.DefaultPrefix, "Consul KV prefix of the ledger and audit log, layout version included.")
	fs.DurationVar(&f.round, "round", 300*time.Second, "Round length R.")
	fs.DurationVar(&f.minRoundGap, "min-round-gap", 5*time.Second, "Least time between the starts of two rounds when a job's arrival or finish brings a round forward (a burst is one round); 0 turns early rounds off.")
	fs.StringVar(&f.nodePool, "node-pool", "gpu", `Nomad node pool of the GPU clients: capacity counts its nodes only, and a managed job outside it is held until a round moves it in. "" counts every node and holds jobs with the gate constraint alone.`)
	fs.StringVar(&f.httpAddr, "http-addr", "127.0.0.1:4650", "Address of the HTTP API (/v1/health, /v1/status, /v1/metrics, /v1/progress) and the status page (/ui); empty disables it.")
	f.listener.flags(fs)
	fs.StringVar(&f.logLevel, "log-level", "info", "Log level: trace, debug, info, warn or error.")
	fs.BoolVar(&f.logJSON, "log-json", false, "Write logs as JSON, one object a line (the per-round audit events included).")
	fs.BoolVar(&f.metricsPerJob, "metrics-per-job", false, "Export one fft_job_rho series per active job on /v1/metrics, for the -metrics-per-job-max most owed (off: at thousands of jobs that is too many series). The series name jobs, so /v1/metrics then follows -read-auth as /v1/status does: a Nomad token, and only the jobs of the namespaces it may read.")
	fs.IntVar(&f.metricsPerJobMax, "metrics-per-job-max", telemetry.DefaultPerJobMax, "With -metrics-per-job, the most fft_job_rho series exported: the jobs with the largest rho; fft_job_rho_omitted_jobs counts the others.")
	fs.StringVar(&f.policy, "policy", policy.DefaultName, "The policy that decides each round, by its name in the registry (fftctl simulate -list): the default, fft-rate-w0.25, is FFT with the unit-free objective (fairness weight 0.25) and restarts priced; fft is the paper's FFT, with the -config engine block; any other name runs that policy as registered, for example gavel-ftf to compare it with FFT on this cluster (Gavel's and Sia's policies place jobs on nodes as their own systems do; allocator/placement/README.md).")
	fs.BoolVar(&f.once, "once", false, "Run one round and exit (status 1 if it failed). It does not take the leader lock.")
	host, _ := os.Hostname()
	fs.StringVar(&f.id, "id", fmt.Sprintf("%s-%d", host, os.Getpid()), "This replica's name in the leader lock.")
	fs.DurationVar(&f.leaderTTL, "leader-ttl", 15*time.Second, "TTL of the leader lock's Consul session (at least 10s): a standby takes over within it when the leader dies.")
	fs.StringVar(&f.progressAuth, "progress-auth", progressAuthNomad, `How PUT /v1/progress/<namespace>/<job> authenticates a report: "nomad" takes it only with the workload identity of one of the job's own running tasks (X-Nomad-Token: $NOMAD_TOKEN), verified by Nomad, which needs Nomad ACLs; "none" takes every report (clusters without ACLs).`)
	fs.StringVar(&f.readAuth, "read-auth", progressAuthNomad, `Who may read GET /v1/status and /ui: "nomad" needs a Nomad ACL token (X-Nomad-Token) and shows the jobs of the namespaces it may read, nothing without one (/v1/health stays open); "none" shows every job to anyone (clusters without Nomad ACLs, such as fftctl dev's).`)
	fs.StringVar(&f.throughputPriors, "throughput-priors", "", "A CSV of throughput priors for jobs that declare no throughput (header model,family,speed,log_sd; speed relative to a V100, as allocator/profile's embedded table): its rows replace the embedded Gavel-derived ones with the same model and family, and add the others.")
	fs.IntVar(&f.auditRounds, "audit-rounds", consulstore.DefaultAuditRounds, "How many of the latest round records the audit log in Consul keeps; each round deletes the one that many rounds older.")
	fs.IntVar(&f.applyConcurrency, "apply-concurrency", nomadapi.DefaultApplyConcurrency, "How many jobs a round's apply writes to Nomad at once (parks first, then starts and migrations); each job's own calls stay in order.")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if f.version {
		return f, nil
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	f.engine = allocator.DefaultConfig()
	if f.config != "" {
		set := map[string]bool{}
		fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
		eng, err := loadConfig(f.config, f, set)
		if err != nil {
			return nil, err
		}
		f.engine = eng
	}
	if f.leaderTTL < consulstore.MinLeaderTTL {
		return nil, fmt.Errorf("-leader-ttl=%s: want at least %s (Consul's minimum session TTL)", f.leaderTTL, consulstore.MinLeaderTTL)
	}
	if f.metricsPerJobMax < 1 {
		return nil, fmt.Errorf("-metrics-per-job-max=%d: want at least 1 (the most fft_job_rho series exported)", f.metricsPerJobMax)
	}
	if f.applyConcurrency < 1 {
		return nil, fmt.Errorf("-apply-concurrency=%d: want at least 1 (jobs written to Nomad at once)", f.applyConcurrency)
	}
	if f.auditRounds < 1 {
		return nil, fmt.Errorf("-audit-rounds=%d: want at least 1 (the audit log keeps that many of the latest rounds)", f.auditRounds)
	}
	if f.round < time.Second || f.round.Seconds() > allocator.MaxRoundSeconds {
		return nil, fmt.Errorf("-round=%s: want at least 1s and at most %gs", f.round, allocator.MaxRoundSeconds)
	}
	f.engine.RoundSeconds = f.round.Seconds()
	// loadConfig checked each engine setting; this catches any that a
	// later change of the engine's ranges would leave unchecked.
	if err := f.engine.Validate(); err != nil {
		return nil, fmt.Errorf("engine settings: %w", err)
	}
	if f.minRoundGap < 0 {
		return nil, fmt.Errorf("-min-round-gap=%s: want 0 (no early rounds) or more", f.minRoundGap)
	}
	if f.nodePool == "all" {
		return nil, fmt.Errorf(`-node-pool=%q: Nomad's pool of every node holds no job back; name the GPU clients' pool, or "" for none`, f.nodePool)
	}
	if f.progressAuth != progressAuthNomad && f.progressAuth != progressAuthNone {
		return nil, fmt.Errorf(`-progress-auth=%q: want "nomad" (the task's workload identity) or "none"`, f.progressAuth)
	}
	if f.readAuth != progressAuthNomad && f.readAuth != progressAuthNone {
		return nil, fmt.Errorf(`-read-auth=%q: want "nomad" (a Nomad ACL token's namespaces) or "none"`, f.readAuth)
	}
	if f.priors, err = readPriors(f.throughputPriors); err != nil {
		return nil, err
	}
	// The error starts with the setting (a flag, or the -config file and its key).
	if f.tlsConfig, err = f.listener.config(time.Now()); err != nil {
		return nil, err
	}
	if hclog.LevelFromString(f.logLevel) == hclog.NoLevel {
		return nil, fmt.Errorf("-log-level=%q: want trace, debug, info, warn or error", f.logLevel)
	}
	return f, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	f, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "fft-allocator: %v\n", err)
		return 2
	}
	if f.version {
		fmt.Fprintln(stdout, "fft-allocator "+version.Get().String())
		return 0
	}
	log := hclog.New(&hclog.LoggerOptions{
		Name: "fft-allocator", Level: hclog.LevelFromString(f.logLevel), JSONFormat: f.logJSON, Output: stderr,
	})

	nc, err := f.nomad.NomadMeasured() // each round tells its waits on Nomad and Consul from its own time
	if err != nil {
		log.Error("connecting to Nomad; check the -nomad-* flags, the nomad block of -config and NOMAD_*", "error", err)
		return 1
	}
	cc, err := f.consul.ConsulMeasured()
	if err != nil {
		log.Error("connecting to Consul; check the -consul-* flags, the consul block of -config and CONSUL_*", "error", err)
		return 1
	}
	ccfg := f.consul.ConsulConfig()

	cfg := f.engine
	cfg.RoundSeconds = f.round.Seconds()
	na := nomadapi.New(nc, log.Named("nomad")).WithNodePool(f.nodePool).WithApplyConcurrency(f.applyConcurrency)
	store := consulstore.New(cc, f.prefix).WithLog(log.Named("leader").Info).WithAuditRounds(f.auditRounds)
	pol, err := f.newPolicy(cfg)
	if err != nil {
		log.Error("choosing the policy; see -policy", "error", err)
		return 1
	}
	// The metrics read the service's status, and the service reports each round to them: set
	// metrics before the first round runs.
	var metrics *telemetry.Metrics
	audit := telemetry.NewAudit(log)
	history := ui.NewHistory(0)
	opts := []loop.Option{loop.WithConfig(cfg), loop.WithPolicy(pol), loop.WithLogger(log),
		loop.WithTenantWeights(f.tenantWeights), loop.WithTenantShares(f.tenants)}
	if f.priors != nil {
		opts = append(opts, loop.WithThroughputPriors(f.priors))
	}
	rounds := loop.New(na, na, store, opts...)
	svc := live.New(rounds, live.WithLogger(log), live.WithEarlyRounds(f.minRoundGap),
		live.WithRoundHook(func(rec *loop.RoundRecord, err error) {
			metrics.ObserveRound(rec, err)
			audit.ObserveRound(rec, err)
			history.ObserveRound(rec, err)
		}))
	metrics = telemetry.New(svc, telemetry.WithPerJob(f.metricsPerJob), telemetry.WithPerJobMax(f.metricsPerJobMax))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if f.httpAddr != "" {
		ln, err := net.Listen("tcp", f.httpAddr)
		if err != nil {
			log.Error("listening for the HTTP API", "address", f.httpAddr, "error", err)
			return 1
		}
		// The indexer ties reports to their job's registration, and answers the driver's
		// GET /v1/incarnation, under either -progress-auth.
		hopts := []live.HandlerOption{live.WithMetrics(metrics.Handler()), live.WithUI(ui.Handler(svc, history)),
			live.WithAllocIndexer(nomadapi.NewAllocIndexer(nc))}
		if f.metricsPerJob {
			hopts = append(hopts, live.WithJobMetrics())
		}
		if f.progressAuth == progressAuthNomad {
			hopts = append(hopts, live.WithTaskVerifier(nomadapi.NewIdentityVerifier(nc)))
		}
		if f.readAuth == progressAuthNomad {
			hopts = append(hopts, live.WithNamespaceReader(nomadapi.NewNamespaceReader(nc)))
		}
		// The server's own errors (refused TLS handshakes among them) go to the log.
		srv := live.NewServer(live.Handler(svc, hopts...), live.DefaultServerLimits(),
			log.Named("http").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}))
		scheme := "http"
		if f.tlsConfig != nil {
			ln, scheme = tls.NewListener(ln, f.tlsConfig), "https"
		}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		log.Info("HTTP API listening", "address", scheme+"://"+ln.Addr().String(), "verify_https_client", f.listener.verifyHTTPSClient)
	}
	log.Info("starting", "id", f.id, "nomad", nc.Address(), "consul", ccfg.Scheme+"://"+ccfg.Address, "prefix", f.prefix,
		"round", f.round, "policy", pol.Name(), "progress_auth", f.progressAuth, "read_auth", f.readAuth, "tenant_weights", f.tenantWeights, "min_round_gap", f.minRoundGap,
		"node_pool", f.nodePool, "version", version.Get().String())
	if f.once {
		if _, err := svc.RunRound(ctx); err != nil {
			return 1
		}
		return 0
	}
	// One replica runs rounds; the others wait for the lock. One that cannot take it (its
	// token refused) answers /v1/health 503 with the fix.
	store.WithLockHealth(svc.SetLockError)
	_ = store.Lead(ctx, f.id, f.leaderTTL, func(lctx context.Context) {
		svc.Lead(true)
		defer svc.Lead(false)
		// While leading, Nomad's event stream keeps the job cache current, so rounds
		// read no job the stream brought.
		na.StartFollowing(lctx)
		_ = svc.Run(lctx, f.round)
	})
	log.Info("stopped")
	return 0
}

// newPolicy builds the -policy policy: "fft" is the paper's FFT with the
// engine configuration of -config (the paper's objective unless the file
// says otherwise); any other name, the default fft-rate-w0.25 included, is the
// registry's policy as registered. Every FFT variant takes the cluster's
// facts (round length, restart_seconds, transfer_gbps) from cfg
// (allocator.Config.WithWorld).
func (f *flags) newPolicy(cfg allocator.Config) (policy.Policy, error) {
	if f.policy == policy.FFTName {
		return policy.NewFFTWith(f.policy, cfg), nil
	}
	return policy.New(f.policy, policy.Options{RestartSeconds: cfg.RestartSeconds})
}

// readPriors reads the operator's prior table and merges it over the embedded one; "" is none
// (nil: the loop keeps its default, the embedded table).
func readPriors(path string) (*profile.Priors, error) {
	if path == "" {
		return nil, nil
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("-throughput-priors=%s: %w", path, err)
	}
	defer fh.Close()
	p, err := profile.ParsePriors(fh)
	if err != nil {
		return nil, fmt.Errorf("-throughput-priors=%s: %w (see allocator/profile's README for the columns)", path, err)
	}
	return profile.GavelPriors().With(p), nil
}
