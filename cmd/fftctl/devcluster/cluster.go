package devcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/e2e/agentrun"
)

// Standard ports: the cluster takes them when they are free, so that the
// nomad, consul and fftctl commands reach it without settings.
const (
	standardNomadHTTP  = 4646
	standardConsulHTTP = 8500
)

// How long each start-up step may take. The clients wait for the server
// and fingerprint their fake GPUs first.
const (
	agentTimeout  = 2 * time.Minute
	clientTimeout = 3 * time.Minute
	pollInterval  = 250 * time.Millisecond
	// stopGrace is how long a program has to exit after SIGINT before its
	// process group gets SIGKILL.
	stopGrace = 20 * time.Second
	// startAttempts is how many times Start starts the agents when one cannot bind its port.
	startAttempts = 3
)

// Config says what to start.
type Config struct {
	// Dir holds every agent's configuration, data and log. It must be empty
	// or not exist yet. RemoveDir removes it when the cluster stops.
	Dir       string
	RemoveDir bool
	// Bin names the programs to run; Start finds those left empty (see
	// Binaries).
	Bin Binaries
	// Clients default to DefaultClients.
	Clients []GPUClient
	// Progress hears about each step; nil ignores them.
	Progress func(string)
}

// Cluster is a running dev cluster.
type Cluster struct {
	cfg Config
	// NomadAddr is the Nomad server's HTTP API (http://127.0.0.1:port),
	// ConsulAddr Consul's (127.0.0.1:port, as CONSUL_HTTP_ADDR takes it),
	// and AllocatorAddr the allocator's HTTP API once started: a proxy to
	// the leading replica (see StartAllocator).
	NomadAddr, ConsulAddr, AllocatorAddr string
	// allocatorPort is chosen before the clients start, whose task driver
	// reports there: the allocator proxy's port (see StartAllocator).
	allocatorPort int
	proxy         *http.Server

	mu      sync.Mutex
	procs   []*agentrun.Process
	stopped bool
	// exited is replaced when a failed start is set aside: its programs' ends, reported on the
	// old channel, are not the cluster's.
	exited chan string
}

// Start starts Consul, the Nomad server and the clients, and waits until
// every client is ready with its GPUs. On error (or when ctx ends) it stops
// what it started; the error carries the end of the failing agent's log.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Clients == nil {
		cfg.Clients = DefaultClients
	}
	if cfg.Progress == nil {
		cfg.Progress = func(string) {}
	}
	if err := prepareDir(cfg.Dir); err != nil {
		return nil, err
	}
	if err := agentrun.AdoptOrphans(); err != nil {
		return nil, err
	}
	// One slot per program: Consul, the server, the clients, and a Consul
	// agent and a Nomad client per allocator host.
	c := &Cluster{cfg: cfg, exited: make(chan string, 2+len(cfg.Clients)+2*len(AllocatorHosts))}
	bin, err := defaultFinder().resolve(ctx, cfg.Bin, filepath.Join(cfg.Dir, "bin"), cfg.Progress)
	c.cfg.Bin = bin
	if err == nil {
		err = c.startRetrying(ctx)
	}
	if err != nil {
		_ = c.Stop(context.Background())
		return nil, err
	}
	return c, nil
}

// prepareDir creates dir, or checks that it is empty: the cluster starts
// from scratch (the Consul dev agent keeps nothing), and a folder of
// someone else's is never filled or removed.
func prepareDir(dir string) error {
	if dir == "" {
		return errors.New("devcluster: no state folder given")
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return fmt.Errorf("state folder %s: %w", dir, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("state folder %s is not empty: give a new or empty folder (the dev cluster starts from scratch)", dir)
	}
	return nil
}

// startRetrying starts the agents, and all of them again on other ports when one exits because
// another program took its port between the choice and the bind: agentrun.FreePorts' ports are
// free when drawn, and the standard ports are checked, not held. A failed start's files are set
// aside in the state folder, under failed-start-<n>.
func (c *Cluster) startRetrying(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		err := c.start(ctx)
		var exited *exitError
		if err == nil || attempt == startAttempts || !errors.As(err, &exited) || !exited.p.PortTaken() {
			return err
		}
		aside := filepath.Join(c.cfg.Dir, fmt.Sprintf("failed-start-%d", attempt))
		c.cfg.Progress(fmt.Sprintf("%s could not bind its port: another program took it. Starting again on other ports (this try's files are moved to %s)", exited.p.Name, aside))
		if err := c.setAside(ctx, aside); err != nil {
			return err
		}
	}
}

// setAside stops every program started and moves what they wrote in the state folder into
// aside, keeping the binaries.
func (c *Cluster) setAside(ctx context.Context, aside string) error {
	if err := c.stopPrograms(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	c.procs = nil
	c.exited = make(chan string, cap(c.exited))
	c.mu.Unlock()
	entries, err := os.ReadDir(c.cfg.Dir)
	if err != nil {
		return fmt.Errorf("setting the failed start aside: %w", err)
	}
	if err := os.Mkdir(aside, 0o755); err != nil {
		return fmt.Errorf("setting the failed start aside: %w", err)
	}
	for _, e := range entries {
		if e.Name() == "bin" || strings.HasPrefix(e.Name(), "failed-start-") {
			continue
		}
		if err := os.Rename(filepath.Join(c.cfg.Dir, e.Name()), filepath.Join(aside, e.Name())); err != nil {
			return fmt.Errorf("setting the failed start aside: %w", err)
		}
	}
	return nil
}

func (c *Cluster) start(ctx context.Context) error {
	dir, progress := c.cfg.Dir, c.cfg.Progress

	cp, err := consulPortsFor()
	if err != nil {
		return err
	}
	c.ConsulAddr = fmt.Sprintf("127.0.0.1:%d", cp.HTTP)
	progress(fmt.Sprintf("Starting the Consul dev agent on %s", c.ConsulAddr))
	cproc, err := c.launch("consul", c.cfg.Bin.Consul, consulArgs(dir, cp), nil)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, agentTimeout, []*agentrun.Process{cproc}, "Consul to elect itself and serve KV", func() error {
		return agentrun.ConsulReady(c.ConsulAddr, consulDataDir(dir))
	}); err != nil {
		return err
	}

	sp, err := nomadPortsFor(standardNomadHTTP)
	if err != nil {
		return err
	}
	c.NomadAddr = fmt.Sprintf("http://127.0.0.1:%d", sp.HTTP)
	progress(fmt.Sprintf("Starting the Nomad server on %s", c.NomadAddr))
	server, err := c.launchNomad("nomad-server", serverConfig(dir, sp, c.ConsulAddr))
	if err != nil {
		return err
	}
	nc, err := nomad.NewClient(&nomad.Config{Address: c.NomadAddr})
	if err != nil {
		return err
	}
	if err := waitFor(ctx, agentTimeout, []*agentrun.Process{server}, "the Nomad server to elect itself", func() error {
		if leader, err := nc.Status().Leader(); err != nil || leader == "" {
			return fmt.Errorf("no leader yet (%v)", err)
		}
		return nomadIsOurs(nc, nomadAgent("server", dir, sp, c.ConsulAddr).DataDir)
	}); err != nil {
		return err
	}

	pluginDir := filepath.Join(dir, "plugins")
	if err := installPlugins(pluginDir, c.cfg.Bin.Plugin, c.cfg.Bin.Driver); err != nil {
		return err
	}
	// The clients' task driver reports to the allocator, started later on this port.
	port, err := freePort()
	if err != nil {
		return err
	}
	c.allocatorPort = port
	serverRPC := fmt.Sprintf("127.0.0.1:%d", sp.RPC)
	var clients []*agentrun.Process
	for _, gc := range c.cfg.Clients {
		p, err := nomadPortsFor(0)
		if err != nil {
			return err
		}
		progress(fmt.Sprintf("Starting Nomad client %s: %d x %s (node pool %q)", gc.Name, gc.Count, gc.Model, NodePool))
		proc, err := c.launchNomad("nomad-client-"+gc.Name, clientConfig(dir, pluginDir, p, c.ConsulAddr, serverRPC, NodePool, fmt.Sprintf("http://127.0.0.1:%d", c.allocatorPort), gc))
		if err != nil {
			return err
		}
		clients = append(clients, proc)
	}
	hosts, err := c.startAllocatorHosts(cp, serverRPC, pluginDir)
	if err != nil {
		return err
	}
	progress("Waiting for the clients to register their fake GPUs")
	return waitFor(ctx, clientTimeout, append(clients, hosts...), "the clients to be ready with their GPUs", func() error {
		return clientsReady(nc, append(append([]GPUClient(nil), c.cfg.Clients...), AllocatorHosts...))
	})
}

// startAllocatorHosts starts, for each of AllocatorHosts, a Consul client
// agent that joins the dev agent and a Nomad client in the default node
// pool that registers its services there. It returns the programs started.
func (c *Cluster) startAllocatorHosts(cp agentrun.ConsulPorts, serverRPC, pluginDir string) ([]*agentrun.Process, error) {
	var procs []*agentrun.Process
	for _, h := range AllocatorHosts {
		p, err := agentrun.FreePorts(3)
		if err != nil {
			return nil, err
		}
		ports := agentrun.ConsulPorts{HTTP: p[0], SerfLAN: p[1], Server: p[2]}
		agent, err := c.launch("consul-"+h.Name, c.cfg.Bin.Consul, consulClientArgs(c.cfg.Dir, h.Name, ports, fmt.Sprintf("127.0.0.1:%d", cp.SerfLAN)), nil)
		if err != nil {
			return nil, err
		}
		np, err := nomadPortsFor(0)
		if err != nil {
			return nil, err
		}
		consulAddr := fmt.Sprintf("127.0.0.1:%d", ports.HTTP)
		c.cfg.Progress(fmt.Sprintf("Starting Nomad client %s for the allocator (node pool \"default\", Consul agent %s)", h.Name, consulAddr))
		proc, err := c.launchNomad("nomad-client-"+h.Name, clientConfig(c.cfg.Dir, pluginDir, np, consulAddr, serverRPC, "", fmt.Sprintf("http://127.0.0.1:%d", c.allocatorPort), h))
		if err != nil {
			return nil, err
		}
		procs = append(procs, agent, proc)
	}
	return procs, nil
}

// nomadIsOurs returns nil when the Nomad agent nc reaches keeps its data in dataDir: the
// server just started, not another program's agent on a port taken between the choice and
// the bind.
func nomadIsOurs(nc *nomad.Client, dataDir string) error {
	self, err := nc.Agent().Self()
	if err != nil {
		return fmt.Errorf("reading the Nomad agent: %w", err)
	}
	if got, _ := self.Config["DataDir"].(string); got != dataDir {
		return fmt.Errorf("the Nomad agent at %s is another one (its data in %q, not %q)", nc.Address(), got, dataDir)
	}
	return nil
}

// clientsReady checks that every client is a ready node with devices.
func clientsReady(nc *nomad.Client, clients []GPUClient) error {
	nodes, _, err := nc.Nodes().List(&nomad.QueryOptions{Params: map[string]string{"resources": "true"}})
	if err != nil {
		return err
	}
	byName := map[string]*nomad.NodeListStub{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	for _, gc := range clients {
		n := byName["fft-dev-"+gc.Name]
		if n == nil || n.Status != nomad.NodeStatusReady {
			return fmt.Errorf("client %s is not ready yet", gc.Name)
		}
		if n.NodeResources == nil || len(n.NodeResources.Devices) == 0 {
			return fmt.Errorf("client %s has no GPUs yet", gc.Name)
		}
	}
	return nil
}

// Dir is the cluster's state folder.
func (c *Cluster) Dir() string { return c.cfg.Dir }

// Binaries are the programs the cluster runs, as Start found them.
func (c *Cluster) Binaries() Binaries { return c.cfg.Bin }

// Logs lists the log file of every program started, by name.
func (c *Cluster) Logs() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]string, len(c.procs))
	for _, p := range c.procs {
		out[p.Name] = p.LogPath
	}
	return out
}

// Tail returns the last n lines of a program's log, by name.
func (c *Cluster) Tail(name string, n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		if p.Name == name {
			return p.Tail(n)
		}
	}
	return ""
}

// Exited receives the name of each program that ends before Stop.
func (c *Cluster) Exited() <-chan string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.exited
}

// Stop stops everything the cluster started, last started first: SIGINT,
// then SIGKILL to its process group after a grace period or as soon as ctx
// ends. Then it kills what the Nomad clients left running (executors and
// tasks), detaches what they left mounted, and removes the state folder
// if Config.RemoveDir says so.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	c.stopped = true
	proxy := c.proxy
	c.mu.Unlock()
	if proxy != nil {
		_ = proxy.Close()
	}
	err := c.stopPrograms(ctx)
	if c.cfg.RemoveDir {
		if rerr := os.RemoveAll(c.cfg.Dir); rerr != nil {
			err = errors.Join(err, fmt.Errorf("removing the state folder: %w", rerr))
		}
	}
	return err
}

// stopPrograms stops every program started, last started first; then it kills what the Nomad
// clients left running and detaches what they left mounted.
func (c *Cluster) stopPrograms(ctx context.Context) error {
	c.mu.Lock()
	procs := append([]*agentrun.Process(nil), c.procs...)
	c.mu.Unlock()
	for k := len(procs) - 1; k >= 0; k-- {
		c.cfg.Progress("Stopping " + procs[k].Name)
		procs[k].Stop(ctx, stopGrace)
	}
	// Orphans may need a moment to appear in /proc as ours after their
	// client's exit; a second pass catches executors that spawned late.
	killed := 0
	for pass := 0; pass < 3; pass++ {
		n := agentrun.KillDescendantsUnder(c.cfg.Dir)
		if n == 0 {
			break
		}
		killed += n
		time.Sleep(100 * time.Millisecond)
	}
	if killed > 0 {
		c.cfg.Progress(fmt.Sprintf("Killed %d processes the Nomad clients left running (executors, tasks)", killed))
	}
	return agentrun.UnmountUnder(c.cfg.Dir)
}

// launch starts a program and watches for its unexpected end.
func (c *Cluster) launch(name, bin string, args, env []string) (*agentrun.Process, error) {
	return c.watch(agentrun.Start(c.cfg.Dir, name, bin, args, env))
}

// launchNomad writes a Nomad agent's configuration and starts it.
func (c *Cluster) launchNomad(name, hcl string) (*agentrun.Process, error) {
	return c.watch(agentrun.StartNomad(c.cfg.Dir, name, c.cfg.Bin.Nomad, hcl))
}

// watch records a program just started, so that Stop stops it, and reports
// its end on Exited unless Stop caused it.
func (c *Cluster) watch(p *agentrun.Process, err error) (*agentrun.Process, error) {
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.procs = append(c.procs, p)
	exited := c.exited
	c.mu.Unlock()
	go func() {
		<-p.Done()
		c.mu.Lock()
		stopped := c.stopped
		c.mu.Unlock()
		if !stopped {
			exited <- p.Name // buffered: a slot per program
		}
	}()
	return p, nil
}

// installPlugins copies the device plugin and the task driver into a folder
// of their own under their plugin blocks' names, as the clients' plugin_dir
// wants them.
func installPlugins(dir, plugin, driver string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, b := range []struct{ bin, name string }{{plugin, agentrun.PluginName}, {driver, DriverName}} {
		data, err := os.ReadFile(b.bin)
		if err != nil {
			return fmt.Errorf("reading %s: %w", b.name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, b.name), data, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// exitError is a program that ended while the cluster waited for it.
type exitError struct{ p *agentrun.Process }

func (e *exitError) Error() string {
	return fmt.Sprintf("%s exited; the end of its log (%s):\n%s", e.p.Name, e.p.LogPath, e.p.Tail(30))
}

// waitFor calls ready every pollInterval until it returns nil, failing when
// one of procs exits, timeout passes or ctx ends. The error carries the end
// of the log of the program that exited, or of each program waited for:
// the state folder may be removed before anyone reads it.
func waitFor(ctx context.Context, timeout time.Duration, procs []*agentrun.Process, what string, ready func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		for _, p := range procs {
			if p.Exited() {
				return fmt.Errorf("waiting for %s: %w", what, &exitError{p})
			}
		}
		err := ready()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("waiting for %s: %v (last: %v)", what, ctx.Err(), err)
			for _, p := range procs {
				msg += fmt.Sprintf("\nthe end of %s's log (%s):\n%s", p.Name, p.LogPath, p.Tail(15))
			}
			return errors.New(msg)
		case <-time.After(pollInterval):
		}
	}
}

// consulPortsFor picks Consul's ports: the standard HTTP port when free.
func consulPortsFor() (agentrun.ConsulPorts, error) {
	httpPort, err := portOr(standardConsulHTTP)
	if err != nil {
		return agentrun.ConsulPorts{}, err
	}
	p, err := agentrun.FreePorts(3)
	if err != nil {
		return agentrun.ConsulPorts{}, err
	}
	return agentrun.ConsulPorts{HTTP: httpPort, Server: p[0], SerfLAN: p[1], SerfWAN: p[2]}, nil
}

// nomadPortsFor picks a Nomad agent's ports: HTTP on preferred when it is
// not 0 and free.
func nomadPortsFor(preferred int) (agentrun.NomadPorts, error) {
	httpPort, err := portOr(preferred)
	if err != nil {
		return agentrun.NomadPorts{}, err
	}
	p, err := agentrun.FreePorts(2)
	if err != nil {
		return agentrun.NomadPorts{}, err
	}
	return agentrun.NomadPorts{HTTP: httpPort, RPC: p[0], Serf: p[1]}, nil
}

// portOr returns preferred when it is not 0 and free on 127.0.0.1, else a
// free port.
func portOr(preferred int) (int, error) {
	if preferred != 0 {
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", preferred)); err == nil {
			l.Close()
			return preferred, nil
		}
	}
	return freePort()
}

func freePort() (int, error) {
	p, err := agentrun.FreePorts(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}
