// Package store keeps rollouts and their results until the trainer
// acknowledges them. Memory is the in-process implementation; a durable one
// implements the same interface.
package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prorl/prorl/core/trajectory"
)

// Submission is what an idempotency key maps to.
type Submission struct {
	GroupID    string   `json:"group_id"`
	RolloutIDs []string `json:"rollout_ids"`
	// BodySHA256 identifies the request the key was first used with.
	BodySHA256 string `json:"body_sha256,omitempty"`
	// At is when the key was recorded (Submit sets it); ExpireKeys reads it.
	At time.Time `json:"at,omitzero"`
	// Note is the caller's own record under the key, kept as given: a
	// dynamic-sampling batch's tally, which a restarted host resumes.
	Note json.RawMessage `json:"note,omitempty"`
}

// Keyed is a key to record with a submission, in the same write: a retry
// that finds the key finds the rollouts, whenever the host stopped.
type Keyed struct {
	Key string
	Sub Submission
	// Replace overwrites a record under Key instead of refusing: a Polar
	// task id names its latest submission, and one record a task lets it
	// expire like any key.
	Replace bool
}

// ErrKeyExists refuses a submission whose key is already recorded;
// nothing of it is written.
var ErrKeyExists = errors.New("the key is already recorded")

// Filter selects finished results.
type Filter struct {
	Since   uint64
	GroupID string
	Limit   int
}

// Pending is a submitted rollout that has not finished: persisted before
// the submission is acknowledged, so a crash cannot lose it.
type Pending struct {
	// TaskRef comes first in the record, so deleting one reads it from
	// the record's first bytes without decoding the rest (deletePending).
	TaskRef     string          `json:"task_ref,omitempty"`
	ID          string          `json:"id"`
	Attempt     int             `json:"attempt"`
	Request     json.RawMessage `json:"request"`
	SubmittedAt time.Time       `json:"submitted_at"`
	// Cancelled is a cancellation asked for before the host stopped: a
	// restarted host reports it, and does not run the rollout again.
	Cancelled *trajectory.Failure `json:"cancelled,omitempty"`
	// Attempts are the earlier attempts' ends, so that a restarted host
	// reports them and counts them against the retry budgets.
	Attempts []trajectory.Attempt `json:"attempts,omitempty"`
	// Task is the rollout's task, given apart from Request so that a group
	// of n stores it once, not n times: Submit writes it under TaskRef (its
	// content hash) and Unfinished gives it back, one copy a task. A record
	// with no TaskRef has its task inside Request (a task of one sample, or
	// a record of a host before tasks were stored apart).
	Task json.RawMessage `json:"-"`
}

// SameTask reports equal tasks: at once for the one slice a group's
// samples share, else by their bytes.
func SameTask(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	return len(a) == 0 || &a[0] == &b[0] || bytes.Equal(a, b)
}

// TaskRefOf names a task's bytes in the store: their SHA-256.
func TaskRefOf(task []byte) string {
	sum := sha256.Sum256(task)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Store holds results.
type Store interface {
	// Submit persists submitted rollouts before they are acknowledged, and
	// key, if any, with them: all or nothing (ErrKeyExists if key is).
	Submit(ps []Pending, key *Keyed) error
	// Unfinished lists what was submitted and never finished (after a crash).
	Unfinished() ([]Pending, error)
	// Retry records a new attempt of an unfinished rollout and, if any,
	// how the one before it ended.
	Retry(id string, attempt int, ended *trajectory.Attempt) error
	// Cancel records that the unfinished rollouts among ids are cancelled
	// (those already finished are skipped), durably before it returns.
	Cancel(ids []string, why trajectory.Failure) error
	// Finish records a final result and its marks (r.Marks, all or
	// nothing with it), assigns its sequence number, then publishes it.
	Finish(r *trajectory.Result) error
	// Marks returns the values of the marks written with results whose
	// keys start with prefix, by key. They expire with the idempotency
	// keys, whose table they share.
	Marks(prefix string) map[string]json.RawMessage
	Get(id string) (*trajectory.Result, bool)
	Finished(f Filter) (rs []*trajectory.Result, next uint64)
	// Changed returns a channel closed at the next Finish.
	Changed() <-chan struct{}
	// Ack removes acknowledged results; an error means none was (the
	// store cannot write now).
	Ack(ids []string) (int, error)
	Idempotent(key string) (Submission, bool)
	// ExpireKeys deletes the keys recorded before before; it returns how many.
	ExpireKeys(before time.Time) (int, error)
	// SetState records one of the host's own small values (the policy
	// version and pause), durably before it returns; State reads it back.
	// They never expire.
	SetState(name string, v []byte) error
	State(name string) ([]byte, bool)
	Stats() Stats
	// Healthy is nil while the store takes writes, else why not.
	Healthy() error
	Close() error
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
	state     map[string][]byte
	acked     uint64
	dropped   uint64
}

// NewMemory keeps at most retention unacknowledged results; its sequence
// starts at FreshSeq.
func NewMemory(retention int) *Memory {
	return &Memory{retention: retention, byID: map[string]*trajectory.Result{}, changed: make(chan struct{}), idem: map[string]Submission{}, state: map[string][]byte{}, seq: FreshSeq()}
}

// FreshSeq is where a new store's sequence starts: a thousand numbers a
// millisecond of the clock. A cursor (since, Last-Event-ID) a trainer kept
// from an earlier store, a memory store before a restart or a bbolt file
// since deleted, is then behind every result of this one: starting at 1,
// this store's first results were at or under it and skipped. Under 2^53
// (exact as a JSON number in JavaScript) until the year 2255.
func FreshSeq() uint64 { return uint64(time.Now().UnixMilli()) * 1000 }

// Finish implements Store.
func (m *Memory) Finish(r *trajectory.Result) error {
	m.mu.Lock()
	m.seq++
	r.Seq = m.seq
	if len(r.Marks) > 0 {
		now := time.Now()
		for _, mk := range r.Marks {
			m.idem[mk.Key] = Submission{At: now, Note: mk.Value}
		}
	}
	m.mu.Unlock()
	m.add(r)
	return nil
}

// add publishes a result that already has its sequence number, keeping
// order by sequence (concurrent durable commits may land out of order).
// It returns the results the retention limit pushed out.
func (m *Memory) add(r *trajectory.Result) []*trajectory.Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r.Seq > m.seq {
		m.seq = r.Seq
	}
	m.byID[r.ID] = r
	i := len(m.order)
	for i > 0 && m.order[i-1].Seq > r.Seq {
		i--
	}
	m.order = append(m.order, nil)
	copy(m.order[i+1:], m.order[i:])
	m.order[i] = r
	var dropped []*trajectory.Result
	for len(m.byID) > m.retention && len(m.order) > 0 {
		old := m.order[0]
		m.order = m.order[1:]
		if _, ok := m.byID[old.ID]; ok && old.Seq != 0 {
			delete(m.byID, old.ID)
			m.dropped++
			dropped = append(dropped, old)
		}
	}
	close(m.changed)
	m.changed = make(chan struct{})
	return dropped
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
func (m *Memory) Ack(ids []string) (int, error) {
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
	return n, nil
}

// Healthy implements Store: memory always takes writes.
func (m *Memory) Healthy() error { return nil }

// Idempotent implements Store.
func (m *Memory) Idempotent(key string) (Submission, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.idem[key]
	return s, ok
}

// Marks implements Store.
func (m *Memory) Marks(prefix string) map[string]json.RawMessage {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]json.RawMessage{}
	for k, s := range m.idem {
		if strings.HasPrefix(k, prefix) {
			out[k] = s.Note
		}
	}
	return out
}

// Submit implements Store; memory survives nothing, so only the key is kept.
func (m *Memory) Submit(_ []Pending, key *Keyed) error {
	if key == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.idem[key.Key]; ok && !key.Replace {
		return fmt.Errorf("%w: %q", ErrKeyExists, key.Key)
	}
	sub := key.Sub
	sub.At = time.Now()
	m.idem[key.Key] = sub
	return nil
}

// SetState implements Store.
func (m *Memory) SetState(name string, v []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state[name] = bytes.Clone(v)
	return nil
}

// State implements Store.
func (m *Memory) State(name string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.state[name]
	return bytes.Clone(v), ok
}

// ExpireKeys implements Store.
func (m *Memory) ExpireKeys(before time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k, s := range m.idem {
		if s.At.Before(before) {
			delete(m.idem, k)
			n++
		}
	}
	return n, nil
}

// Unfinished implements Store.
func (m *Memory) Unfinished() ([]Pending, error) { return nil, nil }

// Retry implements Store.
func (m *Memory) Retry(string, int, *trajectory.Attempt) error { return nil }

// Cancel implements Store: nothing outlives the process to cancel.
func (m *Memory) Cancel([]string, trajectory.Failure) error { return nil }

// Close implements Store.
func (m *Memory) Close() error { return nil }

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
