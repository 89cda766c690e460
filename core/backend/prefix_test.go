package backend

import (
	"context"
	"testing"
)

// TestAdmissionSharedPrompt: rollouts opening with the same prompt count it
// once on a backend's cache budget while any of them is active there; a
// different prompt of the same length does not share; the prompt leaves
// the count with the last of them.
func TestAdmissionSharedPrompt(t *testing.T) {
	prompt := make([]int, 60)
	for i := range prompt {
		prompt[i] = 1000 + i
	}
	other := append([]int(nil), prompt...)
	other[59]++
	if PromptOf(prompt) == PromptOf(other) {
		t.Fatal("two prompts one id apart hash alike")
	}
	tests := []struct {
		name     string
		second   []int
		wantWait bool
		counted  int // with both active: 60 + 20 + 20 shared, else 80 + 80
	}{
		{"same prompt", prompt, false, 100},
		{"other prompt", other, true, 0},
		{"no prompt told", nil, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, bs := newPool(t, 1, 0)
			bs[0].CacheTokens = 150
			p.SetCacheOvercommit(1)
			ctx := context.Background()
			l1, _ := p.Acquire(ctx, 0)
			l2, _ := p.Acquire(ctx, 0)
			l1.SetPrompt(PromptOf(prompt))
			if tc.second != nil {
				l2.SetPrompt(PromptOf(tc.second))
			}
			waitRouted(t, routeAsync(ctx, l1, 0, 60)).end()
			waitRouted(t, routeAsync(ctx, l1, 0, 80)).end()
			w := routeAsync(ctx, l2, 0, 80)
			if tc.wantWait {
				notYet(t, w) // 80 + 80 > 150
				l1.Release()
				waitRouted(t, w).end()
				l2.Release()
				if st := p.List()[0]; st.ContextTokens != 0 {
					t.Fatalf("context counted %d after every release", st.ContextTokens)
				}
				return
			}
			waitRouted(t, w).end()
			if st := p.List()[0]; st.ContextTokens != tc.counted {
				t.Fatalf("context counted %d, want %d", st.ContextTokens, tc.counted)
			}
			// A later SetPrompt changes nothing.
			l2.SetPrompt(PromptOf(other))
			waitRouted(t, routeAsync(ctx, l2, 0, 90)).end()
			if st := p.List()[0]; st.ContextTokens != tc.counted+10 {
				t.Fatalf("context counted %d, want %d", st.ContextTokens, tc.counted+10)
			}
			l1.Release()
			if st := p.List()[0]; st.ContextTokens != 90 {
				t.Fatalf("context counted %d with one rollout of 90 left", st.ContextTokens)
			}
			l2.Release()
			if st := p.List()[0]; st.ContextTokens != 0 {
				t.Fatalf("context counted %d after every release", st.ContextTokens)
			}
		})
	}
}

// TestAdmissionSharedPromptMoves: a rollout that moves to another backend
// takes its share there and leaves the prompt counted for the others.
func TestAdmissionSharedPromptMoves(t *testing.T) {
	p, bs, a, b, c := twoOnFirst(t)
	pr := PromptOf([]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	for _, l := range []*Lease{a, b, c} {
		l.SetPrompt(pr)
	}
	ctx := context.Background()
	ra := waitRouted(t, routeAsync(ctx, a, 0, 10))
	ra.end()
	ra = waitRouted(t, routeAsync(ctx, a, 0, 30))  // holds the first's one slot
	rb := waitRouted(t, routeAsync(ctx, b, 0, 12)) // moves to the second
	if rb.b != bs[1] {
		t.Fatalf("b on %s, want the second backend", rb.b.ID)
	}
	rb.end()
	ra.end()
	rc := waitRouted(t, routeAsync(ctx, c, 0, 10))
	rc.end()
	st := p.List()
	if st[0].ContextTokens != 30 || st[1].ContextTokens != 12 {
		t.Fatalf("contexts counted %d and %d, want 30 and 12 (10 shared + 2)", st[0].ContextTokens, st[1].ContextTokens)
	}
	for _, l := range []*Lease{a, b, c} {
		l.Release()
	}
	for _, s := range p.List() {
		if s.ContextTokens != 0 {
			t.Fatalf("%s: context counted %d after every release", s.ID, s.ContextTokens)
		}
	}
}
