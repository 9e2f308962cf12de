package nomadapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/allocator/jobid"
	"github.com/nomad-fft/nomad-fft/allocator/live"
)

var _ live.TaskVerifier = (*IdentityVerifier)(nil)

// IdentityVerifier verifies a task's Nomad workload identity (the JWT that
// `identity { env = true }` puts in the task's NOMAD_TOKEN) by asking Nomad.
// Nomad 1.6.1 publishes no key to check the signature with, but it accepts
// the token wherever a task may act: with the token, the verifier reads
// the job's own variable path nomad/jobs/<job_id> in its namespace, which
// Nomad lets a workload identity read only for its own job, and only after
// checking the signature and that the allocation still runs. The claims
// (read from the token) must name that job. That proof holds only with
// Nomad ACLs on: without them Nomad checks no token, so the verifier
// refuses every token rather than trust an unchecked one.
type IdentityVerifier struct {
	nomad *api.Client
	// aclTTL is how long the answer to "are Nomad's ACLs on?" is kept.
	aclTTL time.Duration

	mu       sync.Mutex
	aclOn    bool
	aclAsked time.Time
}

// NewIdentityVerifier returns a verifier over the allocator's Nomad client.
func NewIdentityVerifier(nomad *api.Client) *IdentityVerifier {
	return &IdentityVerifier{nomad: nomad, aclTTL: time.Minute}
}

// claims are the parts of a Nomad 1.6.1 workload identity the allocator
// reads (nomad/structs.IdentityClaims).
type claims struct {
	Namespace string `json:"nomad_namespace"`
	JobID     string `json:"nomad_job_id"`
	AllocID   string `json:"nomad_allocation_id"`
	Task      string `json:"nomad_task"`
}

// parseClaims reads a JWT's payload without checking its signature (Nomad
// does that). It fails for anything that is not a workload identity.
func parseClaims(token string) (claims, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return claims{}, fmt.Errorf("%w: not a workload identity (a JWT of three dot-separated parts); an ACL token is not accepted", live.ErrTokenRefused)
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return claims{}, fmt.Errorf("%w: JWT payload is not base64url: %v", live.ErrTokenRefused, err)
	}
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return claims{}, fmt.Errorf("%w: JWT payload is not JSON: %v", live.ErrTokenRefused, err)
	}
	if c.Namespace == "" || c.JobID == "" || c.AllocID == "" {
		return claims{}, fmt.Errorf("%w: JWT lacks the nomad_namespace, nomad_job_id or nomad_allocation_id claim", live.ErrTokenRefused)
	}
	// Unverified yet: they name the variable path the verifier asks Nomad about, so they
	// must be IDs Nomad could have issued.
	if err := jobid.Check(c.Namespace, c.JobID); err != nil {
		return claims{}, fmt.Errorf("%w: JWT claims %v", live.ErrTokenRefused, err)
	}
	return c, nil
}

// VerifyTask returns the task the token belongs to, or an error wrapping
// live.ErrTokenRefused when it proves nothing.
func (v *IdentityVerifier) VerifyTask(ctx context.Context, token string) (live.TaskIdentity, error) {
	c, err := parseClaims(token)
	if err != nil {
		return live.TaskIdentity{}, err
	}
	on, err := v.aclEnabled(ctx)
	if err != nil {
		return live.TaskIdentity{}, err
	}
	if !on {
		return live.TaskIdentity{}, fmt.Errorf("%w: Nomad's ACLs are disabled, so Nomad verifies no token; enable them (acl { enabled = true }) or run the allocator with -progress-auth=none", live.ErrTokenRefused)
	}
	q := (&api.QueryOptions{Namespace: c.Namespace, AuthToken: token}).WithContext(ctx)
	_, _, err = v.nomad.Variables().Peek("nomad/jobs/"+c.JobID, q)
	var re api.UnexpectedResponseError
	switch {
	case err == nil:
		// Read (or absent: Peek answers nil): the token may read the job's
		// own path.
	case errors.As(err, &re) && (re.StatusCode() == 403 || re.StatusCode() == 401):
		return live.TaskIdentity{}, fmt.Errorf("%w: Nomad refused it (%d): forged, or its allocation is no longer running", live.ErrTokenRefused, re.StatusCode())
	default:
		return live.TaskIdentity{}, fmt.Errorf("asking Nomad about the token of allocation %s: %w", c.AllocID, err)
	}
	return live.TaskIdentity{Namespace: c.Namespace, JobID: c.JobID, AllocID: c.AllocID, Task: c.Task}, nil
}

// aclEnabled asks Nomad, at most once per aclTTL, whether its ACLs are on.
func (v *IdentityVerifier) aclEnabled(ctx context.Context) (bool, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.aclAsked.IsZero() && time.Since(v.aclAsked) < v.aclTTL {
		return v.aclOn, nil
	}
	_, _, err := v.nomad.ACLTokens().Self((&api.QueryOptions{}).WithContext(ctx))
	var re api.UnexpectedResponseError
	switch {
	case err == nil:
		v.aclOn = true
	case errors.As(err, &re) && strings.Contains(re.Body(), "ACL support disabled"):
		v.aclOn = false
	case errors.As(err, &re) && (re.StatusCode() == 403 || re.StatusCode() == 401 || re.StatusCode() == 404):
		// ACLs are on; the allocator's own token may not read itself.
		v.aclOn = true
	default:
		return false, fmt.Errorf("asking Nomad whether its ACLs are enabled: %w", err)
	}
	v.aclAsked = time.Now()
	return v.aclOn, nil
}
