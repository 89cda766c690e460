// Package lengthhist remembers how many tokens the rollouts of each task
// generated, so that the next rollouts of the same task (a later epoch's)
// start and are placed by it when the trainer gives no expected_tokens.
// Responses to a prompt are alike from one epoch to the next (RhymeRL,
// arXiv:2508.18588, schedules by the same observation); a task's answers
// of unknown length, started at a step's tail, are what ends it late
// (bench GRPOStep: math 1.40-1.46× the lower bound, 1.08-1.11×
// with lengths known in advance).
package lengthhist

import (
	"bytes"
	"encoding/json"
	"hash/fnv"
	"sync"
)

// window is how many of a task's latest rollouts its expectation follows:
// their mean at first, then a moving average (lengths drift as the policy
// trains).
const window = 8

// Key names a task: its domain and its JSON, insignificant whitespace
// aside (a trainer re-sending a dataset row may format it differently).
type Key uint64

// KeyOf is the key of a domain's task. Task JSON that does not parse is
// hashed as it is.
func KeyOf(domain string, task []byte) Key {
	h := fnv.New64a()
	_, _ = h.Write([]byte(domain))
	_, _ = h.Write([]byte{0})
	var buf bytes.Buffer
	if json.Compact(&buf, task) == nil {
		task = buf.Bytes()
	}
	_, _ = h.Write(task)
	return Key(h.Sum64())
}

type entry struct {
	mean float64
	n    int
}

// Memo holds the expectations of up to its capacity of tasks, the least
// recently seen forgotten first (two generations: when the newer fills
// half the capacity, the older is dropped). A nil Memo remembers nothing.
type Memo struct {
	mu       sync.Mutex
	half     int
	cur, old map[Key]entry
	dirty    bool // changed since the last AppendBinary (persist.go)
}

// New returns a memo of capacity tasks; nil (off) if capacity < 2.
func New(capacity int) *Memo {
	if capacity < 2 {
		return nil
	}
	return &Memo{half: capacity / 2, cur: map[Key]entry{}, old: map[Key]entry{}}
}

// Expect is the tokens a rollout of the task is expected to generate; 0 if
// none of its rollouts has been seen.
func (m *Memo) Expect(k Key) int {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.getLocked(k)
	if !ok {
		return 0
	}
	return int(e.mean + 0.5)
}

// Observe records that a rollout of the task generated tokens.
func (m *Memo) Observe(k Key, tokens int) {
	if m == nil || tokens < 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, _ := m.getLocked(k)
	e.n = min(e.n+1, window)
	e.mean += (float64(tokens) - e.mean) / float64(e.n)
	m.putLocked(k, e)
	m.dirty = true
}

// Len is how many tasks the memo holds.
func (m *Memo) Len() int {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.cur) + len(m.old)
}

// getLocked finds k, moving it to the newer generation.
func (m *Memo) getLocked(k Key) (entry, bool) {
	if e, ok := m.cur[k]; ok {
		return e, true
	}
	e, ok := m.old[k]
	if ok {
		delete(m.old, k)
		m.putLocked(k, e)
	}
	return e, ok
}

// putLocked stores k in the newer generation, turning the generations over
// first if it is full and k is new there.
func (m *Memo) putLocked(k Key, e entry) {
	if _, ok := m.cur[k]; !ok && len(m.cur) >= m.half {
		m.old, m.cur = m.cur, make(map[Key]entry, m.half)
	}
	m.cur[k] = e
}
