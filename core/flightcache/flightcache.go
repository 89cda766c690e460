// Package flightcache keeps the values of recently used keys and fills
// each key once at a time: the rollouts of a GRPO group start together
// and ask for the same thing (their prompt's ids, their task's episode),
// so the first asks and the rest wait for its answer.
package flightcache

import (
	"container/list"
	"context"
	"sync"
)

// Cache holds at most n values, least recently used dropped first. A
// value handed out is shared: callers must not change it.
type Cache[V any] struct {
	mu     sync.Mutex
	max    int
	ll     *list.List // front: most recently used
	items  map[string]*list.Element
	flying map[string]*flight[V]
	hits   int64
	calls  int64
}

type entry[V any] struct {
	key string
	v   V
}

// flight is a fill under way that others with the same key wait for.
type flight[V any] struct {
	done chan struct{}
	v    V
	err  error
}

// New keeps at most n values.
func New[V any](n int) *Cache[V] {
	return &Cache[V]{max: n, ll: list.New(), items: map[string]*list.Element{}, flying: map[string]*flight[V]{}}
}

// Get returns key's value: cached, or the one a fill under way returns,
// or fill's. Errors are not kept: a caller whose wait ends in another's
// failure (a cancelled context of its own, usually) runs fill itself.
func (c *Cache[V]) Get(ctx context.Context, key string, fill func() (V, error)) (V, error) {
	c.mu.Lock()
	c.calls++
	if e, ok := c.items[key]; ok {
		c.hits++
		c.ll.MoveToFront(e)
		v := e.Value.(*entry[V]).v
		c.mu.Unlock()
		return v, nil
	}
	if f, ok := c.flying[key]; ok {
		c.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			var zero V
			return zero, ctx.Err()
		}
		if f.err != nil {
			return fill()
		}
		c.mu.Lock()
		c.hits++
		c.mu.Unlock()
		return f.v, nil
	}
	f := &flight[V]{done: make(chan struct{})}
	c.flying[key] = f
	c.mu.Unlock()
	f.v, f.err = fill()
	c.mu.Lock()
	delete(c.flying, key)
	if f.err == nil {
		c.items[key] = c.ll.PushFront(&entry[V]{key: key, v: f.v})
		for c.ll.Len() > c.max {
			old := c.ll.Remove(c.ll.Back()).(*entry[V])
			delete(c.items, old.key)
		}
	}
	c.mu.Unlock()
	close(f.done)
	return f.v, f.err
}

// Stats are the lookups and the hits so far.
func (c *Cache[V]) Stats() (calls, hits int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls, c.hits
}
