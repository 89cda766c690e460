// Package store keeps rollouts and their results until the trainer
// acknowledges them. Memory is the in-process implementation; a durable one
// implements the same interface.
package store

import (
	"context"
	"sync"

	"github.com/prorl/prorl/core/trajectory"
)

// Submission is what an idempotency key maps to.
type Submission struct {
	GroupID    string   `json:"group_id"`
	RolloutIDs []string `json:"rollout_ids"`
}

// Filter selects finished results.
type Filter struct {
	Since   uint64
	GroupID string
	Limit   int
}

// Store holds results.
type Store interface {
	// Finish records a final result, assigns its sequence number, then publishes it.
	Finish(r *trajectory.Result) error
	Get(id string) (*trajectory.Result, bool)
	Finished(f Filter) (rs []*trajectory.Result, next uint64)
	// Changed returns a channel closed at the next Finish.
	Changed() <-chan struct{}
	Ack(ids []string) int
	Idempotent(key string) (Submission, bool)
	// Remember stores a key's submission unless the key exists; it returns the stored one.
	Remember(key string, s Submission) (Submission, bool)
	Stats() Stats
}

// Stats are the store's counters.
type Stats struct {
	Finished int    `json:"finished"`
	Acked    uint64 `json:"acked"`
	Dropped  uint64 `json:"dropped"`
	LastSeq  uint64 `json:"last_seq"`
}

// Memory is a Store in process memory.
type Memory struct {
	mu        sync.Mutex
	retention int
	byID      map[string]*trajectory.Result
	order     []*trajectory.Result // finished, by seq; acked entries are nil-ed lazily
	seq       uint64
	changed   chan struct{}
	idem      map[string]Submission
	acked     uint64
	dropped   uint64
}

// NewMemory keeps at most retention unacknowledged results.
func NewMemory(retention int) *Memory {
	return &Memory{retention: retention, byID: map[string]*trajectory.Result{}, changed: make(chan struct{}), idem: map[string]Submission{}}
}

// Finish implements Store.
func (m *Memory) Finish(r *trajectory.Result) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	r.Seq = m.seq
	m.byID[r.ID] = r
	m.order = append(m.order, r)
	for len(m.byID) > m.retention && len(m.order) > 0 {
		old := m.order[0]
		m.order = m.order[1:]
		if _, ok := m.byID[old.ID]; ok && old.Seq != 0 {
			delete(m.byID, old.ID)
			m.dropped++
		}
	}
	close(m.changed)
	m.changed = make(chan struct{})
	return nil
}

// Get implements Store.
func (m *Memory) Get(id string) (*trajectory.Result, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.byID[id]
	return r, ok
}

// Finished implements Store: unacknowledged results after f.Since, in order.
func (m *Memory) Finished(f Filter) ([]*trajectory.Result, uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	next := f.Since
	var out []*trajectory.Result
	// order is sorted by seq: binary search for the start.
	lo, hi := 0, len(m.order)
	for lo < hi {
		mid := (lo + hi) / 2
		if m.order[mid].Seq <= f.Since {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	for _, r := range m.order[lo:] {
		if f.Limit > 0 && len(out) >= f.Limit {
			break
		}
		next = r.Seq
		if _, live := m.byID[r.ID]; !live {
			continue
		}
		if f.GroupID != "" && r.GroupID != f.GroupID {
			continue
		}
		out = append(out, r)
	}
	return out, next
}

// Changed implements Store.
func (m *Memory) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// Ack implements Store.
func (m *Memory) Ack(ids []string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, id := range ids {
		if _, ok := m.byID[id]; ok {
			delete(m.byID, id)
			n++
		}
	}
	m.acked += uint64(n)
	// Compact the order slice when most of it is acknowledged.
	if len(m.order) > 1024 && len(m.byID) < len(m.order)/4 {
		kept := m.order[:0:0]
		for _, r := range m.order {
			if _, ok := m.byID[r.ID]; ok {
				kept = append(kept, r)
			}
		}
		m.order = kept
	}
	return n
}

// Idempotent implements Store.
func (m *Memory) Idempotent(key string) (Submission, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.idem[key]
	return s, ok
}

// Remember implements Store.
func (m *Memory) Remember(key string, s Submission) (Submission, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.idem[key]; ok {
		return old, false
	}
	m.idem[key] = s
	return s, true
}

// Stats implements Store.
func (m *Memory) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Stats{Finished: len(m.byID), Acked: m.acked, Dropped: m.dropped, LastSeq: m.seq}
}

// Wait blocks until a result after since exists or ctx ends.
func Wait(ctx context.Context, s Store, f Filter) ([]*trajectory.Result, uint64) {
	for {
		ch := s.Changed()
		rs, next := s.Finished(f)
		if len(rs) > 0 {
			return rs, next
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, next
		}
	}
}
