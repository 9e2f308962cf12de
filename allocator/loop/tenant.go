package loop

import (
	"fmt"
	"math"
	"sort"

	"github.com/nomad-fft/nomad-fft/fairness"
)

// TenantBy says what makes a job's tenant.
type TenantBy string

// The tenants a job can belong to.
const (
	// TenantByUser: the job's fft.user when the operator's Users mapping
	// lets the job's namespace use that name, else the job's namespace. A
	// job writes its own fft.user, so a name nobody mapped is a label and
	// makes no tenant: a user who labels her jobs mallory, mallory-2 and
	// mallory-3 stays one tenant, her namespace (issue 20).
	TenantByUser TenantBy = "user"
	// TenantByNamespace: the job's Nomad namespace.
	TenantByNamespace TenantBy = "namespace"
)

// TenantShares are the operator's shares between tenants (Slurm's
// fairshare, Kueue's cohorts): the fairness reference goes to tenants first,
// tenant t getting Share(t) / sum of the shares of the tenants with active
// jobs, and each tenant's part is split among its jobs (by fft.weight when
// tenant weights are on, else equally). A user who submits ten jobs gets
// one share, not ten. Only the operator sets them (the allocator's
// configuration), never a job's author.
type TenantShares struct {
	By TenantBy `json:"by"`
	// Shares by tenant name; a tenant not named gets Default (1 if 0).
	Shares  map[string]float64 `json:"shares,omitempty"`
	Default float64            `json:"default,omitempty"`
	// Users maps an fft.user name to the one namespace whose jobs may
	// claim it (By user only). The operator writes it; Nomad's ACLs say
	// who may submit into a namespace, so a job cannot choose its tenant.
	Users map[string]string `json:"users,omitempty"`
}

// Validate checks the shares.
func (s *TenantShares) Validate() error {
	if s.By != TenantByUser && s.By != TenantByNamespace {
		return fmt.Errorf("tenants by = %q: expected %q or %q", s.By, TenantByUser, TenantByNamespace)
	}
	if s.Default < 0 || math.IsNaN(s.Default) || math.IsInf(s.Default, 0) {
		return fmt.Errorf("tenants default_share = %g: expected a finite number > 0 (or 0 for 1)", s.Default)
	}
	for u, ns := range s.Users {
		if s.By != TenantByUser {
			return fmt.Errorf("tenants users: given with by = %q: the mapping names fft.user values, so it needs by = %q", s.By, TenantByUser)
		}
		if u == "" || ns == "" {
			return fmt.Errorf("tenants users %q = %q: expected a user name mapped to a namespace", u, ns)
		}
	}
	for t, v := range s.Shares {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("tenants share %q = %g: expected a finite number > 0", t, v)
		}
	}
	return nil
}

// share is tenant t's share.
func (s *TenantShares) share(t string) float64 {
	if v, ok := s.Shares[t]; ok {
		return v
	}
	if s.Default > 0 {
		return s.Default
	}
	return 1
}

// tenantOf names job j's tenant: its namespace, or with By user an
// fft.user the operator mapped to that namespace.
func (s *TenantShares) tenantOf(j *Job) string {
	if s.By == TenantByUser && j.Spec.User != "" && s.Users[j.Spec.User] == j.Namespace {
		return j.Spec.User
	}
	return j.Namespace
}

// tenantOf is job j's tenant for anything that must not trust a label: the
// operator's tenant when shares are on, else the job's namespace.
func tenantOf(s *TenantShares, j *Job) string {
	if s != nil {
		return s.tenantOf(j)
	}
	return j.Namespace
}

// TenantAudit is one tenant's line in a round record.
type TenantAudit struct {
	Tenant string `json:"tenant"`
	// Share is the operator's share; Fraction the tenant's part of the
	// fairness reference this round (its share over the active tenants').
	Share    float64 `json:"share"`
	Fraction float64 `json:"fraction"`
	Jobs     int     `json:"jobs"`
}

// weigh sets each active job's fairness weight to its tenant's share split
// among the tenant's active jobs: w_j = Share(t) * v_j / sum_{k in t} v_k,
// where v is the job's own weight (1 unless tenant weights are on). The
// jobs' weights then sum to the active tenants' shares, so tenant t's jobs
// together get Share(t) / sum of the shares. With every share equal and one
// job per tenant each job's weight is the same and the reference is the
// paper's 1/|A(t)|. It returns the tenants' lines, sorted.
func (s *TenantShares) weigh(active []fairness.Job, tenantOf map[string]string) []TenantAudit {
	own := func(j fairness.Job) float64 {
		if j.Weight > 0 {
			return j.Weight
		}
		return 1
	}
	sum := map[string]float64{}
	count := map[string]int{}
	for _, j := range active {
		sum[tenantOf[j.ID]] += own(j)
		count[tenantOf[j.ID]]++
	}
	total := 0.0
	for t := range sum {
		total += s.share(t)
	}
	for k := range active {
		t := tenantOf[active[k].ID]
		active[k].Weight = s.share(t) * own(active[k]) / sum[t]
	}
	out := make([]TenantAudit, 0, len(sum))
	for t := range sum {
		out = append(out, TenantAudit{Tenant: t, Share: s.share(t), Fraction: s.share(t) / total, Jobs: count[t]})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Tenant < out[b].Tenant })
	return out
}
