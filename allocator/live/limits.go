package live

import (
	"crypto/sha256"
	"log"
	"net/http"
	"sync"
	"time"
)

// ServerLimits bound what one client can hold of the HTTP API: how long a request may take
// to arrive and to be answered, how long an idle connection stays open, and how large its
// headers and body may be.
type ServerLimits struct {
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	MaxHeaderBytes                                            int
	MaxBodyBytes                                              int64
}

// DefaultServerLimits are generous for a report (a few hundred bytes, once every few
// seconds) or a status page, and short for a client that trickles or idles.
func DefaultServerLimits() ServerLimits {
	return ServerLimits{
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second,
		MaxHeaderBytes: 64 << 10, MaxBodyBytes: 64 << 10,
	}
}

// NewServer is the HTTP server of the API h, with limits: a body trickled byte by byte or a
// connection left idle is closed, not held for ever. errLog receives the server's own errors.
func NewServer(h http.Handler, limits ServerLimits, errLog *log.Logger) *http.Server {
	return &http.Server{
		Handler:           http.MaxBytesHandler(h, limits.MaxBodyBytes),
		ReadHeaderTimeout: limits.ReadHeaderTimeout, ReadTimeout: limits.ReadTimeout,
		WriteTimeout: limits.WriteTimeout, IdleTimeout: limits.IdleTimeout,
		MaxHeaderBytes: limits.MaxHeaderBytes, ErrorLog: errLog,
	}
}

// Defaults of the report limits (WithReportLimits).
const (
	// DefaultReportsPerSecond and DefaultReportBurst bound one job's reports: a task
	// driver reports every 10 s by default, and a gang of 16 tasks 1.6 times a second.
	DefaultReportsPerSecond = 4.0
	DefaultReportBurst      = 40
	// DefaultVerificationsPerSecond and DefaultVerificationBurst bound the tokens sent to
	// Nomad to verify, over all jobs: each costs one Nomad call, and a verified token is
	// then known for verifiedTTL.
	DefaultVerificationsPerSecond = 20.0
	DefaultVerificationBurst      = 100
	// verifiedTTL is how long a verified token is taken without asking Nomad again; a
	// task's identity stays valid while its allocation runs.
	verifiedTTL = 30 * time.Second
	// maxTracked bounds the jobs and tokens the limits remember; beyond it, the oldest
	// half goes.
	maxTracked = 1 << 14
)

// WithReportLimits sets how many reports per second one job may send, with a burst, and
// how many new tokens per second (with a burst) are sent to Nomad to verify, over all jobs.
// A report beyond either is answered 429 with Retry-After.
func WithReportLimits(perJob float64, jobBurst int, verifications float64, verifyBurst int) HandlerOption {
	return func(o *handlerOptions) {
		o.perJob = newBuckets(perJob, jobBurst)
		o.verifications = newBuckets(verifications, verifyBurst)
	}
}

// buckets are token buckets by key, refilled at rate a second up to burst.
type buckets struct {
	rate  float64
	burst float64
	now   func() time.Time

	mu   sync.Mutex
	byID map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newBuckets(rate float64, burst int) *buckets {
	return &buckets{rate: rate, burst: float64(max(1, burst)), now: time.Now, byID: map[string]*bucket{}}
}

// take spends one token of key's bucket, or says how long until one is there.
func (b *buckets) take(key string) (bool, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	bk, ok := b.byID[key]
	if !ok {
		if len(b.byID) >= maxTracked {
			b.forgetOldest(now)
		}
		bk = &bucket{tokens: b.burst, at: now}
		b.byID[key] = bk
	}
	bk.tokens = min(b.burst, bk.tokens+now.Sub(bk.at).Seconds()*b.rate)
	bk.at = now
	if bk.tokens >= 1 {
		bk.tokens--
		return true, 0
	}
	if b.rate <= 0 {
		return false, time.Hour
	}
	return false, time.Duration((1 - bk.tokens) / b.rate * float64(time.Second))
}

// forgetOldest drops the buckets full by now (a full one is the same as none) and, if
// that is not half, the least recently used half.
func (b *buckets) forgetOldest(now time.Time) {
	for k, bk := range b.byID {
		if bk.tokens+now.Sub(bk.at).Seconds()*b.rate >= b.burst {
			delete(b.byID, k)
		}
	}
	for k := range b.byID {
		if len(b.byID) < maxTracked/2 {
			return
		}
		delete(b.byID, k)
	}
}

// tokenCache remembers what Nomad said of tokens (the task a token is, the namespaces it
// may read), by their hash, for verifiedTTL: a task's reports every few seconds, or a page
// refreshed every 30 s, cost one Nomad call each TTL.
type tokenCache[V any] struct {
	now func() time.Time

	mu     sync.Mutex
	tokens map[[32]byte]cached[V]
}

type cached[V any] struct {
	v  V
	at time.Time
}

func newTokenCache[V any]() *tokenCache[V] {
	return &tokenCache[V]{now: time.Now, tokens: map[[32]byte]cached[V]{}}
}

func (c *tokenCache[V]) get(token string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.tokens[sha256.Sum256([]byte(token))]
	if !ok || c.now().Sub(e.at) > verifiedTTL {
		var zero V
		return zero, false
	}
	return e.v, true
}

func (c *tokenCache[V]) put(token string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.tokens) >= maxTracked {
		for k, e := range c.tokens {
			if now.Sub(e.at) > verifiedTTL || len(c.tokens) >= maxTracked/2 {
				delete(c.tokens, k)
			}
		}
	}
	c.tokens[sha256.Sum256([]byte(token))] = cached[V]{v: v, at: now}
}
