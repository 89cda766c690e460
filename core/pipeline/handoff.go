package pipeline

import (
	"context"
	"sync"
)

// handoff passes rollouts to the workers of the next stage, first in first
// out, and hands each to the worker that went idle most recently. A channel
// would wake the one idle longest: with 1,200 run workers and a hundred busy,
// nearly every worker took a rollout between two collections, and each had
// its stack shrunk by the collector while it waited, to be grown again by
// its next exchange (copystack 3% of the host's CPU). Handed out last in,
// first out, the same hundred or so workers keep their stacks warm.
type handoff struct {
	mu    sync.Mutex
	items []*Rollout      // queued rollouts, oldest first
	idle  []chan *Rollout // idle workers' mailboxes, most recent last
	room  chan struct{}   // one token per queued rollout: the queue's bound
}

func newHandoff(capacity int) *handoff {
	return &handoff{room: make(chan struct{}, capacity)}
}

// put hands r to the most recently idle worker, or queues it. It blocks
// while the queue is full and no worker is idle, until ctx ends (false).
func (h *handoff) put(ctx context.Context, r *Rollout) bool {
	if h.give(r) {
		return true
	}
	select {
	case h.room <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	h.mu.Lock()
	if h.giveLocked(r) {
		// A worker went idle while this waited for room.
		h.mu.Unlock()
		<-h.room
		return true
	}
	h.items = append(h.items, r)
	h.mu.Unlock()
	return true
}

// give hands r to an idle worker if there is one.
func (h *handoff) give(r *Rollout) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.giveLocked(r)
}

// giveLocked sends under the lock: a worker leaving on its context then
// either is still on the idle list or finds r in its mailbox. (Sent after
// the unlock, r could arrive after the leaving worker had looked.) The
// mailbox is empty while its worker is idle, so the send never blocks.
func (h *handoff) giveLocked(r *Rollout) bool {
	n := len(h.idle)
	if n == 0 {
		return false
	}
	w := h.idle[n-1]
	h.idle[n-1] = nil
	h.idle = h.idle[:n-1]
	if testHookPopped != nil {
		testHookPopped()
	}
	w <- r
	return true
}

// testHookPopped runs between taking a worker off the idle list and handing
// it the rollout (tests only).
var testHookPopped func()

// get returns the oldest queued rollout, or waits as the newest idle worker
// on its mailbox (capacity 1, one per worker) until handed one or ctx ends.
func (h *handoff) get(ctx context.Context, mailbox chan *Rollout) (*Rollout, bool) {
	h.mu.Lock()
	if len(h.items) > 0 {
		r := h.items[0]
		h.items[0] = nil
		h.items = h.items[1:]
		h.mu.Unlock()
		<-h.room
		return r, true
	}
	h.idle = append(h.idle, mailbox)
	h.mu.Unlock()
	select {
	case r := <-mailbox:
		return r, true
	case <-ctx.Done():
	}
	h.mu.Lock()
	for i, w := range h.idle {
		if w == mailbox {
			h.idle = append(h.idle[:i], h.idle[i+1:]...)
			break
		}
	}
	h.mu.Unlock()
	// Handed one just before it left the idle list: it is this worker's.
	select {
	case r := <-mailbox:
		return r, true
	default:
		return nil, false
	}
}

// len is the number of queued rollouts.
func (h *handoff) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.items)
}
