package nomadapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/hashicorp/nomad/api"
)

// The Nomad ACL capabilities the allocator's calls need, as
// cmd/fft-allocator/acl/nomad-policy.hcl grants them.
const (
	capListJobs       = `namespace capability "list-jobs"`
	capReadJob        = `namespace capability "read-job"`
	capSubmitJob      = `namespace capability "submit-job"`
	capAllocLifecycle = `namespace capability "alloc-lifecycle"`
	capNodeRead       = `node policy "read"`
)

// needs adds to an error that Nomad answered 403 the capability the call
// needed, so an operator knows what the token lacks. Other errors pass as
// they are.
func needs(err error, capability string) error {
	var re api.UnexpectedResponseError
	if errors.As(err, &re) && re.StatusCode() == http.StatusForbidden {
		return fmt.Errorf("%w: the allocator's Nomad token lacks %s (grant cmd/fft-allocator/acl/nomad-policy.hcl)", err, capability)
	}
	return err
}
