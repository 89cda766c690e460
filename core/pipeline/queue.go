package pipeline

import (
	"container/heap"
	"context"
	"sync"
)

// startQueue holds rollouts waiting for init: the highest dispatch
// priority starts first; within a priority the largest expected_tokens
// (longest expected first, so the longest do not start at a step's tail),
// then submission order. A dynamic-sampling batch keeps submission order:
// which groups it keeps must not depend on their expected length.
// Within a priority, a sample's later attempt starts before first
// attempts: its group waits for it. Rollouts already in a stage are never preempted; only the start order
// changes.
type startQueue struct {
	mu    sync.Mutex
	items startHeap
	seq   uint64
	// ready holds one token per queued rollout, so workers block on a
	// channel (and can leave on shutdown) instead of a condition variable.
	ready chan struct{}
}

func newStartQueue(capacity int) *startQueue {
	return &startQueue{ready: make(chan struct{}, capacity)}
}

// push queues r. It blocks only when more rollouts are queued than the
// capacity, which Submit's reservation rules out; Recover feeds a backlog
// through it from a goroutine.
func (q *startQueue) push(ctx context.Context, r *Rollout) bool {
	q.mu.Lock()
	q.seq++
	it := queued{r: r, prio: r.Req.Priority, seq: q.seq, again: r.Attempt > 1}
	if r.Req.Dynamic == "" {
		it.expected = r.Req.Expected()
	}
	heap.Push(&q.items, it)
	q.mu.Unlock()
	var done <-chan struct{}
	if ctx != nil { // Submit may come before Start
		done = ctx.Done()
	}
	select {
	case q.ready <- struct{}{}:
		return true
	case <-done:
		return false
	}
}

// pop waits for the next rollout to start, or for ctx to end.
func (q *startQueue) pop(ctx context.Context) (*Rollout, bool) {
	select {
	case <-q.ready:
	case <-ctx.Done():
		return nil, false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return heap.Pop(&q.items).(queued).r, true
}

// len is the number of queued rollouts.
func (q *startQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

func (q *startQueue) capacity() int { return cap(q.ready) }

type queued struct {
	r              *Rollout
	prio, expected int
	seq            uint64
	again          bool
}

type startHeap []queued

func (h startHeap) Len() int { return len(h) }
func (h startHeap) Less(i, j int) bool {
	if h[i].prio != h[j].prio {
		return h[i].prio > h[j].prio
	}
	if h[i].again != h[j].again {
		return h[i].again
	}
	if h[i].expected != h[j].expected {
		return h[i].expected > h[j].expected
	}
	return h[i].seq < h[j].seq
}
func (h startHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *startHeap) Push(x any)   { *h = append(*h, x.(queued)) }
func (h *startHeap) Pop() any {
	old := *h
	n := len(old)
	it := old[n-1]
	old[n-1] = queued{}
	*h = old[:n-1]
	return it
}
