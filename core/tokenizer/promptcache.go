package tokenizer

import (
	"container/list"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/prorl/prorl/core/trajectory"
)

// PromptCache keeps the ids of recently rendered first prompts. A GRPO
// group's n rollouts start from the same conversation: rendering it once
// saves n-1 renders (a /tokenize call to the inference server each, whose
// API process also serves generation, or a Go render) per group. The key is
// the whole input written out, not a hash of it, so two conversations can
// never share an entry.
type PromptCache struct {
	mu    sync.Mutex
	max   int
	ll    *list.List // front: most recently used
	items map[string]*list.Element
	// flying are the renders under way, by key.
	flying map[string]*flight
	hits   int64
	calls  int64
}

type promptEntry struct {
	key string
	ids []int
}

// NewPromptCache keeps at most n prompts.
func NewPromptCache(n int) *PromptCache {
	return &PromptCache{max: n, ll: list.New(), items: map[string]*list.Element{}, flying: map[string]*flight{}}
}

// Render returns t's rendering of the conversation, from the cache when
// the same source rendered the same input before. source names the
// tokenizer (a backend's model, or the local one). The ids are the
// caller's to keep and change.
func (c *PromptCache) Render(ctx context.Context, t Tokenizer, source string, msgs []trajectory.Message, tools []trajectory.Tool, opts RenderOptions) ([]int, error) {
	key := promptKey(source, msgs, tools, opts)
	c.mu.Lock()
	c.calls++
	if e, ok := c.items[key]; ok {
		c.hits++
		c.ll.MoveToFront(e)
		ids := slices.Clone(e.Value.(*promptEntry).ids)
		c.mu.Unlock()
		return ids, nil
	}
	// A group's rollouts start together: the first renders, the rest wait
	// for it (or for their own context's end).
	if f, ok := c.flying[key]; ok {
		c.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if f.err != nil {
			return t.Render(ctx, msgs, tools, opts) // its failure was its own (a cancelled context)
		}
		c.mu.Lock()
		c.hits++
		c.mu.Unlock()
		return slices.Clone(f.ids), nil
	}
	f := &flight{done: make(chan struct{})}
	c.flying[key] = f
	c.mu.Unlock()
	ids, err := t.Render(ctx, msgs, tools, opts)
	f.ids, f.err = slices.Clone(ids), err
	c.mu.Lock()
	delete(c.flying, key)
	if err == nil {
		c.items[key] = c.ll.PushFront(&promptEntry{key: key, ids: f.ids})
		for c.ll.Len() > c.max {
			old := c.ll.Remove(c.ll.Back()).(*promptEntry)
			delete(c.items, old.key)
		}
	}
	c.mu.Unlock()
	close(f.done)
	return ids, err
}

// flight is a render under way that others with the same input wait for.
type flight struct {
	done chan struct{}
	ids  []int
	err  error
}

// Stats are the lookups and the hits so far.
func (c *PromptCache) Stats() (calls, hits int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls, c.hits
}

// promptKey writes out everything a render depends on, each string with
// its length first so that no two inputs give one key.
func promptKey(source string, msgs []trajectory.Message, tools []trajectory.Tool, opts RenderOptions) string {
	b := make([]byte, 0, 1024)
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	str(source)
	b = binary.AppendUvarint(b, uint64(len(msgs)))
	for _, m := range msgs {
		str(m.Role)
		str(m.Content)
		str(m.ReasoningContent)
		str(m.ToolCallID)
		str(m.Name)
		b = binary.AppendUvarint(b, uint64(len(m.ToolCalls)))
		for _, tc := range m.ToolCalls {
			str(tc.ID)
			str(tc.Type)
			str(tc.Function.Name)
			str(tc.Function.Arguments)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(tools)))
	for _, t := range tools {
		str(t.Type)
		str(t.Function.Name)
		str(t.Function.Description)
		str(string(t.Function.Parameters))
	}
	if opts.AddGenerationPrompt {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	var kw []byte
	if len(opts.Kwargs) > 0 {
		kw = appendValue(kw, opts.Kwargs)
	}
	str(string(kw))
	return string(b)
}

// appendValue writes a template kwarg with its type (1 and 1.0 differ, as
// a template may print them), map keys sorted: one text per value.
func appendValue(b []byte, v any) []byte {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for _, k := range keys {
			b = strconv.AppendQuote(b, k)
			b = append(b, ':')
			b = appendValue(b, x[k])
			b = append(b, ',')
		}
		return append(b, '}')
	case []any:
		b = append(b, '[')
		for _, e := range x {
			b = appendValue(b, e)
			b = append(b, ',')
		}
		return append(b, ']')
	case string:
		return strconv.AppendQuote(b, x)
	case float64:
		return strconv.AppendFloat(append(b, "f64:"...), x, 'g', -1, 64)
	}
	return fmt.Appendf(b, "%T:%#v", v, v) // other kinds: Go syntax with their type
}
