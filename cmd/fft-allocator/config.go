package main

import (
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsimple"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/solver"
	"github.com/nomad-fft/nomad-fft/cmd/internal/connect"
)

// fileConfig is the -config file (HCL, or JSON when the name ends in .json).
// Every setting is optional; see README.md for an example.
type fileConfig struct {
	Nomad    *connBlock   `hcl:"nomad,block"`
	Consul   *consulBlock `hcl:"consul,block"`
	Round    *string      `hcl:"round,optional"`
	HTTPAddr *string      `hcl:"http_addr,optional"`
	LogLevel *string      `hcl:"log_level,optional"`
	LogJSON  *bool        `hcl:"log_json,optional"`
	// MetricsPerJob is -metrics-per-job.
	MetricsPerJob *bool `hcl:"metrics_per_job,optional"`
	// MetricsPerJobMax is -metrics-per-job-max.
	MetricsPerJobMax *int          `hcl:"metrics_per_job_max,optional"`
	ID               *string       `hcl:"id,optional"`
	LeaderTTL        *string       `hcl:"leader_ttl,optional"`
	Engine           *engineBlock  `hcl:"engine,block"`
	Tenants          *tenantsBlock `hcl:"tenants,block"`

	// -min-round-gap and -node-pool.
	MinRoundGap *string `hcl:"min_round_gap,optional"`
	NodePool    *string `hcl:"node_pool,optional"`
	// -progress-auth and -read-auth.
	ProgressAuth *string `hcl:"progress_auth,optional"`
	ReadAuth     *string `hcl:"read_auth,optional"`
	// -audit-rounds.
	AuditRounds *int `hcl:"audit_rounds,optional"`
	// -apply-concurrency.
	ApplyConcurrency *int `hcl:"apply_concurrency,optional"`
	// -throughput-priors.
	ThroughputPriors *string `hcl:"throughput_priors,optional"`
	// The -tls-* flags: the HTTP API's own TLS.
	TLS *tlsBlock `hcl:"tls,block"`
}

// connBlock is how to reach Nomad (the nomad block) or Consul (the consul
// block, less its prefix): connect.Settings, key for key.
type connBlock struct {
	Address       *string `hcl:"address,optional"`
	Token         *string `hcl:"token,optional"`
	CACert        *string `hcl:"ca_cert,optional"`
	ClientCert    *string `hcl:"client_cert,optional"`
	ClientKey     *string `hcl:"client_key,optional"`
	TLSServerName *string `hcl:"tls_server_name,optional"`
	TLSSkipVerify *bool   `hcl:"tls_skip_verify,optional"`
}

// consulBlock is a connBlock plus the KV prefix; the rest of the block is
// decoded as a connBlock, so both blocks take the same connection keys.
type consulBlock struct {
	Prefix *string  `hcl:"prefix,optional"`
	Conn   hcl.Body `hcl:",remain"`
}

type engineBlock struct {
	Weights         *weightsBlock `hcl:"weights,block"`
	VolumeTerm      *string       `hcl:"volume_term,optional"`
	Objective       *string       `hcl:"objective,optional"`
	Debt            *string       `hcl:"debt,optional"`
	TransferGbps    *float64      `hcl:"transfer_gbps,optional"`
	RestartSeconds  *float64      `hcl:"restart_seconds,optional"`
	PricePreemption *bool         `hcl:"price_preemption,optional"`
	NodeLimit       *int          `hcl:"node_limit,optional"`
	GapTolerance    *float64      `hcl:"gap_tolerance,optional"`
	TenantWeights   *bool         `hcl:"tenant_weights,optional"`
}

// tenantsBlock is the operator's shares between tenants (loop.TenantShares).
type tenantsBlock struct {
	By           string             `hcl:"by"`
	DefaultShare *float64           `hcl:"default_share,optional"`
	Shares       map[string]float64 `hcl:"shares,optional"`
	Users        map[string]string  `hcl:"users,optional"`
}

// tenantShares reads the tenants block.
func tenantShares(path string, b *tenantsBlock) (*loop.TenantShares, error) {
	ts := &loop.TenantShares{By: loop.TenantBy(b.By), Shares: b.Shares, Users: b.Users}
	if b.DefaultShare != nil {
		ts.Default = *b.DefaultShare
	}
	if err := ts.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ts, nil
}

type weightsBlock struct {
	JCT      *float64 `hcl:"jct,optional"`
	Volume   *float64 `hcl:"volume,optional"`
	Switch   *float64 `hcl:"switch,optional"`
	Fairness *float64 `hcl:"fairness,optional"`
}

// loadConfig reads the file into f and returns the engine configuration.
// A setting whose flag was given on the command line (set) keeps the flag's
// value: flags override the file, and the file overrides the environment.
func loadConfig(path string, f *flags, set map[string]bool) (allocator.Config, error) {
	eng := allocator.DefaultConfig()
	var fc fileConfig
	if err := hclsimple.DecodeFile(path, nil, &fc); err != nil {
		return eng, fmt.Errorf("reading -config %s: %w", path, err)
	}
	str := func(flag string, dst *string, v *string) {
		if v != nil && !set[flag] {
			*dst = *v
		}
	}
	dur := func(flag, key string, dst *time.Duration, v *string) error {
		if v == nil || set[flag] {
			return nil
		}
		d, err := time.ParseDuration(*v)
		if err != nil {
			return fmt.Errorf("%s: %s = %q: expected a duration such as \"300s\"", path, key, *v)
		}
		*dst = d
		return nil
	}
	// conn copies a connection block into s; the flags are connect's,
	// named with prefix.
	conn := func(prefix string, s *connect.Settings, b *connBlock) {
		for _, x := range []struct {
			flag   string
			dst, v *string
		}{
			{"addr", &s.Address, b.Address}, {"token", &s.Token, b.Token}, {"ca-cert", &s.CACert, b.CACert},
			{"client-cert", &s.ClientCert, b.ClientCert}, {"client-key", &s.ClientKey, b.ClientKey},
			{"tls-server-name", &s.TLSServerName, b.TLSServerName},
		} {
			str(prefix+x.flag, x.dst, x.v)
		}
		if b.TLSSkipVerify != nil && !set[prefix+"tls-skip-verify"] {
			s.TLSSkipVerify = *b.TLSSkipVerify
		}
	}
	if fc.Nomad != nil {
		conn("nomad-", &f.nomad, fc.Nomad)
	}
	if fc.Consul != nil {
		var cb connBlock
		if diags := gohcl.DecodeBody(fc.Consul.Conn, nil, &cb); diags.HasErrors() {
			return eng, fmt.Errorf("reading -config %s: %w", path, diags)
		}
		conn("consul-", &f.consul, &cb)
		str("consul-prefix", &f.prefix, fc.Consul.Prefix)
	}
	str("http-addr", &f.httpAddr, fc.HTTPAddr)
	if fc.TLS != nil {
		f.listener.fromFile(path, fc.TLS, set)
	}
	str("node-pool", &f.nodePool, fc.NodePool)
	str("progress-auth", &f.progressAuth, fc.ProgressAuth)
	str("read-auth", &f.readAuth, fc.ReadAuth)
	str("throughput-priors", &f.throughputPriors, fc.ThroughputPriors)
	str("log-level", &f.logLevel, fc.LogLevel)
	str("id", &f.id, fc.ID)
	if fc.LogJSON != nil && !set["log-json"] {
		f.logJSON = *fc.LogJSON
	}
	if fc.MetricsPerJob != nil && !set["metrics-per-job"] {
		f.metricsPerJob = *fc.MetricsPerJob
	}
	if fc.MetricsPerJobMax != nil && !set["metrics-per-job-max"] {
		f.metricsPerJobMax = *fc.MetricsPerJobMax
	}
	if fc.AuditRounds != nil && !set["audit-rounds"] {
		f.auditRounds = *fc.AuditRounds
	}
	if fc.ApplyConcurrency != nil && !set["apply-concurrency"] {
		f.applyConcurrency = *fc.ApplyConcurrency
	}
	if err := dur("round", "round", &f.round, fc.Round); err != nil {
		return eng, err
	}
	if err := dur("leader-ttl", "leader_ttl", &f.leaderTTL, fc.LeaderTTL); err != nil {
		return eng, err
	}
	if err := dur("min-round-gap", "min_round_gap", &f.minRoundGap, fc.MinRoundGap); err != nil {
		return eng, err
	}
	if fc.Tenants != nil {
		ts, err := tenantShares(path, fc.Tenants)
		if err != nil {
			return eng, err
		}
		f.tenants = ts
	}
	if e := fc.Engine; e != nil {
		// num sets dst to v when v is a number in [lo, hi]: the round
		// engine's range for it (allocator/limits.go).
		num := func(key string, dst *float64, v *float64, lo, hi float64, what string) error {
			if v == nil {
				return nil
			}
			if math.IsNaN(*v) || *v < lo || *v > hi {
				return fmt.Errorf("%s: engine %s = %g: expected %s from %g to %g", path, key, *v, what, lo, hi)
			}
			*dst = *v
			return nil
		}
		if w := e.Weights; w != nil {
			for _, x := range []struct {
				key string
				dst *float64
				v   *float64
			}{
				{"weights.jct", &eng.Weights.JCT, w.JCT}, {"weights.volume", &eng.Weights.Volume, w.Volume},
				{"weights.switch", &eng.Weights.Switch, w.Switch}, {"weights.fairness", &eng.Weights.Fairness, w.Fairness},
			} {
				if err := num(x.key, x.dst, x.v, 0, allocator.MaxWeight, "a weight (0 turns the term off; default 1)"); err != nil {
					return eng, err
				}
			}
		}
		if err := num("transfer_gbps", &eng.TransferGbps, e.TransferGbps, allocator.MinTransferGbps, allocator.MaxTransferGbps, "a checkpoint transfer rate in Gbit/s (default 10)"); err != nil {
			return eng, err
		}
		if err := num("restart_seconds", &eng.RestartSeconds, e.RestartSeconds, 0, allocator.MaxRestartSeconds, "a restart time in seconds (default 30)"); err != nil {
			return eng, err
		}
		if err := engineObjective(path, &eng, e); err != nil {
			return eng, err
		}
		if v := e.PricePreemption; v != nil {
			eng.PricePreemption = *v
		}
		if v := e.TenantWeights; v != nil {
			f.tenantWeights = *v
		}
		if v := e.NodeLimit; v != nil {
			if *v < 0 {
				return eng, fmt.Errorf("%s: engine node_limit = %d: expected >= 0 (0 = the solver's default)", path, *v)
			}
			eng.NodeLimit = *v
		}
		if v := e.GapTolerance; v != nil {
			if !solver.ValidGapTolerance(*v) {
				return eng, fmt.Errorf("%s: engine gap_tolerance = %g: expected a relative gap in [0, 1), for example 1e-4 (0, the default, proves every round optimal)", path, *v)
			}
			eng.GapTolerance = *v
		}
	}
	return eng, nil
}

// engineObjective copies the engine block's objective, debt and volume_term
// into eng, checking each and that "rate" comes with objective "units".
func engineObjective(path string, eng *allocator.Config, e *engineBlock) error {
	if v := e.Objective; v != nil {
		if o := allocator.Objective(*v); o != allocator.ObjectivePaper && o != allocator.ObjectiveUnits {
			return fmt.Errorf("%s: engine objective = %q: expected \"paper\" (the default) or \"units\"", path, *v)
		}
		eng.Objective = allocator.Objective(*v)
	}
	if v := e.Debt; v != nil {
		switch allocator.Debt(*v) {
		case allocator.DebtLag, allocator.DebtLate, allocator.DebtFTF, allocator.DebtShortfall:
			eng.Debt = allocator.Debt(*v)
		default:
			return fmt.Errorf("%s: engine debt = %q: expected \"lag\", \"late\", \"ftf\" or \"shortfall\"", path, *v)
		}
	}
	if v := e.VolumeTerm; v != nil {
		switch t := allocator.VolumeTerm(*v); {
		case t == allocator.VolumeTotal, t == allocator.VolumeRemaining:
		case t == allocator.VolumeRate && eng.Objective == allocator.ObjectiveUnits:
		default:
			return fmt.Errorf("%s: engine volume_term = %q: expected \"total\" (the paper), \"remaining\", or \"rate\" with objective = \"units\"", path, *v)
		}
		eng.Volume = allocator.VolumeTerm(*v)
	}
	return nil
}
