package tokenizer

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"

	"github.com/prorl/prorl/core/flightcache"
	"github.com/prorl/prorl/core/trajectory"
)

// PromptCache keeps the ids of recently rendered first prompts. A GRPO
// group's n rollouts start from the same conversation: rendering it once
// saves n-1 renders (a /tokenize call to the inference server each, whose
// API process also serves generation, or a Go render) per group. The key is
// the whole input written out, not a hash of it, so two conversations can
// never share an entry.
type PromptCache struct{ c *flightcache.Cache[[]int] }

// NewPromptCache keeps at most n prompts.
func NewPromptCache(n int) *PromptCache { return &PromptCache{c: flightcache.New[[]int](n)} }

// Render returns t's rendering of the conversation, from the cache when
// the same source rendered the same input before. source names the
// tokenizer (a backend's model, or the local one). The ids are the
// caller's to keep and change.
func (c *PromptCache) Render(ctx context.Context, t Tokenizer, source string, msgs []trajectory.Message, tools []trajectory.Tool, opts RenderOptions) ([]int, error) {
	ids, err := c.c.Get(ctx, promptKey(source, msgs, tools, opts), func() ([]int, error) {
		ids, err := t.Render(ctx, msgs, tools, opts)
		return slices.Clip(ids), err
	})
	return slices.Clone(ids), err
}

// Stats are the lookups and the hits so far.
func (c *PromptCache) Stats() (calls, hits int64) { return c.c.Stats() }

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
