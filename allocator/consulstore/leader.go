package consulstore

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/consul/api"
)

// keyLeader is the leader lock below the prefix; its value names the holder.
const keyLeader = "leader"

// MinLeaderTTL is the shortest session TTL Consul accepts.
const MinLeaderTTL = 10 * time.Second

// leaderLockDelay is how long Consul keeps the lock from a new holder after
// the old holder's session ends: short, because rounds are check-and-set
// against the ledger, so a late write of a deposed leader fails anyway.
const leaderLockDelay = time.Second

// Lead runs `run` while this replica (named id) holds the leader lock, and
// waits for the lock while another replica holds it. The lock's session
// has the given TTL: a replica that dies without releasing it loses the
// lock within the TTL, and a standby takes over. run's context is
// cancelled when the lock is lost; Lead then waits for it again. Lead
// returns when ctx ends.
func (s *Store) Lead(ctx context.Context, id string, ttl time.Duration, run func(context.Context)) error {
	if ttl < MinLeaderTTL {
		ttl = MinLeaderTTL
	}
	for ctx.Err() == nil {
		lock, err := s.client.LockOpts(&api.LockOptions{
			Key: s.prefix + keyLeader, Value: []byte(id), SessionName: "fft-allocator " + id,
			SessionTTL: ttl.String(), LockDelay: leaderLockDelay, MonitorRetries: 3,
		})
		if err != nil {
			return fmt.Errorf("preparing the leader lock %s%s: %w", s.prefix, keyLeader, err)
		}
		lost, err := lock.Lock(ctx.Done())
		if err != nil {
			if Denied(err) {
				err = fmt.Errorf("%w: the Consul token lacks session write on the node of the Consul agent it talks to, or key_prefix %q write (grant cmd/fft-allocator/acl/consul-policy.hcl, its session block naming that node)", err, s.prefix)
			}
			s.logf("waiting for the leader lock failed; retrying", "error", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		if lost == nil { // ctx ended while waiting
			break
		}
		s.logf("holding the leader lock", "id", id)
		lctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-lost:
				s.logf("lost the leader lock", "id", id)
				cancel()
			case <-lctx.Done():
			}
		}()
		run(lctx)
		cancel()
		_ = lock.Unlock()
	}
	return ctx.Err()
}

// Leader returns the id of the replica holding the lock, "" if none.
func (s *Store) Leader(ctx context.Context) (string, error) {
	pair, _, err := s.kv.Get(s.prefix+keyLeader, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("reading %s%s: %w", s.prefix, keyLeader, err)
	}
	if pair == nil || pair.Session == "" {
		return "", nil
	}
	return string(pair.Value), nil
}
