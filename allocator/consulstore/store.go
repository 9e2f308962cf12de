package consulstore

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/nomad-fft/nomad-fft/allocator/internal/recycle"
	"github.com/nomad-fft/nomad-fft/allocator/jobid"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

var (
	_ loop.Store            = (*Store)(nil)
	_ loop.Claimer          = (*Store)(nil)
	_ loop.ProgressReader   = (*Store)(nil)
	_ loop.ProgressReporter = (*Store)(nil)
)

// Layout is the version of the key layout below the prefix. A reader that
// finds another layout refuses to guess. Layout 2 keeps the job records in
// JobChunks keys instead of one key per job (layout 1), so that a round
// writes a bounded number of keys whatever the number of jobs.
const Layout = 2

// DefaultPrefix is where the store keeps its keys, version included.
const DefaultPrefix = "nomad-fft/v2"

// maxTxnOps is how many operations one Consul transaction carries; Consul
// 1.16 refuses more than 128, and we keep room for the guard operations.
const maxTxnOps = 64

// JobChunks is how many keys hold the job records: a job's record is in
// chunk fnv32a(id) mod JobChunks.
const JobChunks = 16

// Sizes Consul imposes and those the store keeps to.
const (
	// maxTxnBytes bounds the values one transaction carries, and so each
	// value the store writes: Consul refuses a request over 512 KiB
	// (limits { txn_max_req_len }; a KV value over 512 KiB too) and the
	// request carries values base64-encoded, 4/3 of their size.
	maxTxnBytes = 320 << 10
	// compressAbove is the size beyond which a value is stored gzipped
	// (readers tell it by gzip's magic bytes).
	compressAbove = 64 << 10
)

// DefaultAuditRounds is how many of the latest round records the audit log
// keeps (WithAuditRounds): 1,000 rounds is 3.5 days at the default R of
// 300 s. Each round's record deletes the one that many rounds older.
const DefaultAuditRounds = 1000

// The keys below the prefix:
//
//	<prefix>/ledger                 {"layout":2,"round":N,"clock":C,"start":T}: the next round, the fairness
//	                                clock and the last round's start; its ModifyIndex is the CAS version
//	<prefix>/jobs/<chunk>           the job records of one chunk (two hex digits, 00 to 0f): a JSON object of
//	                                loop.JobRecord by job ID ("namespace/job")
//	<prefix>/rounds/<round>         one loop.RoundRecord per round, the audit log (round zero-padded to 12
//	                                digits); the latest DefaultAuditRounds (WithAuditRounds) are kept
//	<prefix>/leader                 the leader lock (see Lead); its value is the holder's id
//	<prefix>/progress/<ns>/<job>    work units the job reports done, a plain number a training
//	                                script writes with `consul kv put <key> 42`
//	<prefix>/overrides/<ns>/<job>   an operator's park or pin of the job (loop.Override, JSON)
//
// Values are JSON; one over 64 KiB (a large round's record or job chunk) is
// stored gzipped (`consul kv get -base64 KEY | base64 -d | gunzip`).
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
	// lockHealth hears whether Lead can take the leader lock (WithLockHealth).
	lockHealth func(error)
	kv         *api.KV
	txn        *api.Txn
	prefix     string
	// keep is how many of the latest round records the audit log keeps.
	keep int
	// scratch is Record's encoding memory, kept between rounds.
	scratch recycle.Keeper[scratches]
	// prepared is what Prepare encoded for Record, or nil.
	prepMu   sync.Mutex
	prepared *prepared
}

// prepared is what Prepare encoded for the Record of next and rec, in sc: the
// job records' operations, and rec's job lines (sc[JobChunks].lines).
type prepared struct {
	next *loop.Ledger
	rec  *loop.RoundRecord
	ops  api.TxnOps
	sc   *scratches
}

// New returns a Store under prefix ("" means DefaultPrefix).
func New(c *api.Client, prefix string) *Store {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return &Store{client: c, kv: c.KV(), txn: c.Txn(), prefix: strings.TrimSuffix(prefix, "/") + "/", keep: DefaultAuditRounds}
}

// WithAuditRounds sets how many of the latest round records the audit log
// keeps (n >= 1; default DefaultAuditRounds) and returns the store.
func (s *Store) WithAuditRounds(n int) *Store {
	s.keep = max(1, n)
	return s
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

// JobKey returns the key of the chunk that holds a job's record ("namespace/job").
func (s *Store) JobKey(id string) string { return s.chunkKey(chunkOf(id)) }

func (s *Store) chunkKey(c int) string { return fmt.Sprintf("%s%s%02x", s.prefix, dirJobs, c) }

// chunkOf is the chunk of a job's record.
func chunkOf(id string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % JobChunks)
}

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
		var chunk map[string]loop.JobRecord
		if err := decodeValue(p.Value, &chunk); err != nil {
			return nil, fmt.Errorf("decoding %s (layout %d: a chunk of job records): %w", p.Key, Layout, err)
		}
		maps.Copy(l.Jobs, chunk)
	}
	return l, nil
}

// encodeValue is v as JSON, gzipped when over compressAbove.
func encodeValue(v any) ([]byte, error) { return new(scratch).value(v) }

// scratch is the memory one value is encoded in: its JSON, the gzip writers (whose compressor
// tables are most of a megabyte each) and the gzipped bytes. Record keeps a set between rounds
// (Store.scratch): at 20,000 jobs a round's values are megabytes of JSON, and fresh memory
// costs a page fault per 4 KiB. A value encoded in a scratch lives until its next use.
type scratch struct {
	raw, zipped bytes.Buffer
	zw, zwBest  *gzip.Writer
	enc         *json.Encoder
	// lines are a round record's job lines as JSON, and linesZipped as a gzip member
	// (prepareLines): most of a record's bytes, encoded while the round waits on Nomad.
	lines, linesZipped bytes.Buffer
	linesEnc           *json.Encoder // writes to lines
	linesLean          bool          // the lines are without their options
}

// scratches are one Record's: one for each job chunk, and the round record's.
type scratches [JobChunks + 1]scratch

// value is encodeValue's bytes, encoded in sc.
func (sc *scratch) value(v any) ([]byte, error) {
	sc.raw.Reset()
	if err := sc.encode(v); err != nil {
		return nil, err
	}
	return sc.compressed()
}

// encode appends v's JSON to sc.raw as json.Marshal writes it (Encode escapes HTML as Marshal
// does, and ends the value with a newline, which Marshal does not write).
func (sc *scratch) encode(v any) error { return appendJSON(&sc.enc, &sc.raw, v) }

// appendJSON appends v's JSON to buf as json.Marshal writes it, with *enc (made on first use to
// write to buf, then kept: at 20,000 jobs a chunk's records are encoded one by one).
func appendJSON(enc **json.Encoder, buf *bytes.Buffer, v any) error {
	if *enc == nil {
		*enc = json.NewEncoder(buf)
	}
	if err := (*enc).Encode(v); err != nil {
		return err
	}
	buf.Truncate(buf.Len() - 1) // Encode's newline, which Marshal does not write
	return nil
}

// encodeChunk is encodeValue of a job chunk, byte for byte, without
// encoding/json's reflection over a map of thousands of records (a copy
// of each record and a sort of the keys through reflect): the records are
// encoded one by one, by sorted ID, into one buffer.
func encodeChunk(chunk map[string]loop.JobRecord) ([]byte, error) {
	return new(scratch).chunk(chunk)
}

// chunk is encodeChunk's bytes, encoded in sc.
func (sc *scratch) chunk(chunk map[string]loop.JobRecord) ([]byte, error) {
	if chunk == nil {
		return sc.value(chunk)
	}
	sc.raw.Reset()
	sc.raw.WriteByte('{')
	for i, id := range slices.Sorted(maps.Keys(chunk)) {
		if i > 0 {
			sc.raw.WriteByte(',')
		}
		r := chunk[id]
		if err := sc.encode(id); err != nil {
			return nil, err
		}
		sc.raw.WriteByte(':')
		if err := sc.encode(&r); err != nil {
			return nil, err
		}
	}
	sc.raw.WriteByte('}')
	return sc.compressed()
}

// compressed is sc.raw gzipped when over compressAbove, else sc.raw. It
// compresses at gzip level 3 (fastLevel), and again at gzip's default level
// only when that is over what a transaction carries: at 20,000 jobs the
// round record's 13.7 MB of JSON took 28 ms for 218 KiB at level 3 and 94 ms
// for 195 KiB at the default, so the fast level saves most of the time and
// the default keeps the largest value that fits.
func (sc *scratch) compressed() ([]byte, error) {
	if sc.raw.Len() <= compressAbove {
		return sc.raw.Bytes(), nil
	}
	err := sc.gzipInto(&sc.zipped, sc.raw.Bytes())
	return sc.zipped.Bytes(), err
}

// gzipInto sets dst to raw gzipped at the level compressed takes.
func (sc *scratch) gzipInto(dst *bytes.Buffer, raw []byte) error {
	dst.Reset()
	if err := appendGzip(&sc.zw, fastLevel, dst, raw); err != nil || dst.Len() <= maxTxnBytes {
		return err
	}
	dst.Reset()
	return appendGzip(&sc.zwBest, gzip.DefaultCompression, dst, raw)
}

// fastLevel is the gzip level values are compressed at first.
const fastLevel = 3

// appendGzip appends b to dst as one gzip member at level, written by *zw (made on first
// use, then reset: the same header and level as a new writer's).
func appendGzip(zw **gzip.Writer, level int, dst *bytes.Buffer, b []byte) error {
	if *zw == nil {
		w, err := gzip.NewWriterLevel(dst, level)
		if err != nil {
			return err
		}
		*zw = w
	} else {
		(*zw).Reset(dst)
	}
	if _, err := (*zw).Write(b); err != nil {
		return err
	}
	return (*zw).Close()
}

// decodeValue decodes a value encodeValue wrote, gzipped or not.
func decodeValue(b []byte, v any) error {
	b, err := valueJSON(b)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// valueJSON is a stored value's JSON: gunzipped (every gzip member) when gzipped.
func valueJSON(b []byte) ([]byte, error) {
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		return b, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	if b, err = io.ReadAll(zr); err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	return b, nil
}

// encodeRound is a round record's value; a record over Consul's value limit
// (what one transaction carries) is stored without its job lines' options (every model's cost terms), and
// says so (OptionsOmitted).
func encodeRound(rec *loop.RoundRecord) ([]byte, error) { return new(scratch).round(rec) }

// round is encodeRound's bytes, encoded in sc.
func (sc *scratch) round(rec *loop.RoundRecord) ([]byte, error) {
	b, err := sc.value(rec)
	if err != nil {
		return nil, fmt.Errorf("encoding round %d: %w", rec.Round, err)
	}
	if len(b) <= maxTxnBytes {
		return b, nil
	}
	return sc.lean(rec)
}

// lean is round's value for a record over what a transaction carries: without its job lines'
// options, saying so.
func (sc *scratch) lean(rec *loop.RoundRecord) ([]byte, error) {
	lean := *rec
	lean.Jobs, lean.OptionsOmitted = withoutOptions(rec.Jobs), true
	b, err := sc.value(&lean)
	if err != nil {
		return nil, fmt.Errorf("encoding round %d: %w", rec.Round, err)
	}
	return b, leanFits(rec.Round, len(b))
}

// leanFits is lean's error for a record of n bytes without options, if it is over the limit.
func leanFits(round, n int) error {
	if n > maxTxnBytes {
		return fmt.Errorf("round %d's record is %d bytes gzipped without options, over the %d bytes one Consul transaction carries", round, n, maxTxnBytes)
	}
	return nil
}

// withoutOptions are job lines without their options (every model's cost terms).
func withoutOptions(jobs []loop.JobAudit) []loop.JobAudit {
	out := make([]loop.JobAudit, len(jobs))
	for i, l := range jobs {
		l.Options = nil
		out[i] = l
	}
	return out
}

// prepareLines encodes a round record's job lines into sc.lines, as the record's JSON holds
// them, and gzips them into sc.linesZipped for roundPrepared, at the level compressed would:
// without their options (sc.linesLean) when they are over what a transaction carries with
// them.
func (sc *scratch) prepareLines(jobs []loop.JobAudit) error {
	sc.linesLean = false
	if err := sc.encodeLines(jobs); err != nil || sc.linesZipped.Len() <= maxTxnBytes {
		return err
	}
	sc.linesLean = true
	return sc.encodeLines(withoutOptions(jobs))
}

// encodeLines is prepareLines for one form of the lines. They are encoded one by one, as
// json.Marshal writes the slice: encoding/json builds a value in a buffer of its own, which
// for all 20,000 lines at once (15 MB with options) grew from nothing in most live rounds
// (its pool does not outlive two garbage collections) and cleared every byte it took.
func (sc *scratch) encodeLines(jobs []loop.JobAudit) error {
	sc.lines.Reset()
	if jobs == nil {
		sc.lines.WriteString("null")
	} else {
		sc.lines.WriteByte('[')
		for i := range jobs {
			if i > 0 {
				sc.lines.WriteByte(',')
			}
			if err := appendJSON(&sc.linesEnc, &sc.lines, &jobs[i]); err != nil {
				return err
			}
		}
		sc.lines.WriteByte(']')
	}
	return sc.gzipInto(&sc.linesZipped, sc.lines.Bytes())
}

// roundPrepared is round's value for rec, whose job lines prepareLines encoded: the rest of
// the record is encoded around them. Gzipped, the parts are three gzip members, which read as
// one stream of the record's JSON (RFC 1952, 2.2; Go's gzip.Reader reads every member), so
// the lines are neither encoded nor compressed again. A record the rest takes over what a
// transaction carries is encoded again whole (round: at gzip's default level, else without
// options).
func (sc *scratch) roundPrepared(rec *loop.RoundRecord) ([]byte, error) {
	rest := *rec
	rest.Jobs, rest.OptionsOmitted = nil, sc.linesLean
	sc.raw.Reset()
	if err := sc.encode(&rest); err != nil {
		return nil, fmt.Errorf("encoding round %d: %w", rec.Round, err)
	}
	at := nullJobsAt(sc.raw.Bytes())
	if at < 0 {
		return nil, fmt.Errorf("encoding round %d: its JSON has no top-level \"jobs\":null to put the job lines in", rec.Round)
	}
	head, tail := sc.raw.Bytes()[:at], sc.raw.Bytes()[at+len("null"):]
	sc.zipped.Reset()
	if len(head)+sc.lines.Len()+len(tail) <= compressAbove {
		sc.zipped.Write(head)
		sc.zipped.Write(sc.lines.Bytes())
		sc.zipped.Write(tail)
		return sc.zipped.Bytes(), nil
	}
	if err := appendGzip(&sc.zw, fastLevel, &sc.zipped, head); err != nil {
		return nil, err
	}
	sc.zipped.Write(sc.linesZipped.Bytes())
	if err := appendGzip(&sc.zw, fastLevel, &sc.zipped, tail); err != nil {
		return nil, err
	}
	switch {
	case sc.zipped.Len() <= maxTxnBytes:
		return sc.zipped.Bytes(), nil
	case sc.linesLean:
		return nil, leanFits(rec.Round, sc.zipped.Len())
	}
	return sc.round(rec)
}

// nullJobsAt is where the value of the top-level key "jobs" starts in b, a JSON object whose
// "jobs" is null, or -1. Keys and strings deeper in the object are skipped.
func nullJobsAt(b []byte) int {
	const field = `"jobs":`
	depth, inString, escaped := 0, false, false
	for i, c := range b {
		switch {
		case escaped:
			escaped = false
		case inString:
			escaped, inString = c == '\\', c != '"'
		case c == '"':
			if depth == 1 && bytes.HasPrefix(b[i:], []byte(field+"null")) {
				return i + len(field)
			}
			inString = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		}
	}
	return -1
}

// encodeLedger is the ledger key's value for next.
func encodeLedger(next *loop.Ledger) ([]byte, error) {
	lv := ledgerValue{Layout: Layout, Round: next.Round, Clock: &next.Clock}
	if !next.Start.IsZero() {
		lv.Start = &next.Start
	}
	b, err := json.Marshal(lv)
	if err != nil {
		return nil, fmt.Errorf("encoding the ledger: %w", err)
	}
	return b, nil
}

// Claim writes round intent.Round's intent record and advances the ledger
// to next in one transaction: the ledger only if it is still at
// prev.Version, the record only if that round has none. It returns the
// ledger's new index; the round record has the same one (one transaction,
// one Raft index), which Record checks when it replaces the intent.
func (s *Store) Claim(ctx context.Context, prev, next *loop.Ledger, intent *loop.RoundRecord) (uint64, error) {
	ledger, err := encodeLedger(next)
	if err != nil {
		return 0, err
	}
	round, err := encodeRound(intent)
	if err != nil {
		return 0, err
	}
	what := fmt.Sprintf("claiming round %d", intent.Round)
	resp, err := s.run(ctx, api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: s.prefix + keyLedger, Value: ledger, Index: prev.Version}},
		{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: s.RoundKey(intent.Round), Value: round, Index: 0}},
	}, what)
	if err != nil {
		return 0, err
	}
	return s.ledgerIndex(resp, what)
}

// ledgerIndex is the ledger's ModifyIndex in a transaction's results.
func (s *Store) ledgerIndex(resp *api.TxnResponse, what string) (uint64, error) {
	for _, r := range resp.Results {
		if r.KV != nil && r.KV.Key == s.prefix+keyLedger && r.KV.ModifyIndex != 0 {
			return r.KV.ModifyIndex, nil
		}
	}
	return 0, fmt.Errorf("%s: the transaction did not return the ledger's new index", what)
}

// Record writes the round record, the ledger and the job records that
// changed. The first transaction sets the ledger only if it is still at
// prev.Version and creates the round record only if that round has none
// (or, when prev.Claimed, replaces the intent Claim wrote at prev.Version),
// so a round is never recorded twice; job records beyond what one
// transaction carries follow in transactions guarded by the new ledger
// version.
func (s *Store) Record(ctx context.Context, prev, next *loop.Ledger, rec *loop.RoundRecord) error {
	ledger, err := encodeLedger(next)
	if err != nil {
		return err
	}
	sc, jobOps, round, err := s.encode(prev, next, rec)
	defer s.scratch.Put(sc)
	if err != nil {
		return err
	}
	ledgerKey := s.prefix + keyLedger
	roundIndex := uint64(0)
	if prev.Claimed {
		roundIndex = prev.Version
	}
	first := api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: ledgerKey, Value: ledger, Index: prev.Version}},
		{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: s.RoundKey(rec.Round), Value: round, Index: roundIndex}},
	}
	if old := rec.Round - s.keep; old >= 0 {
		// Retention: the record that falls out of the kept window goes with this one.
		first = append(first, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: s.RoundKey(old)}})
	}
	n := fitting(jobOps, maxTxnOps-len(first), maxTxnBytes-len(ledger)-len(round))
	first = append(first, jobOps[:n]...)
	what := fmt.Sprintf("recording round %d", rec.Round)
	resp, err := s.run(ctx, first, what)
	if err != nil {
		return err
	}
	version, err := s.ledgerIndex(resp, what)
	if err != nil {
		return err
	}
	for rest := jobOps[n:]; len(rest) > 0; {
		k := max(1, fitting(rest, maxTxnOps-1, maxTxnBytes))
		ops := append(api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: ledgerKey, Index: version}}}, rest[:k]...)
		if _, err := s.run(ctx, ops, fmt.Sprintf("recording round %d's job records", rec.Round)); err != nil {
			return err
		}
		rest = rest[k:]
	}
	next.Version = version
	return nil
}

// Prepare encodes the job records' operations and the record's job lines of
// Record(prev, next, rec) while the round waits on Nomad: at 20,000 jobs they
// are megabytes of JSON, half a second of CPU or more. Record reports what
// went wrong here (it encodes them again).
func (s *Store) Prepare(prev, next *loop.Ledger, rec *loop.RoundRecord) {
	sc := s.takeScratch()
	ops, err := s.jobOpsBeside(prev.Jobs, next.Jobs, sc, func() error { return sc[JobChunks].prepareLines(rec.Jobs) })
	s.prepMu.Lock()
	defer s.prepMu.Unlock()
	s.prepared = nil
	if err != nil {
		s.scratch.Put(sc)
		return
	}
	s.prepared = &prepared{next: next, rec: rec, ops: ops, sc: sc}
}

// takeScratch is the last round's encoding memory, or new memory.
func (s *Store) takeScratch() *scratches {
	if sc := s.scratch.Take(); sc != nil {
		return sc
	}
	return new(scratches)
}

// encode returns Record's values: the job records' operations (Prepare's,
// when it prepared this next) and the round record, encoded in sc, which
// the caller keeps for the next round once the values are written.
func (s *Store) encode(prev, next *loop.Ledger, rec *loop.RoundRecord) (sc *scratches, jobOps api.TxnOps, round []byte, err error) {
	s.prepMu.Lock()
	p := s.prepared
	s.prepared = nil
	s.prepMu.Unlock()
	if p != nil && p.next == next {
		if p.rec == rec {
			round, err = p.sc[JobChunks].roundPrepared(rec)
		} else {
			round, err = p.sc[JobChunks].round(rec)
		}
		return p.sc, p.ops, round, err
	}
	if p != nil {
		s.scratch.Put(p.sc)
	}
	// The values are encoded in the last round's memory.
	sc = s.takeScratch()
	jobOps, err = s.jobOpsBeside(prev.Jobs, next.Jobs, sc, func() (err error) {
		round, err = sc[JobChunks].round(rec)
		return err
	})
	return sc, jobOps, round, err
}

// jobOpsBeside is jobOps with the round record's encoding (encode) run at the same time, on
// a core of its own where one is free; encode's error comes first.
func (s *Store) jobOpsBeside(prev, next map[string]loop.JobRecord, sc *scratches, encode func() error) (api.TxnOps, error) {
	var (
		encodeErr error
		encoded   = make(chan struct{})
	)
	go func() {
		defer close(encoded)
		encodeErr = encode()
	}()
	ops, err := s.jobOps(prev, next, sc)
	<-encoded
	if encodeErr != nil {
		return nil, encodeErr
	}
	return ops, err
}

// fitting is how many of ops, from the first, fit in n operations and the
// given bytes of values (at least none).
func fitting(ops api.TxnOps, n, bytes int) int {
	k := 0
	for ; k < len(ops) && k < n; k++ {
		if bytes -= len(ops[k].KV.Value); bytes < 0 {
			break
		}
	}
	return k
}

// jobOps returns a set operation for each chunk whose records changed and a
// delete for each chunk left empty, sorted by key: at most JobChunks
// operations, however many jobs there are.
func (s *Store) jobOps(prev, next map[string]loop.JobRecord, sc *scratches) (api.TxnOps, error) {
	before, after := chunks(prev), chunks(next)
	// Chunks are compared and encoded on every CPU at once, each into its
	// own slot, so the operations keep the chunks' order.
	slots := make([]*api.TxnOp, JobChunks)
	errs := make([]error, JobChunks)
	next16 := make(chan int, JobChunks)
	for c := range JobChunks {
		next16 <- c
	}
	close(next16)
	var wg sync.WaitGroup
	for range min(JobChunks, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range next16 {
				slots[c], errs[c] = s.chunkOp(c, before[c], after[c], &sc[c])
			}
		}()
	}
	wg.Wait()
	var ops api.TxnOps
	for c, op := range slots {
		if errs[c] != nil {
			return nil, errs[c]
		}
		if op != nil {
			ops = append(ops, op)
		}
	}
	return ops, nil
}

// chunkOp is the operation that brings chunk c from before to after: none
// when it did not change, a delete when it is left empty, else a set
// (encoded in sc).
func (s *Store) chunkOp(c int, before, after map[string]loop.JobRecord, sc *scratch) (*api.TxnOp, error) {
	switch {
	case reflect.DeepEqual(before, after):
		return nil, nil
	case len(after) == 0:
		return &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: s.chunkKey(c)}}, nil
	}
	b, err := sc.chunk(after)
	if err != nil {
		return nil, fmt.Errorf("encoding job chunk %02x: %w", c, err)
	}
	if len(b) > maxTxnBytes {
		return nil, fmt.Errorf("job chunk %02x is %d bytes gzipped (%d jobs), over the %d bytes one Consul transaction carries", c, len(b), len(after), maxTxnBytes)
	}
	return &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVSet, Key: s.chunkKey(c), Value: b}}, nil
}

// chunks splits job records by chunk.
func chunks(jobs map[string]loop.JobRecord) []map[string]loop.JobRecord {
	out := make([]map[string]loop.JobRecord, JobChunks)
	for id, r := range jobs {
		c := chunkOf(id)
		if out[c] == nil {
			out[c] = map[string]loop.JobRecord{}
		}
		out[c][id] = r
	}
	return out
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

// ProgressKey returns the key where job id ("namespace/job") reports its progress: the job
// ID escaped to one key step (jobid.Key), so a dispatched job "parent/dispatch-…" has a key
// of its own, not one below its parent's.
func (s *Store) ProgressKey(id string) string { return s.prefix + dirProgress + jobid.Escape(id) }

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
	var rec loop.RoundRecord
	if err := decodeValue(pair.Value, &rec); err != nil {
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
		var rec loop.RoundRecord
		if err := decodeValue(p.Value, &rec); err != nil {
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
		return v, fmt.Errorf("%s has layout %d, this code reads layout %d (written by another fft-allocator version: use a -consul-prefix of its own)", pair.Key, v.Layout, Layout)
	}
	return v, nil
}
