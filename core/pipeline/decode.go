package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/prorl/prorl/core/tokenizer"
)

// TokenTexts is each token's own text (for viewers): by the host's Go
// tokenizer when it has one, else by a backend's /detokenize, one call per
// distinct id; at most max tokens.
func (p *Pipeline) TokenTexts(ctx context.Context, ids []int, max int) ([]string, error) {
	if len(ids) > max {
		ids = ids[:max]
	}
	var tok tokenizer.Tokenizer
	if p.runner.Local != nil {
		tok = p.runner.Local
	} else {
		for _, b := range p.d.Pool.Backends() {
			tok = b.Client
			break
		}
	}
	if tok == nil {
		return nil, errors.New("no tokenizer: the host has no tokenizer.model_dir and no backend")
	}
	seen := map[int]string{}
	out := make([]string, len(ids))
	for i, id := range ids {
		s, ok := seen[id]
		if !ok {
			var err error
			if s, err = tok.Decode(ctx, []int{id}); err != nil {
				return nil, fmt.Errorf("decode token %d: %w", id, err)
			}
			seen[id] = s
		}
		out[i] = s
	}
	return out, nil
}
