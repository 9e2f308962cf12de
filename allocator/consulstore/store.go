package consulstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

var (
	_ loop.Store            = (*Store)(nil)
	_ loop.ProgressReader   = (*Store)(nil)
	_ loop.ProgressReporter = (*Store)(nil)
)

// Layout is the version of the key layout below the prefix. A reader that
// finds another layout refuses to guess.
const Layout = 1

// DefaultPrefix is where the store keeps its keys, version included.
const DefaultPrefix = "nomad-fft/v1"

// maxTxnOps is how many operations one Consul transaction carries; Consul
// 1.16 refuses more than 128, and we keep room for the guard operations.
const maxTxnOps = 64

// The keys below the prefix:
//
//	<prefix>/ledger                 {"layout":1,"round":N,"clock":C,"start":T}: the next round, the fairness
//	                                clock and the last round's start; its ModifyIndex is the CAS version
//	<prefix>/jobs/<namespace>/<job> one loop.JobRecord per job (JSON)
//	<prefix>/rounds/<round>         one loop.RoundRecord per round, the audit log (round zero-padded to 12 digits)
//	<prefix>/roundparts/<round>/... a record too large for one value, in parts (parts.go)
//	<prefix>/leader                 the leader lock (see Lead); its value is the holder's id
//	<prefix>/progress/<ns>/<job>    work units the job reports done, a plain number a training
//	                                script writes with `consul kv put <key> 42`
//	<prefix>/overrides/<ns>/<job>   an operator's park or pin of the job (loop.Override, JSON)
const (
	keyLedger   = "ledger"
	dirJobs     = "jobs/"
	dirRounds   = "rounds/"
	dirProgress = "progress/"
)

// Store is a loop.Store over Consul KV.
type Store struct {
	client *api.Client
	log    func(msg string, kv ...any)
	kv     *api.KV
	txn    *api.Txn
	prefix string
}

// New returns a Store under prefix ("" means DefaultPrefix).
func New(c *api.Client, prefix string) *Store {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return &Store{client: c, kv: c.KV(), txn: c.Txn(), prefix: strings.TrimSuffix(prefix, "/") + "/"}
}

// WithLog sets a function that receives the store's log lines (message and
// key/value pairs, as hclog takes them) and returns the store.
func (s *Store) WithLog(log func(msg string, kv ...any)) *Store {
	s.log = log
	return s
}

func (s *Store) logf(msg string, kv ...any) {
	if s.log != nil {
		s.log(msg, kv...)
	}
}

// ledgerValue is the ledger key's value. Clock and Start came after layout
// 1's first version: a ledger without them counted whole rounds only, so its
// clock is its round, and no start means the next round keeps the last
// round's credit whole.
type ledgerValue struct {
	Layout int        `json:"layout"`
	Round  int        `json:"round"`
	Clock  *float64   `json:"clock,omitempty"`
	Start  *time.Time `json:"start,omitempty"`
}

// RoundKey returns the key of round n's record.
func (s *Store) RoundKey(n int) string { return fmt.Sprintf("%s%s%012d", s.prefix, dirRounds, n) }

// JobKey returns the key of a job's record ("namespace/job").
func (s *Store) JobKey(id string) string { return s.prefix + dirJobs + id }

// Load reads the ledger and every job record. An empty store is round 0.
func (s *Store) Load(ctx context.Context) (*loop.Ledger, error) {
	q := (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx)
	pair, _, err := s.kv.Get(s.prefix+keyLedger, q)
	if err != nil {
		return nil, fmt.Errorf("reading %s%s: %w", s.prefix, keyLedger, s.needs(err, "read"))
	}
	l := &loop.Ledger{Jobs: map[string]loop.JobRecord{}}
	if pair != nil {
		v, err := decodeLedger(pair)
		if err != nil {
			return nil, err
		}
		l.Round, l.Version, l.Clock = v.Round, pair.ModifyIndex, float64(v.Round)
		if v.Clock != nil {
			l.Clock = *v.Clock
		}
		if v.Start != nil {
			l.Start = *v.Start
		}
	}
	pairs, _, err := s.kv.List(s.prefix+dirJobs, q)
	if err != nil {
		return nil, fmt.Errorf("listing %s%s: %w", s.prefix, dirJobs, s.needs(err, "read"))
	}
	for _, p := range pairs {
		var r loop.JobRecord
		if err := json.Unmarshal(p.Value, &r); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", p.Key, err)
		}
		l.Jobs[strings.TrimPrefix(p.Key, s.prefix+dirJobs)] = r
	}
	return l, nil
}

// Record writes the round record, the ledger and the job records that
// changed. The first transaction sets the ledger only if it is still at
// prev.Version and creates the round record only if that round has none, so
// a round is never recorded twice; job records beyond what one transaction
// carries follow in transactions guarded by the new ledger version.
func (s *Store) Record(ctx context.Context, prev, next *loop.Ledger, rec *loop.RoundRecord) error {
	lv := ledgerValue{Layout: Layout, Round: next.Round, Clock: &next.Clock}
	if !next.Start.IsZero() {
		lv.Start = &next.Start
	}
	ledger, err := json.Marshal(lv)
	if err != nil {
		return fmt.Errorf("encoding the ledger: %w", err)
	}
	round, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encoding round %d: %w", rec.Round, err)
	}
	if round, err = s.putParts(ctx, rec.Round, round); err != nil {
		return fmt.Errorf("recording round %d: %w", rec.Round, err)
	}
	jobOps, err := s.jobOps(prev.Jobs, next.Jobs)
	if err != nil {
		return err
	}
	ledgerKey := s.prefix + keyLedger
	first := api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: ledgerKey, Value: ledger, Index: prev.Version}},
		{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: s.RoundKey(rec.Round), Value: round, Index: 0}},
	}
	n := min(len(jobOps), maxTxnOps-len(first))
	first = append(first, jobOps[:n]...)
	resp, err := s.run(ctx, first, fmt.Sprintf("recording round %d", rec.Round))
	if err != nil {
		return err
	}
	version := uint64(0)
	for _, r := range resp.Results {
		if r.KV != nil && r.KV.Key == ledgerKey {
			version = r.KV.ModifyIndex
		}
	}
	if version == 0 {
		return fmt.Errorf("recording round %d: the transaction did not return the ledger's new index", rec.Round)
	}
	for rest := jobOps[n:]; len(rest) > 0; {
		k := min(len(rest), maxTxnOps-1)
		ops := append(api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: ledgerKey, Index: version}}}, rest[:k]...)
		if _, err := s.run(ctx, ops, fmt.Sprintf("recording round %d's job records", rec.Round)); err != nil {
			return err
		}
		rest = rest[k:]
	}
	next.Version = version
	return nil
}

// jobOps returns set operations for records that changed and deletes for
// records that are gone, sorted by key.
func (s *Store) jobOps(prev, next map[string]loop.JobRecord) (api.TxnOps, error) {
	var ops api.TxnOps
	for id, r := range next {
		if old, ok := prev[id]; ok && reflect.DeepEqual(old, r) {
			continue
		}
		b, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("encoding job %q: %w", id, err)
		}
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVSet, Key: s.JobKey(id), Value: b}})
	}
	for id := range prev {
		if _, ok := next[id]; !ok {
			ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: s.JobKey(id)}})
		}
	}
	sort.Slice(ops, func(a, b int) bool { return ops[a].KV.Key < ops[b].KV.Key })
	return ops, nil
}

func (s *Store) run(ctx context.Context, ops api.TxnOps, what string) (*api.TxnResponse, error) {
	ok, resp, _, err := s.txn.Txn(ops, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, s.needs(err, "write"))
	}
	if !ok {
		var msgs []string
		stale := false
		for _, e := range resp.Errors {
			msgs = append(msgs, fmt.Sprintf("op %d: %s", e.OpIndex, e.What))
			// Consul says only in words that a CAS or index check lost.
			stale = stale || strings.Contains(e.What, "index")
		}
		if stale {
			return nil, fmt.Errorf("%s: %w: %s", what, loop.ErrConflict, strings.Join(msgs, "; "))
		}
		return nil, fmt.Errorf("%s: %w", what, s.needs(fmt.Errorf("transaction refused: %s", strings.Join(msgs, "; ")), "write"))
	}
	return resp, nil
}

// ProgressKey returns the key where job id ("namespace/job") reports its progress.
func (s *Store) ProgressKey(id string) string { return s.prefix + dirProgress + id }

// Progress returns the work done that jobs report under <prefix>/progress/,
// by job ID: a plain number, or the done of a JSON report (StoreReport). A
// value that is neither is left out, and the error names its key; the valid
// reports are returned with it.
func (s *Store) Progress(ctx context.Context) (map[string]float64, error) {
	pairs, _, err := s.kv.List(s.prefix+dirProgress, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("listing %s%s: %w", s.prefix, dirProgress, s.needs(err, "read"))
	}
	reports, err := s.reports(pairs)
	out := make(map[string]float64, len(reports))
	for id, r := range reports {
		out[id] = r.Done
	}
	return out, err
}

// ReportProgress records that job id ("namespace/job") has done `done` work
// units, where Progress reads it. It is what `fftctl report` and the
// allocator's progress endpoint call.
func (s *Store) ReportProgress(ctx context.Context, id string, done float64) error {
	if !(done >= 0) || math.IsInf(done, 0) {
		return fmt.Errorf("progress of %s = %g: expected work units done, a number >= 0", id, done)
	}
	if err := checkJobID(id); err != nil {
		return err
	}
	v := strconv.FormatFloat(done, 'g', -1, 64)
	if _, err := s.kv.Put(&api.KVPair{Key: s.ProgressKey(id), Value: []byte(v)}, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		return fmt.Errorf("writing %s: %w", s.ProgressKey(id), s.needs(err, "write"))
	}
	return nil
}

// ErrNoRound means the audit log has no record of the round asked for.
var ErrNoRound = errors.New("consulstore: no record of that round")

// ReadRound returns round n's audit record.
func (s *Store) ReadRound(ctx context.Context, n int) (*loop.RoundRecord, error) {
	pair, _, err := s.kv.Get(s.RoundKey(n), (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("reading round %d: %w", n, err)
	}
	if pair == nil {
		return nil, fmt.Errorf("round %d: %w", n, ErrNoRound)
	}
	value, err := s.recordValue(ctx, n, pair.Value)
	if err != nil {
		return nil, err
	}
	var rec loop.RoundRecord
	if err := json.Unmarshal(value, &rec); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", pair.Key, err)
	}
	return &rec, nil
}

// RoundNumbers returns the rounds the audit log holds, ascending. A key
// under <prefix>/rounds/ that is not a round number is an error naming it.
func (s *Store) RoundNumbers(ctx context.Context) ([]int, error) {
	keys, _, err := s.kv.Keys(s.prefix+dirRounds, "", (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("listing %s%s: %w", s.prefix, dirRounds, err)
	}
	rounds := make([]int, 0, len(keys))
	for _, k := range keys {
		n, err := s.roundOf(k)
		if err != nil {
			return nil, err
		}
		rounds = append(rounds, n)
	}
	sort.Ints(rounds)
	return rounds, nil
}

// roundOf reads the round number out of a round record's key.
func (s *Store) roundOf(key string) (int, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(key, s.prefix+dirRounds))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("audit log key %s: expected %s<round number>", key, s.prefix+dirRounds)
	}
	return n, nil
}

// ReadRounds returns the audit records of round `from` and later,
// ascending. It reads the whole log in one call and decodes only those.
func (s *Store) ReadRounds(ctx context.Context, from int) ([]*loop.RoundRecord, error) {
	pairs, _, err := s.kv.List(s.prefix+dirRounds, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("listing %s%s: %w", s.prefix, dirRounds, err)
	}
	var out []*loop.RoundRecord
	for _, p := range pairs {
		n, err := s.roundOf(p.Key)
		if err != nil {
			return nil, err
		}
		if n < from {
			continue
		}
		value, err := s.recordValue(ctx, n, p.Value)
		if err != nil {
			return nil, err
		}
		var rec loop.RoundRecord
		if err := json.Unmarshal(value, &rec); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", p.Key, err)
		}
		out = append(out, &rec)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Round < out[b].Round })
	return out, nil
}

// NextRound returns the round the ledger will run next (0 for an empty
// store) and the ledger's Consul index. With waitIndex > 0 it is a blocking
// query: it returns when the ledger changes past that index, or after
// Consul's default wait (5 minutes) with the same index, or when ctx ends.
func (s *Store) NextRound(ctx context.Context, waitIndex uint64) (int, uint64, error) {
	pair, meta, err := s.kv.Get(s.prefix+keyLedger, (&api.QueryOptions{WaitIndex: waitIndex}).WithContext(ctx))
	if err != nil {
		return 0, 0, fmt.Errorf("reading %s%s: %w", s.prefix, keyLedger, err)
	}
	if pair == nil {
		return 0, meta.LastIndex, nil
	}
	v, err := decodeLedger(pair)
	if err != nil {
		return 0, 0, err
	}
	return v.Round, meta.LastIndex, nil
}

// decodeLedger decodes the ledger value, refusing a layout this code does
// not read.
func decodeLedger(pair *api.KVPair) (ledgerValue, error) {
	var v ledgerValue
	if err := json.Unmarshal(pair.Value, &v); err != nil {
		return v, fmt.Errorf("decoding %s: %w", pair.Key, err)
	}
	if v.Layout != Layout {
		return v, fmt.Errorf("%s has layout %d, this code reads layout %d", pair.Key, v.Layout, Layout)
	}
	return v, nil
}
