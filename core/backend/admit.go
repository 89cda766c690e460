package backend

import (
	"container/heap"
	"context"
	"sort"
	"time"
)

// Admission: a backend with Slots (its engine's batch size, vLLM's
// --max-num-seqs) is sent at most that many generation requests at once.
// The rest wait here rather than in the engine's own queue, because a
// request queued inside one engine cannot move when another engine frees a
// slot: with engine-side queues a step ended with fast backends idle while
// slow ones still worked through theirs. A freed slot goes to the best
// request waiting for that backend (waiter.before); when none waits for
// it, to the best one waiting
// anywhere (work stealing: its lease moves, so its conversation is
// prefilled once more there; SetMigrateMaxTokens can bound the context
// that moves). Group-aware leases are not also rebalanced under admission
// (route.go): the two together moved SWE-like rollouts 3,200 times in a
// step of 512, each prefilling its whole context again; stealing alone
// moves 110-180 (bench GRPOStep).
//
// A backend with CacheTokens also bounds the rollouts active on it: a
// rollout's first request there waits while the contexts of those already
// active would not leave room for its own (unless none is active), the
// room being CacheTokens times the overcommit (SetCacheOvercommit). With
// SWE-like agents the contexts of every rollout in flight far exceed the
// fleet's KV cache; admitting them all made each turn's context evicted
// during its tool call, and half the engines' time went to prefilling it
// again. Counting every active context at its full size (overcommit 1)
// errs the other way: a rollout in a tool call holds no slot and need not
// stay cached (the engine evicts the least recently used), and its
// backend's slots idled while new rollouts waited for cache room.
//
// Backends of different speeds (Weight): a slower backend takes a rollout's
// first request only while more new requests wait than the faster backends
// would start before it could finish there. A request started on a backend
// of speed s instead of one of speed f takes f/s times as long, and the
// faster backends start Slots·f/T requests per unit of time (T: a
// request's time at speed 1), so waiting for them is quicker while fewer
// than Σ Slots·(f/s − 1) are ahead of it — whatever T is, so no length need
// be known. With greedy dispatch the slow backends took requests to the
// last and finished a math step a long answer after the fast ones had gone
// idle. A rollout already running on the slower backend stays (its context
// is cached there). A slower backend whose generations can be evacuated at
// the tail (evacuate.go) is not held back: the tail is dealt with there.

type waiter struct {
	l      *Lease
	home   *Backend
	prio   int
	seq    uint64
	tokens int
	got    chan *Backend // buffered: the dispatcher never blocks
	b      *Backend      // set under the pool's lock once admitted
	start  time.Time     // when admitted
}

// admitLocked decides at once or queues: the backend to use now, or a
// waiter to wait on.
func (p *Pool) admitLocked(l *Lease, b *Backend, prio, tokens int) (*Backend, *waiter) {
	queued := p.newWaitingLocked()
	if from := l.evacuated; from != nil {
		// Evacuated: to a faster backend with room, if there is one.
		l.evacuated = nil
		if o := p.freeBackendLocked(l, tokens, queued); o != nil && o.weight() > from.weight() {
			return p.moveLocked(l, o), nil
		}
	}
	if p.fitsLocked(l, b, tokens) && !p.waitingForLocked(b, queued) && !p.leaveToFasterLocked(l, b, tokens, queued+1) {
		return b, nil
	}
	// Its backend is full: a backend with room and nobody waiting for it
	// takes the request now (the fastest such).
	if o := p.freeBackendLocked(l, tokens, queued); o != nil && p.movableLocked(tokens) && !p.downgradeLocked(l, o) {
		return p.moveLocked(l, o), nil
	}
	p.wseq++
	w := &waiter{l: l, home: b, prio: prio, seq: p.wseq, tokens: tokens, got: make(chan *Backend, 1)}
	p.waiting = append(p.waiting, w)
	return nil, w
}

// downgradeLocked is whether l may not move to o, a slower backend: a
// rollout under way never does (its context is cached where it is, and a
// slot there frees within a turn), and a new one only if its expected work
// (Hint.Cost) is no more than that of the rollouts o holds, on average (of
// all rollouts, while o holds none).
// A rollout's own time goes as 1/speed whatever the load, so the long ones
// belong on the faster backends, as group placement puts them; taking
// whatever waited when a slot freed, the half-speed engines took the
// whole group of the step's fourth costliest at its first request in 5 of
// 11 runs, and the step ended on its longest rollout (bench
// GRPOStep, SWE-like: 28 turns and 200 s of tools; it decoded
// 113-159 s there against 83-91 s on a fast engine, and the step took
// 349-371 s against 295-313 s). With no costs known every rollout counts
// alike and new ones move as before.
func (p *Pool) downgradeLocked(l *Lease, o *Backend) bool {
	if p.route.PerRequest() || o.weight() >= l.B.weight() || l.B.index < 0 {
		return false // (its backend out of rotation: it must move)
	}
	if l.active {
		return true
	}
	load, n := o.load, o.inflight
	if n == 0 { // nothing there yet: the average of all
		for _, b := range p.h {
			load, n = load+b.load, n+b.inflight
		}
	}
	return n > 0 && l.hint.cost() > load/float64(n)
}

// movableLocked is whether a request of tokens context may move its
// rollout to another backend (per-request routings hold none: always).
func (p *Pool) movableLocked(tokens int) bool {
	return p.route.PerRequest() || p.migrateMax <= 0 || tokens <= p.migrateMax
}

// fitsLocked is whether b can take l's request of tokens context now.
func (p *Pool) fitsLocked(l *Lease, b *Backend, tokens int) bool {
	return (b.Slots <= 0 || b.requests < b.Slots) && !p.evacuatedLocked(b) && p.fitsCacheLocked(l, b, tokens)
}

// fitsCacheLocked is whether l's context fits b's cache budget.
func (p *Pool) fitsCacheLocked(l *Lease, b *Backend, tokens int) bool {
	if b.CacheTokens <= 0 || p.route.PerRequest() || (l.active && l.B == b) || b.ctxTokens == 0 {
		return true
	}
	return float64(b.ctxTokens+tokens-min(p.sharedOnLocked(l, b), tokens)) <= float64(b.CacheTokens)*p.overcommit
}

// DefaultCacheOvercommit is the default overcommit of a backend's
// CacheTokens. Bench GRPOStep, SWE-like, group-aware, three runs
// each: slot use while work waited 94-95% at 1, 96-97% at 1.5, 2 and 3;
// prefill grew 5% at 1.5 and 8% at 2 (contexts evicted during tool calls);
// the makespans were the same within run-to-run noise (301-340 s).
const DefaultCacheOvercommit = 1.5

// startLocked counts the request on b (and l's context, once admitted).
// It returns the request's start time (one lease may have several in
// flight: a gateway session's parallel calls).
func (p *Pool) startLocked(l *Lease, b *Backend, tokens int) (start time.Time) {
	b.requests++
	b.reqTotal++
	start = time.Now()
	b.startSum += sinceEpoch(start)
	if p.route.PerRequest() {
		return
	}
	if l.active && l.B == b {
		b.ctxTokens += tokens - l.ctx
	} else {
		l.shared = min(p.joinPromptLocked(l, b), tokens)
		b.ctxTokens += tokens - l.shared
		l.active = true
	}
	l.ctx = tokens
	return start
}

// deactivateLocked takes l's context off its backend.
func (p *Pool) deactivateLocked(l *Lease) {
	if l.active {
		l.B.ctxTokens -= l.ctx - l.shared
		p.leavePromptLocked(l, l.B)
		l.active, l.ctx, l.shared = false, 0, 0
	}
}

// waitingForLocked is whether a request waits only for a slot of b, with
// queued new requests waiting: a newcomer must not pass it (one waiting for
// cache room does not hold up the rollouts already there, or they could
// never finish and make room; nor does one b leaves to faster backends).
func (p *Pool) waitingForLocked(b *Backend, queued int) bool {
	for _, w := range p.waiting {
		if w.home == b && p.fitsCacheLocked(w.l, b, w.tokens) && !p.leaveToFasterLocked(w.l, b, w.tokens, queued) {
			return true
		}
	}
	return false
}

// freeBackendLocked is the fastest healthy backend with room for l's
// request that no request waits for and that need not leave it to a faster
// one, with queued other new requests waiting (nil: none).
func (p *Pool) freeBackendLocked(l *Lease, tokens, queued int) *Backend {
	var best *Backend
	for _, c := range p.h {
		if c.admits() && c != l.B && p.fitsLocked(l, c, tokens) && !p.waitingForLocked(c, queued) && !p.leaveToFasterLocked(l, c, tokens, queued+1) &&
			(best == nil || c.weight() > best.weight() || c.weight() == best.weight() && c.requests < best.requests) {
			best = c
		}
	}
	return best
}

// moveLocked moves a sticky lease to o (per-request routings hold no
// backend between requests: nothing to move).
func (p *Pool) moveLocked(l *Lease, o *Backend) *Backend {
	if p.route.PerRequest() || l.B == o {
		return o
	}
	cur := l.B
	p.deactivateLocked(l)
	p.leaveGroupLocked(l)
	cur.inflight--
	cur.load -= l.hint.cost()
	if cur.index >= 0 {
		heap.Fix(&p.h, cur.index)
	}
	o.inflight++
	o.assigned++
	o.load += l.hint.cost()
	if o.index >= 0 {
		heap.Fix(&p.h, o.index)
	}
	o.migratedIn++
	l.B = o
	return o
}

// dispatchLocked gives free slots to waiting requests: each backend's own
// first, then, fastest backends first, the best waiting anywhere.
func (p *Pool) dispatchLocked() {
	if len(p.waiting) == 0 {
		return
	}
	better := (*waiter).before
	queued := p.newWaitingLocked()
	pick := func(b *Backend, own bool) int {
		at := -1
		for i, w := range p.waiting {
			// The speed rule (a loop over the backends) last: only for a better candidate.
			if (w.home == b || !own && p.movableLocked(w.tokens) && !p.downgradeLocked(w.l, b)) && p.fitsLocked(w.l, b, w.tokens) &&
				(at < 0 || better(w, p.waiting[at])) && !p.leaveToFasterLocked(w.l, b, w.tokens, queued) {
				at = i
			}
		}
		return at
	}
	bs := make([]*Backend, 0, len(p.h))
	for _, b := range p.h {
		if b.admits() {
			bs = append(bs, b)
		}
	}
	sort.Slice(bs, func(i, j int) bool {
		return bs[i].weight() > bs[j].weight() || bs[i].weight() == bs[j].weight() && bs[i].ID < bs[j].ID
	})
	for _, own := range []bool{true, false} {
		for _, b := range bs {
			for {
				at := pick(b, own)
				if at < 0 {
					break
				}
				w := p.waiting[at]
				p.waiting = append(p.waiting[:at], p.waiting[at+1:]...)
				if w.isNew() {
					queued--
				}
				w.b = p.moveLocked(w.l, b)
				w.start = p.startLocked(w.l, w.b, w.tokens)
				w.got <- w.b
			}
		}
	}
}

// before is whether a free slot goes to w before o: the lower priority
// value (the trainer's priority, as vLLM orders); then a rollout under way
// before a new one; new ones by the larger expected work (Hint.Cost);
// rollouts under way by the one that first asked for a slot earlier; then
// the older request. Finishing what has started first: when a new rollout
// of a costlier group could take the slot of a turn of one under way,
// each turn waited behind new starts, a rollout's waits added up over its
// turns, and rollouts started early finished last (bench
// GRPOStep, SWE-like: a 12-turn rollout waited 205 s of a 368 s
// step). The engines' caches also hold fewer half-done conversations.
// Larger expected work first among new ones is LPT: the longest start
// early rather than at the tail. The earliest started first among those
// under way: the step's longest path is one of them, and by the request
// alone it waited 12-20 s over its 28 turns (the same bench, eight
// interleaved pairs: 2-5 s, and the step 298-326 s against 307-349 s).
func (w *waiter) before(o *waiter) bool {
	if w.prio != o.prio {
		return w.prio < o.prio
	}
	if wn, on := w.isNew(), o.isNew(); wn != on {
		return on
	} else if wn && w.l.hint.Cost != o.l.hint.Cost {
		return w.l.hint.Cost > o.l.hint.Cost
	} else if !wn && w.l.asked != o.l.asked {
		return w.l.asked < o.l.asked
	}
	return w.seq < o.seq
}

// isNew is whether w is its rollout's first request on its backend.
func (w *waiter) isNew() bool { return !(w.l.active && w.l.B == w.home) }

// newWaitingLocked counts the waiting requests that are their rollouts'
// first on their backends.
func (p *Pool) newWaitingLocked() int {
	n := 0
	for _, w := range p.waiting {
		if w.isNew() {
			n++
		}
	}
	return n
}

// leaveToFasterLocked is whether b should leave l's request, a first one
// there, to faster backends, with queued new requests waiting (this one
// among them): whether no more than Σ Slots·(f/s − 1), over the faster
// backends with slots and cache room for it, are waiting. A request that
// cannot move is never left (no faster backend could take it).
func (p *Pool) leaveToFasterLocked(l *Lease, b *Backend, tokens, queued int) bool {
	// Only a backend that admits hands out held requests again (dispatch).
	if !b.admits() || l.active && l.B == b || !p.movableLocked(tokens) && l.B == b {
		return false
	}
	// Where the tail is evacuated (evacuate.go), a generation that runs
	// long here at the end moves to a faster backend anyway; holding new
	// requests back only idled this backend's slots. Bench
	// GRPOStep, 7 interleaved pairs: slot use while work waited
	// 94-96% -> 97-99% on math and 88-91% -> 92-93% on SWE-like, the
	// makespans unchanged (math 130-139 s either way).
	if p.evacuableLocked(b) {
		return false
	}
	ahead := 0.0
	for _, c := range p.h {
		if c != b && c.Slots > 0 && c.weight() > b.weight() && p.fitsCacheLocked(l, c, tokens) {
			ahead += float64(c.Slots) * (c.weight()/b.weight() - 1)
		}
	}
	return ahead > 0 && float64(queued) <= ahead // none faster with room: nothing to leave it to
}

// cancelWaitLocked takes a waiter out; if it was admitted meanwhile, its
// slot is given back.
func (p *Pool) cancelWaitLocked(w *waiter) {
	if w.b != nil {
		w.b.requests--
		w.b.startSum -= sinceEpoch(w.start)
		p.endEvacuationLocked(w.b)
		p.dispatchLocked()
		return
	}
	for i, x := range p.waiting {
		if x == w {
			p.waiting = append(p.waiting[:i], p.waiting[i+1:]...)
			return
		}
	}
}

// RouteWait is Route under admission: it waits (until ctx ends) while the
// request's backend has no room (a free slot; for a rollout new there, its
// context of tokens within the cache) and no other backend has. prio orders
// waiting requests, lower first.
func (l *Lease) RouteWait(ctx context.Context, prio, tokens int) (*Backend, func(), error) {
	p := l.p
	p.mu.Lock()
	if l.asked == 0 {
		p.wseq++
		l.asked = p.wseq
	}
	b, w := p.admitLocked(l, p.chooseLocked(l), prio, tokens)
	if w == nil {
		start := p.startLocked(l, b, tokens)
		p.mu.Unlock()
		return b, p.endRequest(l, b, start), nil
	}
	p.mu.Unlock()
	select {
	case b = <-w.got:
		return b, p.endRequest(l, b, w.start), nil
	case <-ctx.Done():
		p.mu.Lock()
		p.cancelWaitLocked(w)
		p.mu.Unlock()
		return nil, nil, ctx.Err()
	}
}

func (p *Pool) endRequest(l *Lease, b *Backend, start time.Time) func() {
	return func() {
		p.mu.Lock()
		b.requests--
		b.startSum -= sinceEpoch(start)
		b.noteDuration(time.Since(start))
		if p.evacuatedLocked(b) {
			l.evacuated = b
			p.endEvacuationLocked(b)
		}
		p.dispatchLocked()
		p.maybeEvacuateLocked()
		p.mu.Unlock()
	}
}

// Waiting is how many requests wait in the host for a slot or cache room.
func (p *Pool) Waiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.waiting)
}

// WaitingFor counts the requests waiting in the host by what holds them:
// "slots" (their backend is full), "cache" (it has a free slot but not the
// cache room a new rollout needs), "faster" (a slower backend leaves a new
// request to faster ones), "evacuation" (their backend is being
// evacuated), "other" (between a slot's release and its dispatch).
func (p *Pool) WaitingFor() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	queued := p.newWaitingLocked()
	for _, w := range p.waiting {
		b := w.home
		switch {
		case b.Slots > 0 && b.requests >= b.Slots:
			out["slots"]++
		case p.evacuatedLocked(b):
			out["evacuation"]++
		case !p.fitsCacheLocked(w.l, b, w.tokens):
			out["cache"]++
		case p.leaveToFasterLocked(w.l, b, w.tokens, queued):
			out["faster"]++
		default:
			out["other"]++
		}
	}
	return out
}
