package consulstore

import (
	"context"
	"encoding/json"
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
func (s *Store) OverrideKey(id string) string { return s.prefix + dirOverrides + jobid.Escape(id) }

// Overrides returns the overrides in force, by job ID. A bad entry never
// stops the round: one whose key names no job (not <namespace>/<job>) is
// skipped, since it can apply to none; one whose value does not decode or
// validate holds its job as a park would, since it may have been meant as
// one and starting a job an operator meant to hold is the worse mistake.
// Both are logged with the key and the fix (WithLog), and the held job's
// audit line says why. Only a failed read of Consul is an error.
func (s *Store) Overrides(ctx context.Context) (map[string]loop.Override, error) {
	pairs, _, err := s.kv.List(s.prefix+dirOverrides, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("listing %s%s: %w", s.prefix, dirOverrides, err)
	}
	out, problems := decodeOverrides(s.prefix+dirOverrides, pairs)
	for _, p := range problems {
		s.logf("bad override: "+p.what, "key", p.key, "error", p.err)
	}
	return out, nil
}

// overrideProblem is one bad entry under overrides/: its key, what was done
// about it, and why.
type overrideProblem struct {
	key, what string
	err       error
}

// unreadableBy is the By of the park that holds a job whose override is unreadable.
const unreadableBy = "fft-allocator: unreadable override"

// decodeOverrides reads the entries under dir (see Overrides).
func decodeOverrides(dir string, pairs api.KVPairs) (map[string]loop.Override, []overrideProblem) {
	out := make(map[string]loop.Override, len(pairs))
	var problems []overrideProblem
	for _, p := range pairs {
		id, err := jobid.FromKey(strings.TrimPrefix(p.Key, dir))
		if err != nil {
			problems = append(problems, overrideProblem{p.Key, "skipped: its key names no job; delete it (consul kv delete)", err})
			continue
		}
		var o loop.Override
		err = json.Unmarshal(p.Value, &o)
		if err == nil {
			err = o.Validate()
		}
		if err != nil {
			problems = append(problems, overrideProblem{p.Key, "its job is held until it is fixed or lifted (fftctl resume)", err})
			note := err.Error()
			if len(note) > loop.MaxOverrideNote {
				note = note[:loop.MaxOverrideNote]
			}
			o = loop.Override{Action: loop.OverridePark, By: unreadableBy, Note: note}
		}
		out[id] = o
	}
	return out, problems
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
