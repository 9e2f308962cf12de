package consulstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
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

// lockSettle is how long taking the lock must go on without an error before Lead counts this
// replica as waiting behind a holder: a refusal or an unreachable Consul answers sooner.
const lockSettle = 3 * time.Second

// WithLockHealth sets f to hear whether this replica can take the leader lock, once per
// change: an error (with its fix) when taking it fails for another reason than a replica
// holding it, that is Consul refuses the token (at once) or does not answer for longer than
// the lock's TTL; nil once it holds the lock or waits behind a holder again. A replica that
// only waits is healthy. It returns the store.
func (s *Store) WithLockHealth(f func(error)) *Store {
	s.lockHealth = f
	return s
}

// Lead runs `run` while this replica (named id) holds the leader lock, and
// waits for the lock while another replica holds it. The lock's session
// has the given TTL: a replica that dies without releasing it loses the
// lock within the TTL, and a standby takes over. run's context is
// cancelled when the lock is lost; Lead then waits for it again. Lead
// returns when ctx ends. A failure to take the lock is logged once per
// change and told to WithLockHealth's function.
func (s *Store) Lead(ctx context.Context, id string, ttl time.Duration, run func(context.Context)) error {
	if ttl < MinLeaderTTL {
		ttl = MinLeaderTTL
	}
	h := &lockHealth{report: s.lockHealth, ttl: ttl, now: time.Now}
	for ctx.Err() == nil {
		lock, err := s.client.LockOpts(&api.LockOptions{
			Key: s.prefix + keyLeader, Value: []byte(id), SessionName: "fft-allocator " + id,
			SessionTTL: ttl.String(), LockDelay: leaderLockDelay, MonitorRetries: 3,
		})
		if err != nil {
			return fmt.Errorf("preparing the leader lock %s%s: %w", s.prefix, keyLeader, err)
		}
		attempt := h.try()
		settled := time.AfterFunc(lockSettle, func() {
			// Still taking the lock: it waits behind a holder. Consul answering a read
			// confirms it is not merely hanging.
			if _, err := s.Leader(ctx); err == nil && h.ok(attempt) {
				s.logf("waiting for the leader lock", "id", id)
			}
		})
		lost, err := lock.Lock(ctx.Done())
		settled.Stop()
		if err != nil {
			err = s.lockFix(err, ttl)
			if h.failed(attempt, err) {
				s.logf("cannot take the leader lock; retrying", "error", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		if lost == nil { // ctx ended while waiting
			break
		}
		h.ok(attempt)
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

// refused reports whether Consul refused the token itself: no retry mends that, only the
// operator.
func refused(err error) bool {
	return Denied(err) || strings.Contains(err.Error(), "ACL not found")
}

// lockFix adds to a failure to take the lock what the operator grants or checks.
func (s *Store) lockFix(err error, ttl time.Duration) error {
	switch {
	case Denied(err):
		return fmt.Errorf("%w: the Consul token lacks session write on the node of the Consul agent it talks to, or key_prefix %q write (grant cmd/fft-allocator/acl/consul-policy.hcl, its session block naming that node)", err, s.prefix)
	case refused(err):
		return fmt.Errorf("%w: Consul knows no such token: set -consul-token (CONSUL_HTTP_TOKEN) to a token with cmd/fft-allocator/acl/consul-policy.hcl", err)
	default:
		return fmt.Errorf("%w (lasting longer than the leader lock's TTL %s, it keeps this replica from leading: check -consul-addr (CONSUL_HTTP_ADDR) and the Consul agent)", err, ttl)
	}
}

// lockHealth tracks whether taking the lock is failing, for WithLockHealth and the log, so
// that each says a change once. Attempts number the Lock calls: a late verdict on an earlier
// one (the settle timer's) changes nothing.
type lockHealth struct {
	report func(error)
	ttl    time.Duration
	now    func() time.Time

	mu      sync.Mutex
	attempt int
	// since is when the current run of failures began; zero while none.
	since time.Time
	// reported is what report last heard ("" for nil); logged the last error logged.
	reported, logged string
}

func (h *lockHealth) try() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.attempt++
	return h.attempt
}

// ok records that attempt holds the lock or waits behind a holder; it returns true when that
// ends a run of failures.
func (h *lockHealth) ok(attempt int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if attempt != h.attempt || h.since.IsZero() {
		return false
	}
	h.since, h.logged = time.Time{}, ""
	if h.reported != "" {
		h.reported = ""
		if h.report != nil {
			h.report(nil)
		}
	}
	return true
}

// failed records attempt's error and returns whether it is new to the log. A refused token
// is reported at once; anything else (Consul restarting, electing, unreachable) only once
// failures have gone on for the lock's TTL, as long as a standby takes to notice a dead leader.
func (h *lockHealth) failed(attempt int, err error) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if attempt != h.attempt {
		return false
	}
	now := h.now()
	if h.since.IsZero() {
		h.since = now
	}
	msg := err.Error()
	if (refused(err) || now.Sub(h.since) >= h.ttl) && msg != h.reported {
		h.reported = msg
		if h.report != nil {
			h.report(err)
		}
	}
	if msg == h.logged {
		return false
	}
	h.logged = msg
	return true
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
