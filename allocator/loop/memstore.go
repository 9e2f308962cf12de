package loop

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/nomad-fft/nomad-fft/allocator/report"
)

// MemStore is a Store in memory, with the same check-and-set rule as the
// Consul store: the simulator's store, and the tests'. It also takes and
// returns progress reports (ProgressReporter, ProgressReader).
type MemStore struct {
	mu      sync.Mutex
	ledger  Ledger
	records []*RoundRecord
	keep    bool
	reports map[string]float64
	over    map[string]Override
	full    map[string]report.Report
	// Err, when set, fails every Record and ReportProgress (a store that is down).
	Err error
}

var (
	_ Store            = (*MemStore)(nil)
	_ ProgressReader   = (*MemStore)(nil)
	_ ProgressPruner   = (*MemStore)(nil)
	_ AllocReporter    = (*MemStore)(nil)
	_ ProgressReporter = (*MemStore)(nil)
	_ OverrideReader   = (*MemStore)(nil)
	_ OverrideWriter   = (*MemStore)(nil)
	_ ReportStorer     = (*MemStore)(nil)
	_ ReportReader     = (*MemStore)(nil)
)

// NewMemStore returns an empty store; with keepRecords it keeps every round
// record (Records), else only the ledger.
func NewMemStore(keepRecords bool) *MemStore {
	return &MemStore{keep: keepRecords, reports: map[string]float64{}, over: map[string]Override{}, full: map[string]report.Report{}}
}

// Load returns a copy of the stored ledger.
func (m *MemStore) Load(context.Context) (*Ledger, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.ledger
	l.Jobs = maps.Clone(m.ledger.Jobs)
	if l.Jobs == nil {
		l.Jobs = map[string]JobRecord{}
	}
	return &l, nil
}

// Record stores next (and rec, with keepRecords) if the stored ledger is
// still at prev.Version.
func (m *MemStore) Record(_ context.Context, prev, next *Ledger, rec *RoundRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Err != nil {
		return fmt.Errorf("writing round %d: %w", rec.Round, m.Err)
	}
	if prev.Version != m.ledger.Version {
		return fmt.Errorf("writing round %d: %w", rec.Round, ErrConflict)
	}
	next.Version = m.ledger.Version + 1
	m.ledger = *next
	if m.keep {
		m.records = append(m.records, rec)
	}
	return nil
}

// Records returns the round records kept so far.
func (m *MemStore) Records() []*RoundRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*RoundRecord(nil), m.records...)
}

// Stored returns the stored ledger (not a copy: read it, do not change it).
func (m *MemStore) Stored() *Ledger {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.ledger
	return &l
}

// Replace stores l as another writer would: a Record of a ledger loaded
// before conflicts unless l keeps its version.
func (m *MemStore) Replace(l Ledger) {
	m.mu.Lock()
	m.ledger = l
	m.mu.Unlock()
}

// ReportProgress stores that job id has done `done` work units.
func (m *MemStore) ReportProgress(_ context.Context, id string, done float64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Err != nil {
		return m.Err
	}
	m.reports[id] = done
	return nil
}

// PruneProgress deletes the reports of jobs ids.
func (m *MemStore) PruneProgress(_ context.Context, ids []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Err != nil {
		return m.Err
	}
	for _, id := range ids {
		delete(m.reports, id)
		delete(m.full, id)
	}
	return nil
}

// Progress returns the reports stored so far.
func (m *MemStore) Progress(context.Context) (map[string]float64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.reports), nil
}

// Overrides returns the overrides in force.
func (m *MemStore) Overrides(context.Context) (map[string]Override, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.over), nil
}

// SetOverride puts an override in force for job id.
func (m *MemStore) SetOverride(_ context.Context, id string, o Override) error {
	if err := o.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.over[id] = o
	return nil
}

// LiftOverride lifts job id's override.
func (m *MemStore) LiftOverride(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.over, id)
	return nil
}

// StoreReport stores job id's full report (and its work done).
func (m *MemStore) StoreReport(_ context.Context, id string, r report.Report) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Err != nil {
		return m.Err
	}
	m.full[id], m.reports[id] = r, r.Done
	return nil
}

// StoreAllocReport stores job id's report from alloc unless it goes below
// the stored one of the same allocation (AllocReporter).
func (m *MemStore) StoreAllocReport(_ context.Context, id, alloc string, r report.Report) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Err != nil {
		return m.Err
	}
	var prev *report.Report
	if p, ok := m.full[id]; ok {
		prev = &p
	} else if d, ok := m.reports[id]; ok {
		prev = &report.Report{Done: d}
	}
	if err := CheckAfter(prev, alloc, r); err != nil {
		return err
	}
	r.Alloc = alloc
	m.full[id], m.reports[id] = r, r.Done
	return nil
}

// Reports returns the full reports stored so far.
func (m *MemStore) Reports(context.Context) (map[string]report.Report, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.full), nil
}
