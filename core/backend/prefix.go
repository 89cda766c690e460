package backend

// Shared prompts under the cache budget: rollouts that open with the same
// prompt (a GRPO group's samples of one task) share its KV blocks in the
// engine's prefix cache, so a backend's CacheTokens counts that prompt once
// while any of them is active there, and each rollout's context beyond it.
// Counting it per rollout, as before, charged a SWE-like group of 8 its
// 3,000-token prompt 8 times — about half of what its rollouts hold on
// average — and new rollouts waited for cache room the engine had
// (bench GRPOStep).

// sharedPrefix is one prompt counted on a backend: its length, and how
// many active rollouts there open with it.
type sharedPrefix struct {
	tokens, n int
}

// Prompt is a rollout's first prompt as the cache budget knows it: its
// length and a hash of its ids.
type Prompt struct {
	key    uint64
	tokens int
}

// PromptOf is the Prompt of ids. Equal keys are taken for equal prompts: a
// 64-bit multiply-xorshift mix a word at a time (3,000 ids in about a
// microsecond), as far as an estimate of cache use needs.
func PromptOf(ids []int) Prompt {
	h := uint64(len(ids)) * 0x9e3779b97f4a7c15
	for _, id := range ids {
		h ^= uint64(id)
		h *= 0xff51afd7ed558ccd
		h ^= h >> 32
	}
	return Prompt{key: h, tokens: len(ids)}
}

// SetPrompt tells the pool the lease's rollout opens with pr, which it
// shares with any other rollout opening with the same ids; its later
// contexts are taken to extend it (the agent loop's do). Call it before the
// lease's first request; a later call is ignored.
func (l *Lease) SetPrompt(pr Prompt) {
	if pr.tokens == 0 {
		return
	}
	p := l.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if l.active || l.promptTokens > 0 {
		return
	}
	l.promptKey, l.promptTokens = pr.key, pr.tokens
}

// sharedOnLocked is how many of l's context tokens are already counted on b
// as a prompt it shares with a rollout active there.
func (p *Pool) sharedOnLocked(l *Lease, b *Backend) int {
	if l.promptTokens == 0 {
		return 0
	}
	if s := b.prompts[l.promptKey]; s != nil {
		return min(s.tokens, l.promptTokens)
	}
	return 0
}

// joinPromptLocked counts l's prompt on b (once for all that share it) and
// returns how much of l's context it covers.
func (p *Pool) joinPromptLocked(l *Lease, b *Backend) int {
	if l.promptTokens == 0 {
		return 0
	}
	s := b.prompts[l.promptKey]
	if s == nil {
		if b.prompts == nil {
			b.prompts = map[uint64]*sharedPrefix{}
		}
		s = &sharedPrefix{tokens: l.promptTokens}
		b.prompts[l.promptKey] = s
		b.ctxTokens += s.tokens
	}
	s.n++
	return min(s.tokens, l.promptTokens)
}

// leavePromptLocked uncounts l's share of its prompt on b.
func (p *Pool) leavePromptLocked(l *Lease, b *Backend) {
	if l.promptTokens == 0 {
		return
	}
	if s := b.prompts[l.promptKey]; s != nil {
		if s.n--; s.n == 0 {
			b.ctxTokens -= s.tokens
			delete(b.prompts, l.promptKey)
		}
	}
}
