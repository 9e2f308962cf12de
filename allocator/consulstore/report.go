package consulstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/consul/api"

	"github.com/nomad-fft/nomad-fft/allocator/jobid"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/report"
)

var (
	_ loop.ReportStorer   = (*Store)(nil)
	_ loop.ReportReader   = (*Store)(nil)
	_ loop.ProgressPruner = (*Store)(nil)
	_ loop.AllocReporter  = (*Store)(nil)
)

// casTries bounds the check-and-set attempts of one report; reports of one
// job come every few seconds, so a lost race is rare and a second try wins.
const casTries = 5

// StoreAllocReport stores job id's report from allocation alloc as JSON at
// its progress key, check-and-set against the value it read, unless the
// stored report is from the same allocation and further along
// (loop.BehindError): the check holds across replicas.
func (s *Store) StoreAllocReport(ctx context.Context, id, alloc string, r report.Report) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("report of %s: %w", id, err)
	}
	if err := checkJobID(id); err != nil {
		return err
	}
	key := s.ProgressKey(id)
	r.Alloc = alloc
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding the report of %s: %w", id, err)
	}
	for try := 0; try < casTries; try++ {
		pair, _, err := s.kv.Get(key, (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
		if err != nil {
			return fmt.Errorf("reading %s: %w", key, s.needs(err, "read"))
		}
		index := uint64(0)
		if pair != nil {
			index = pair.ModifyIndex
			// A value that does not parse is replaced: it holds no report to keep.
			if prev, perr := report.Parse(pair.Value); perr == nil {
				if err := loop.CheckAfter(&prev, alloc, r); err != nil {
					return err
				}
			}
		}
		ok, _, err := s.kv.CAS(&api.KVPair{Key: key, Value: v, ModifyIndex: index}, (&api.WriteOptions{}).WithContext(ctx))
		if err != nil {
			return fmt.Errorf("writing %s: %w", key, s.needs(err, "write"))
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("writing %s: %w: %d reports of the job raced", key, loop.ErrConflict, casTries)
}

// PruneProgress deletes the progress keys of jobs ids, in transactions of
// at most maxTxnOps deletes.
func (s *Store) PruneProgress(ctx context.Context, ids []string) error {
	for len(ids) > 0 {
		n := min(len(ids), maxTxnOps)
		ops := make(api.TxnOps, 0, n)
		for _, id := range ids[:n] {
			// The IDs come from the store's own keys: deleted as they are.
			ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: s.ProgressKey(id)}})
		}
		if _, err := s.run(ctx, ops, fmt.Sprintf("deleting the progress reports of %d jobs gone or registered again", n)); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

// StoreReport records job id's full report (what its task driver measured) as
// JSON at its progress key, where Progress reads the work done and Reports
// the rest.
func (s *Store) StoreReport(ctx context.Context, id string, r report.Report) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("report of %s: %w", id, err)
	}
	if err := checkJobID(id); err != nil {
		return err
	}
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding the report of %s: %w", id, err)
	}
	if _, err := s.kv.Put(&api.KVPair{Key: s.ProgressKey(id), Value: v}, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		return fmt.Errorf("writing %s: %w", s.ProgressKey(id), err)
	}
	return nil
}

// Reports returns the reports under <prefix>/progress/ by job ID; a plain
// number is a report of the work done only. Unreadable values are left out
// and named in the error, as in Progress.
func (s *Store) Reports(ctx context.Context) (map[string]report.Report, error) {
	pairs, _, err := s.kv.List(s.prefix+dirProgress, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("listing %s%s: %w", s.prefix, dirProgress, err)
	}
	return s.reports(pairs)
}

func (s *Store) reports(pairs api.KVPairs) (map[string]report.Report, error) {
	out := make(map[string]report.Report, len(pairs))
	var errs []error
	for _, p := range pairs {
		id, err := jobid.FromKey(strings.TrimPrefix(p.Key, s.prefix+dirProgress))
		if err != nil {
			errs = append(errs, fmt.Errorf("progress key %s names no job: %w", p.Key, err))
			continue
		}
		r, err := report.Parse(p.Value)
		if err != nil {
			errs = append(errs, fmt.Errorf("progress key %s = %q: %w", p.Key, p.Value, err))
			continue
		}
		out[id] = r
	}
	return out, errors.Join(errs...)
}
