package devcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"time"

	consul "github.com/hashicorp/consul/api"
	nomad "github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/allocator/consulstore"
	"github.com/nomad-fft/nomad-fft/e2e/agentrun"
	"github.com/nomad-fft/nomad-fft/jobspecs"
)

// The allocator's job, its Consul service and its Nomad Variable, as
// jobspecs/fft-allocator.nomad.hcl names them.
const (
	AllocatorJob     = "fft-allocator"
	AllocatorService = "fft-allocator"
	allocatorVarPath = "nomad/jobs/fft-allocator"
)

// allocatorTimeout bounds the wait for the job's placement, a leader and
// its first passing check (every 10s, by the jobspec).
const allocatorTimeout = 3 * time.Minute

// StartAllocator runs fft-allocator the way operators do: it stores the
// job's tokens in its Nomad Variable (empty: the dev cluster has no ACLs),
// registers jobspecs/fft-allocator.nomad.hcl with rounds of the given
// length, the local binary under raw_exec, and waits until one replica
// holds the leader lock and its Consul service passes its health check.
// AllocatorAddr is then a proxy to the leader (any passing replica while
// none leads): the clients' task drivers report progress there, since the
// replicas' ports are Nomad's choice.
func (c *Cluster) StartAllocator(ctx context.Context, round time.Duration) error {
	nc, err := nomad.NewClient(&nomad.Config{Address: c.NomadAddr})
	if err != nil {
		return err
	}
	cc, err := consul.NewClient(&consul.Config{Address: c.ConsulAddr})
	if err != nil {
		return err
	}
	store := consulstore.New(cc, consulstore.DefaultPrefix)
	if err := c.startProxy(func(ctx context.Context) (string, error) { return allocatorURL(ctx, store, cc) }); err != nil {
		return err
	}
	wo := (&nomad.WriteOptions{}).WithContext(ctx)
	if _, _, err := nc.Variables().Create(&nomad.Variable{Path: allocatorVarPath,
		Items: nomad.VariableItems{"nomad_token": "", "consul_token": ""}}, wo); err != nil {
		return fmt.Errorf("writing the Nomad Variable %q with the allocator's tokens: %w", allocatorVarPath, err)
	}
	job, err := c.allocatorJob(nc, round)
	if err != nil {
		return err
	}
	if _, _, err := nc.Jobs().Register(job, wo); err != nil {
		return fmt.Errorf("registering job %q: %w", AllocatorJob, err)
	}
	c.cfg.Progress(fmt.Sprintf("Registered job %s from jobspecs/%s: %d replicas on distinct hosts, rounds of %s; waiting for a leader healthy in Consul",
		AllocatorJob, jobspecs.Allocator, *job.TaskGroups[0].Count, round))
	var leader string
	err = waitFor(ctx, allocatorTimeout, c.hostProcs(), "an fft-allocator replica to lead and pass its Consul check", func() error {
		leader, err = healthyLeader(ctx, store, cc)
		if err != nil {
			return fmt.Errorf("%w; allocations: %s", err, allocSummary(nc))
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.cfg.Progress(fmt.Sprintf("fft-allocator allocation %s leads (status via %s/v1/status)", shortAlloc(leader), c.AllocatorAddr))
	return nil
}

// allocatorJob parses the embedded jobspec with the dev cluster's variables.
func (c *Cluster) allocatorJob(nc *nomad.Client, round time.Duration) (*nomad.Job, error) {
	src, err := jobspecs.FS.ReadFile(jobspecs.Allocator)
	if err != nil {
		return nil, err
	}
	// No ACLs, so Nomad could verify no task's identity nor say what a
	// token may read: the progress endpoint takes every report and the
	// status shows every job, as on any cluster without ACLs. The shortest
	// lease makes a failover quick.
	// The default namespace: without ACLs a namespace keeps no job's variables from another.
	vars := fmt.Sprintf(`driver = "raw_exec"
namespace = "default"
command = %s
nomad_addr = %s
consul_addr = %s
consul_prefix = %s
round = %s
extra_args = ["-progress-auth", "none", "-read-auth", "none", "-leader-ttl", %s]
`, hclQuote(c.cfg.Bin.Allocator), hclQuote(c.NomadAddr), hclQuote(c.ConsulAddr), hclQuote(consulstore.DefaultPrefix),
		hclQuote(round.String()), hclQuote(consulstore.MinLeaderTTL.String()))
	job, err := nc.Jobs().ParseHCLOpts(&nomad.JobsParseRequest{JobHCL: string(src), Variables: vars, Canonicalize: true})
	if err != nil {
		return nil, fmt.Errorf("parsing jobspecs/%s with Nomad's API: %w", jobspecs.Allocator, err)
	}
	if len(job.TaskGroups) != 1 || job.TaskGroups[0].Count == nil {
		return nil, fmt.Errorf("jobspecs/%s: expected one task group with a count", jobspecs.Allocator)
	}
	return job, nil
}

// hostProcs are the programs of the allocator hosts, whose exit ends a wait
// for the allocator.
func (c *Cluster) hostProcs() []*agentrun.Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*agentrun.Process
	for _, p := range c.procs {
		for _, h := range AllocatorHosts {
			if strings.HasSuffix(p.Name, "-"+h.Name) {
				out = append(out, p)
			}
		}
	}
	return out
}

// startProxy serves AllocatorAddr, forwarding each request to the replica
// target names at the time.
func (c *Cluster) startProxy(target func(context.Context) (string, error)) error {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", c.allocatorPort))
	if err != nil {
		return fmt.Errorf("listening on the allocator's dev address: %w", err)
	}
	c.AllocatorAddr = "http://" + l.Addr().String()
	srv := &http.Server{Handler: proxyHandler(target), ReadHeaderTimeout: 10 * time.Second}
	c.mu.Lock()
	c.proxy = srv
	c.mu.Unlock()
	go func() { _ = srv.Serve(l) }()
	return nil
}

// proxyHandler forwards requests to target's answer, or answers 503 when
// no replica is found (the task drivers retry).
func proxyHandler(target func(context.Context) (string, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr, err := target(r.Context())
		if err != nil {
			http.Error(w, "no fft-allocator replica to forward to: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		u, err := url.Parse(addr)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		p := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.SetXForwarded()
		}}
		p.ServeHTTP(w, r)
	})
}

// instance is one replica's Consul service entry.
type instance struct {
	ID, Addr string
	Passing  bool
}

// instances lists the fft-allocator service's replicas in Consul.
func instances(ctx context.Context, cc *consul.Client) ([]instance, error) {
	entries, _, err := cc.Health().Service(AllocatorService, "", false, (&consul.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("reading service %q from Consul: %w", AllocatorService, err)
	}
	var out []instance
	for _, e := range entries {
		host := e.Service.Address
		if host == "" {
			host = e.Node.Address
		}
		out = append(out, instance{ID: e.Service.ID, Addr: fmt.Sprintf("http://%s:%d", host, e.Service.Port),
			Passing: e.Checks.AggregatedStatus() == consul.HealthPassing})
	}
	return out, nil
}

// healthyLeader returns the lock holder's ID (its allocation ID) once its
// service instance passes its check.
func healthyLeader(ctx context.Context, store *consulstore.Store, cc *consul.Client) (string, error) {
	id, err := store.Leader(ctx)
	if err != nil {
		return "", err
	}
	if id == "" {
		return "", errors.New("no replica holds the leader lock yet")
	}
	insts, err := instances(ctx, cc)
	if err != nil {
		return "", err
	}
	for _, in := range insts {
		// Nomad's service IDs hold the allocation ID.
		if strings.Contains(in.ID, id) && in.Passing {
			return id, nil
		}
	}
	return "", fmt.Errorf("leader %s has no passing service instance yet (instances: %v)", id, insts)
}

// allocatorURL is the leader's address, else a passing replica's: a
// standby takes progress reports too.
func allocatorURL(ctx context.Context, store *consulstore.Store, cc *consul.Client) (string, error) {
	insts, err := instances(ctx, cc)
	if err != nil {
		return "", err
	}
	if id, err := store.Leader(ctx); err == nil && id != "" {
		for _, in := range insts {
			if strings.Contains(in.ID, id) {
				return in.Addr, nil
			}
		}
	}
	for _, in := range insts {
		if in.Passing {
			return in.Addr, nil
		}
	}
	return "", fmt.Errorf("service %q has no passing instance", AllocatorService)
}

// allocSummary lists the job's allocations and their states, for a wait
// that fails.
func allocSummary(nc *nomad.Client) string {
	stubs, _, err := nc.Jobs().Allocations(AllocatorJob, true, nil)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, a := range stubs {
		s := fmt.Sprintf("%s on %s %s", shortAlloc(a.ID), a.NodeName, a.ClientStatus)
		for task, ts := range a.TaskStates {
			if n := len(ts.Events); n > 0 {
				s += fmt.Sprintf(" (%s: %s %s)", task, ts.Events[n-1].Type, ts.Events[n-1].DisplayMessage)
			}
		}
		out = append(out, s)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "none yet"
	}
	return strings.Join(out, "; ")
}

// shortAlloc is an allocation ID's first 8 characters, as Nomad shows it.
func shortAlloc(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
