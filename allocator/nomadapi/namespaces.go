package nomadapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/allocator/live"
)

var _ live.NamespaceReader = (*NamespaceReader)(nil)

// NamespaceReader says which namespaces a Nomad ACL token may read, by asking Nomad with
// the token: every one for a management token, else those Nomad lists for it (a namespace
// it holds any capability in). With Nomad's ACLs off Nomad checks no token, and every token
// reads every namespace.
type NamespaceReader struct {
	nomad *api.Client
	// acl answers (and caches) whether Nomad's ACLs are on.
	acl *IdentityVerifier
}

// NewNamespaceReader returns a reader over the allocator's Nomad client.
func NewNamespaceReader(nomad *api.Client) *NamespaceReader {
	return &NamespaceReader{nomad: nomad, acl: NewIdentityVerifier(nomad)}
}

// ReadableNamespaces implements live.NamespaceReader.
func (r *NamespaceReader) ReadableNamespaces(ctx context.Context, token string) (bool, []string, error) {
	on, err := r.acl.aclEnabled(ctx)
	if err != nil {
		return false, nil, err
	}
	if !on {
		return true, nil, nil
	}
	q := (&api.QueryOptions{AuthToken: token}).WithContext(ctx)
	self, _, err := r.nomad.ACLTokens().Self(q)
	var re api.UnexpectedResponseError
	switch {
	case errors.As(err, &re) && (re.StatusCode() == 401 || re.StatusCode() == 403 || re.StatusCode() == 404):
		return false, nil, fmt.Errorf("%w: Nomad does not know it as an ACL token (%d)", live.ErrTokenRefused, re.StatusCode())
	case err != nil:
		return false, nil, fmt.Errorf("asking Nomad about an ACL token: %w", err)
	}
	if self.Type == "management" {
		return true, nil, nil
	}
	list, _, err := r.nomad.Namespaces().List(q)
	if err != nil {
		return false, nil, fmt.Errorf("listing the namespaces an ACL token may read: %w", err)
	}
	names := make([]string, 0, len(list))
	for _, ns := range list {
		names = append(names, ns.Name)
	}
	return false, names, nil
}

var _ live.AllocIndexer = (*AllocIndexer)(nil)

// AllocIndexer looks up the create index of an allocation's job with the allocator's own
// token (read-job), for live.WithAllocIndexer.
type AllocIndexer struct{ nomad *api.Client }

// NewAllocIndexer returns an indexer over the allocator's Nomad client.
func NewAllocIndexer(nomad *api.Client) *AllocIndexer { return &AllocIndexer{nomad: nomad} }

// AllocJob implements live.AllocIndexer.
func (x *AllocIndexer) AllocJob(ctx context.Context, namespace, allocID string) (live.AllocJob, error) {
	a, _, err := x.nomad.Allocations().Info(allocID, (&api.QueryOptions{Namespace: namespace}).WithContext(ctx))
	var re api.UnexpectedResponseError
	if errors.As(err, &re) && re.StatusCode() == http.StatusNotFound {
		return live.AllocJob{}, fmt.Errorf("reading allocation %s: %w", allocID, live.ErrAllocUnknown)
	}
	if err != nil {
		return live.AllocJob{}, fmt.Errorf("reading allocation %s: %w", allocID, needs(err, capReadJob))
	}
	if a.Job == nil || a.Job.CreateIndex == nil || a.Job.ID == nil {
		return live.AllocJob{}, fmt.Errorf("allocation %s carries no job", allocID)
	}
	if a.Namespace != namespace {
		// Nomad answers an allocation by its ID whatever namespace is asked.
		return live.AllocJob{}, fmt.Errorf("reading allocation %s in namespace %q: %w", allocID, namespace, live.ErrAllocUnknown)
	}
	return live.AllocJob{JobID: *a.Job.ID, CreateIndex: *a.Job.CreateIndex}, nil
}
