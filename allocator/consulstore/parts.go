package consulstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hashicorp/consul/api"
)

// A round record of a large cluster outgrows what Consul takes in one
// value and one transaction (kv_max_value_size and txn_max_req_len, both
// 512 KiB by default: 2,000 jobs make a record of about 1.3 MB). Such a
// record is written in parts, before the round's transaction, under
//
//	<prefix>/roundparts/<round>/<sha256 of the record>/<part, 4 digits>
//
// and the round key holds a small stub naming them (recordStub). The
// digest in the path keeps a replica that lost the round's check-and-set
// from overwriting the winner's parts: only the parts the stub names are
// read. The loser's parts stay behind, unread.
const (
	dirRoundParts = "roundparts/"
	// maxRecordValue is the largest record written as one value; bigger
	// ones go in parts of this size. Well under 512 KiB, and under it
	// again after the base64 a transaction adds.
	maxRecordValue = 256 << 10
)

// recordStub is the round key's value for a record written in parts.
type recordStub struct {
	Parts  int    `json:"record_parts"`
	Digest string `json:"record_sha256"`
}

// putParts writes the record's parts when it is too large for one value
// and returns what the round key should hold: the record itself, or the stub.
func (s *Store) putParts(ctx context.Context, round int, rec []byte) ([]byte, error) {
	if len(rec) <= maxRecordValue {
		return rec, nil
	}
	sum := sha256.Sum256(rec)
	stub := recordStub{Digest: hex.EncodeToString(sum[:])}
	for off := 0; off < len(rec); off += maxRecordValue {
		part := rec[off:min(off+maxRecordValue, len(rec))]
		key := s.partKey(round, stub.Digest, stub.Parts)
		if _, err := s.kv.Put(&api.KVPair{Key: key, Value: part}, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
			return nil, fmt.Errorf("writing %s: %w", key, s.needs(err, "write"))
		}
		stub.Parts++
	}
	return json.Marshal(stub)
}

func (s *Store) partKey(round int, digest string, part int) string {
	return fmt.Sprintf("%s%s%012d/%s/%04d", s.prefix, dirRoundParts, round, digest, part)
}

// recordValue returns the record the round key's value stands for: the
// value itself, or the parts its stub names, joined and checked.
func (s *Store) recordValue(ctx context.Context, round int, value []byte) ([]byte, error) {
	if !strings.Contains(string(value), `"record_parts"`) {
		return value, nil
	}
	var stub recordStub
	if err := json.Unmarshal(value, &stub); err != nil || stub.Parts <= 0 {
		return value, nil
	}
	var out []byte
	for k := 0; k < stub.Parts; k++ {
		key := s.partKey(round, stub.Digest, k)
		pair, _, err := s.kv.Get(key, (&api.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", key, s.needs(err, "read"))
		}
		if pair == nil {
			return nil, fmt.Errorf("round %d's record: part %s is missing", round, key)
		}
		out = append(out, pair.Value...)
	}
	if sum := sha256.Sum256(out); hex.EncodeToString(sum[:]) != stub.Digest {
		return nil, fmt.Errorf("round %d's record: its %d parts do not match their digest %s", round, stub.Parts, stub.Digest)
	}
	return out, nil
}
