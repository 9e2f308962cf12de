package consulstore

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/hashicorp/consul/api"
)

// Denied reports whether Consul refused a call for want of an ACL
// permission: an HTTP 403, or a transaction operation refused with
// "Permission denied".
func Denied(err error) bool {
	var se api.StatusError
	if errors.As(err, &se) && se.Code == http.StatusForbidden {
		return true
	}
	return err != nil && strings.Contains(err.Error(), "Permission denied")
}

// needs adds to a refused call the permission the allocator's Consul token
// lacks (cmd/fft-allocator/acl/consul-policy.hcl grants it). Other errors
// pass as they are.
func (s *Store) needs(err error, policy string) error {
	if !Denied(err) {
		return err
	}
	return fmt.Errorf("%w: the Consul token lacks key_prefix %q policy %q (grant cmd/fft-allocator/acl/consul-policy.hcl)", err, s.prefix, policy)
}
