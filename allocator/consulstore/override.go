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
)

var (
	_ loop.OverrideReader = (*Store)(nil)
	_ loop.OverrideWriter = (*Store)(nil)
)

// dirOverrides holds the operators' decisions, one key per job:
// <prefix>/overrides/<namespace>/<job> = a loop.Override (JSON). Only
// operators write it: the shipped Consul policy gives the allocator read
// access there and no write (cmd/fft-allocator/README.md, "Operator
// overrides").
const dirOverrides = "overrides/"

// OverrideKey returns the key of job id's override ("namespace/job").
func (s *Store) OverrideKey(id string) string { return s.prefix + dirOverrides + id }

// Overrides returns the overrides in force, by job ID. A value that does
// not decode fails the read (the round then fails too, rather than start a
// job an operator meant to hold), naming its key.
func (s *Store) Overrides(ctx context.Context) (map[string]loop.Override, error) {
	pairs, _, err := s.kv.List(s.prefix+dirOverrides, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("listing %s%s: %w", s.prefix, dirOverrides, err)
	}
	out := make(map[string]loop.Override, len(pairs))
	var errs []error
	for _, p := range pairs {
		var o loop.Override
		if err := json.Unmarshal(p.Value, &o); err != nil {
			errs = append(errs, fmt.Errorf("override %s: %w (remove it with fftctl resume)", p.Key, err))
			continue
		}
		if err := o.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("override %s: %w (remove it with fftctl resume)", p.Key, err))
			continue
		}
		out[strings.TrimPrefix(p.Key, s.prefix+dirOverrides)] = o
	}
	return out, errors.Join(errs...)
}

// SetOverride puts o in force for job id ("namespace/job").
func (s *Store) SetOverride(ctx context.Context, id string, o loop.Override) error {
	if err := checkJobID(id); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	if _, err := s.kv.Put(&api.KVPair{Key: s.OverrideKey(id), Value: b}, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		return fmt.Errorf("writing %s: %w", s.OverrideKey(id), err)
	}
	return nil
}

// LiftOverride removes job id's override; there being none is no error.
func (s *Store) LiftOverride(ctx context.Context, id string) error {
	if err := checkJobID(id); err != nil {
		return err
	}
	if _, err := s.kv.Delete(s.OverrideKey(id), (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		return fmt.Errorf("deleting %s: %w", s.OverrideKey(id), err)
	}
	return nil
}

// checkJobID checks a "namespace/job" ID (package jobid): a key below the
// prefix must never step out of its folder.
func checkJobID(id string) error {
	_, _, err := jobid.Split(id)
	return err
}
