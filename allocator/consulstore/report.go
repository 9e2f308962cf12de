package consulstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/consul/api"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/report"
)

var (
	_ loop.ReportStorer = (*Store)(nil)
	_ loop.ReportReader = (*Store)(nil)
)

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
		r, err := report.Parse(p.Value)
		if err != nil {
			errs = append(errs, fmt.Errorf("progress key %s = %q: %w", p.Key, p.Value, err))
			continue
		}
		out[strings.TrimPrefix(p.Key, s.prefix+dirProgress)] = r
	}
	return out, errors.Join(errs...)
}
