package consulstore

import (
	"context"
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

// TokenIdentity names the Consul token the store writes with, for the audit
// log: its description and accessor ID, as Consul reads them back
// (/v1/acl/token/self). It returns false when Consul has no ACLs, where no
// write is tied to anyone.
func (s *Store) TokenIdentity(ctx context.Context) (string, bool, error) {
	tok, _, err := s.client.ACL().TokenReadSelf((&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		if strings.Contains(err.Error(), "ACL support disabled") {
			return "", false, nil
		}
		return "", false, fmt.Errorf("reading the Consul token's identity: %w", err)
	}
	id := tok.AccessorID
	if len(id) > 8 {
		id = id[:8]
	}
	if d := strings.TrimSpace(tok.Description); d != "" {
		return fmt.Sprintf("%s (Consul token %s)", d, id), true, nil
	}
	return "Consul token " + tok.AccessorID, true, nil
}
