package simllm

import (
	"container/list"
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"sync"
	"time"
)

// EngineModel is the simulator's model of an inference engine's timing (it
// is still a simulator: no model runs). It follows vLLM's scheduler in
// outline: continuous batching of at most Slots sequences; each engine step
// decodes one token for every running sequence and prefills a chunk of at
// most PrefillChunk prompt tokens not found in the prefix cache; a step
// takes StepBase + StepPerSeq·(decoding sequences) + PrefillPerToken·(prefill
// tokens), divided by Speed. The prefix cache is an LRU of hashed token
// blocks (BlockSize tokens, chained like vLLM's automatic prefix caching)
// holding CacheTokens tokens, a sequence's tail evicted before its head.
// Request by request, it finds the cached prompt tokens a real vLLM finds
// (TestAgainstVLLM, vLLM 0.32's CPU build): a hit ends at the
// last whole block before the prompt's last token, a request's last
// sampled token is never cached, and a block computed again is a second
// copy that takes room.
//
// Where it differs from vLLM (stated, not hidden): a prompt's blocks enter
// the cache when it is admitted, so requests admitted together share a
// prefix as SGLang's in-batch prefix caching does (vLLM would compute it
// twice in that step); KV memory of running sequences is not counted
// against the cache (Slots bounds it instead); there is no preemption; a
// request's partly filled last block, which vLLM puts back in its free
// list, takes no room. The step times are calibrated from published GPU
// figures, not measured here (vLLM's CPU build is no model of a GPU's).
//
// DefaultEngine's constants are calibrated for an 8B dense model in bf16 on
// one H100 80GB under vLLM: a decode step of about 6 ms alone and 13.7 ms at
// batch 64 (vLLM's published TPOT for Llama-3-8B is 6–8 ms at low load,
// 12–15 ms at 64 concurrent requests); prefill at 25k tokens/s (16 GFLOP per
// token at about 40% of 989 TFLOPS); KV cache of 131 kB per token (32
// layers, 8 KV heads of 128, bf16), so 400k tokens in the ~52 GB left at
// gpu_memory_utilization 0.9.
type EngineModel struct {
	Slots           int
	StepBase        time.Duration
	StepPerSeq      time.Duration
	PrefillPerToken time.Duration
	PrefillChunk    int
	CacheTokens     int
	BlockSize       int
	// Speed scales every step (0.5: a GPU half as fast).
	Speed float64
	// Priority admits waiting requests by their priority (lower first,
	// then arrival), as vLLM's --scheduling-policy priority does (without
	// its preemption of running requests); else first come, first served.
	Priority bool
	// TimeScale is real time per simulated time (0.02: fifty times faster
	// than the modelled hardware); Stats are in simulated time.
	TimeScale float64
}

// DefaultEngine is the calibrated model (see EngineModel).
func DefaultEngine() EngineModel {
	return EngineModel{Slots: 64, StepBase: 6 * time.Millisecond, StepPerSeq: 120 * time.Microsecond,
		PrefillPerToken: 40 * time.Microsecond, PrefillChunk: 8192, CacheTokens: 400_000, BlockSize: 16, Speed: 1, TimeScale: 1}
}

// EngineStats are an engine's counters, in simulated time.
type EngineStats struct {
	Requests        int64   `json:"requests"`
	PromptTokens    int64   `json:"prompt_tokens"`
	CachedTokens    int64   `json:"cached_tokens"`
	PrefillTokens   int64   `json:"prefill_tokens"`
	GeneratedTokens int64   `json:"generated_tokens"`
	Steps           int64   `json:"steps"`
	BusySeconds     float64 `json:"busy_seconds"`
	SlotSeconds     float64 `json:"slot_seconds"` // ∫ running sequences dt
	Slots           int     `json:"slots"`
	Speed           float64 `json:"speed"`
	// Running and Waiting are the sequences in the batch and queued, now.
	Running int `json:"running"`
	Waiting int `json:"waiting"`
	// Since is when the engine started counting (real time).
	Since time.Time `json:"since"`
}

type engineSeq struct {
	ctx         context.Context
	priority    int
	arrival     uint64
	ids         []int // prompt then output, for the cache
	promptLen   int
	out         int
	prefillLeft int
	decoded     int
	aborted     bool
	done        chan struct{}
	blocks      []*list.Element // its blocks in the prefix cache, once admitted
	// salt starts its blocks' hash chain: requests share cached blocks
	// only under the same cache_salt (vLLM hashes it into the first block).
	salt uint64
}

// computed is how many of s's tokens have keys and values: the prompt's
// prefilled part, then every output token but the last sampled, which is
// never fed back (vLLM caches the blocks these fill, no more).
func (s *engineSeq) computed() int {
	if s.prefillLeft > 0 || s.decoded == 0 {
		return s.promptLen - s.prefillLeft
	}
	return s.promptLen + s.decoded - 1
}

// Engine runs generations through the model's batch schedule.
type Engine struct {
	m       EngineModel
	mu      sync.Mutex
	waiting []*engineSeq
	running []*engineSeq
	wake    chan struct{}
	stop    chan struct{} // closed by Stop: the loop returns once idle
	stopped sync.Once
	cache   *blockCache
	stats   EngineStats
	once    sync.Once
	arrived uint64
	// aborts are AbortAll calls waiting for the loop (closed when done).
	aborts []chan struct{}
}

// Aborted is Generate's error for a request ended by AbortAll: Decoded
// tokens of its output had been generated.
type Aborted struct{ Decoded int }

func (a *Aborted) Error() string { return fmt.Sprintf("aborted after %d tokens", a.Decoded) }

// NewEngine returns an engine; its loop starts with the first request.
func NewEngine(m EngineModel) *Engine {
	d := DefaultEngine()
	if m.Slots <= 0 {
		m.Slots = d.Slots
	}
	if m.PrefillChunk <= 0 {
		m.PrefillChunk = d.PrefillChunk
	}
	if m.BlockSize <= 0 {
		m.BlockSize = d.BlockSize
	}
	if m.Speed <= 0 {
		m.Speed = 1
	}
	if m.TimeScale <= 0 {
		m.TimeScale = 1
	}
	return &Engine{m: m, wake: make(chan struct{}, 1), stop: make(chan struct{}), cache: newBlockCache(m.CacheTokens / m.BlockSize),
		stats: EngineStats{Slots: m.Slots, Speed: m.Speed, Since: time.Now()}}
}

// Stop ends the engine's loop once it has nothing running, so that an
// engine no longer used can be collected (its loop holds it otherwise).
func (e *Engine) Stop() { e.stopped.Do(func() { close(e.stop) }) }

// Stats returns the counters so far.
func (e *Engine) Stats() EngineStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.stats
	st.Running, st.Waiting = len(e.running), len(e.waiting)
	return st
}

// Generate holds the caller for the simulated time the engine takes to
// prefill prompt and decode out (the output ids, cached once done).
// priority orders admission when the model schedules by priority.
func (e *Engine) Generate(ctx context.Context, prompt, out []int, priority int) error {
	return e.GenerateSalted(ctx, prompt, out, priority, "")
}

// GenerateSalted is Generate under a cache salt: its prompt finds only
// blocks cached under the same salt ("" none).
func (e *Engine) GenerateSalted(ctx context.Context, prompt, out []int, priority int, salt string) error {
	e.once.Do(func() { go e.loop() })
	s := &engineSeq{ctx: ctx, ids: append(append(make([]int, 0, len(prompt)+len(out)), prompt...), out...),
		promptLen: len(prompt), out: len(out), done: make(chan struct{}), priority: priority, salt: saltSeed(salt)}
	e.mu.Lock()
	e.arrived++
	s.arrival = e.arrived
	e.waiting = append(e.waiting, s)
	e.mu.Unlock()
	e.poke()
	select {
	case <-s.done:
		if s.aborted {
			return &Aborted{Decoded: s.decoded}
		}
		return nil
	case <-ctx.Done():
		e.poke() // the loop drops it at its next step boundary
		return ctx.Err()
	}
}

// poke wakes the loop (it may already be awake).
func (e *Engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// real converts simulated time on this engine to wall time.
func (e *Engine) real(sim time.Duration) time.Duration {
	return time.Duration(float64(sim) / e.m.Speed * e.m.TimeScale)
}

// maxLag bounds how far the engine's schedule may fall behind the wall
// clock (a loaded machine) and still be caught up; beyond it, time is lost
// rather than compressed.
const maxLag = 2 * time.Millisecond

// AbortAll ends every waiting and running request at the next step
// boundary, as vLLM's pause in abort mode does; each one's Generate returns
// *Aborted with the tokens decoded so far.
func (e *Engine) AbortAll(ctx context.Context) error {
	e.once.Do(func() { go e.loop() })
	done := make(chan struct{})
	e.mu.Lock()
	e.aborts = append(e.aborts, done)
	e.mu.Unlock()
	e.poke()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ClearCache empties the prefix cache (vLLM's pause clears it by default:
// cached blocks hold the old weights' keys and values).
func (e *Engine) ClearCache() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cache.drop()
	e.cache = newBlockCache(e.m.CacheTokens / e.m.BlockSize)
}

// abortLocked ends every request (the loop is between steps).
func (e *Engine) abortLocked() {
	for _, q := range [][]*engineSeq{e.waiting, e.running} {
		for _, s := range q {
			s.aborted = true
			e.cache.hold(s.ids[:s.computed()], e.m.BlockSize, s.salt, s.blocks, 0)
			close(s.done)
		}
	}
	e.waiting, e.running = nil, nil
	for _, c := range e.aborts {
		close(c)
	}
	e.aborts = nil
}

func (e *Engine) loop() {
	// Runs are scheduled back to back from an anchor, not from when the
	// loop woke: a timer that fires late (they do, by tens of µs, which is
	// a step at a small TimeScale) delays the next step's start on the
	// wall clock but does not stretch the engine's time.
	var anchor time.Time
	for {
		e.mu.Lock()
		if len(e.aborts) > 0 {
			e.abortLocked()
		}
		e.admitLocked()
		if len(e.running) == 0 {
			e.mu.Unlock()
			select {
			case <-e.wake:
			case <-e.stop:
				return
			}
			anchor = time.Time{}
			continue
		}
		step, k, prefill := e.planLocked()
		e.mu.Unlock()
		if now := time.Now(); anchor.IsZero() || now.Sub(anchor) > maxLag {
			anchor = now
		}
		// k identical steps; an arrival ends the run at the next step boundary.
		t := time.NewTimer(time.Until(anchor.Add(e.real(time.Duration(k) * step))))
		select {
		case <-t.C:
		case <-e.wake:
			t.Stop()
			if done := int(time.Since(anchor)/e.real(step)) + 1; done < k {
				k = done
				time.Sleep(time.Until(anchor.Add(e.real(time.Duration(k) * step))))
			}
		}
		anchor = anchor.Add(e.real(time.Duration(k) * step))
		e.mu.Lock()
		e.applyLocked(step, k, prefill)
		e.mu.Unlock()
	}
}

// admitLocked moves waiting requests into free slots, matching their
// prompts against the prefix cache.
func (e *Engine) admitLocked() {
	for len(e.running) < e.m.Slots && len(e.waiting) > 0 {
		i := 0
		if e.m.Priority {
			for j, w := range e.waiting {
				if w.priority < e.waiting[i].priority {
					i = j // ties keep arrival order: waiting is in arrival order
				}
			}
		}
		s := e.waiting[i]
		e.waiting = append(e.waiting[:i], e.waiting[i+1:]...)
		if s.ctx.Err() != nil {
			close(s.done)
			continue
		}
		// The last prompt token is always computed (its logits sample the
		// first output), so a hit ends at the last whole block before it,
		// as vLLM's get_computed_blocks has it.
		hit := min(e.cache.match(s.ids[:s.promptLen], e.m.BlockSize, s.salt), (s.promptLen-1)/e.m.BlockSize*e.m.BlockSize)
		s.prefillLeft = s.promptLen - hit
		s.blocks = e.cache.hold(s.ids[:s.promptLen], e.m.BlockSize, s.salt, nil, hit/e.m.BlockSize)
		e.stats.Requests++
		e.stats.PromptTokens += int64(s.promptLen)
		e.stats.CachedTokens += int64(hit)
		e.stats.PrefillTokens += int64(s.prefillLeft)
		e.running = append(e.running, s)
	}
	if len(e.waiting) == 0 {
		e.waiting = nil
	}
}

// planLocked is the next run of identical steps: one step while any
// prefill remains (its chunk), else as many decode steps as until the
// first sequence finishes.
func (e *Engine) planLocked() (step time.Duration, k, prefill int) {
	decoding, k := 0, 0
	budget := e.m.PrefillChunk
	for _, s := range e.running {
		if s.prefillLeft > 0 {
			prefill += min(s.prefillLeft, budget-prefill)
			continue
		}
		decoding++
		if left := s.out - s.decoded; k == 0 || left < k {
			k = left
		}
	}
	step = e.m.StepBase + time.Duration(decoding)*e.m.StepPerSeq + time.Duration(prefill)*e.m.PrefillPerToken
	if prefill > 0 || k < 1 {
		k = 1
	}
	return step, k, prefill
}

func (e *Engine) applyLocked(step time.Duration, k, prefill int) {
	sim := (time.Duration(k) * step).Seconds() / e.m.Speed
	e.stats.Steps += int64(k)
	e.stats.BusySeconds += sim
	e.stats.SlotSeconds += sim * float64(len(e.running))
	keep := e.running[:0]
	for _, s := range e.running {
		switch {
		case s.prefillLeft > 0:
			n := min(s.prefillLeft, prefill)
			s.prefillLeft -= n
			prefill -= n
			if s.prefillLeft == 0 && s.out > 0 {
				s.decoded = 1 // the step that ends a prefill samples the first token
				e.stats.GeneratedTokens++
			}
		default:
			n := min(k, s.out-s.decoded)
			s.decoded += n
			e.stats.GeneratedTokens += int64(n)
		}
		switch {
		case s.ctx.Err() != nil:
			close(s.done)
		case s.prefillLeft == 0 && s.decoded >= s.out:
			e.cache.hold(s.ids[:s.computed()], e.m.BlockSize, s.salt, s.blocks, 0)
			close(s.done)
		default:
			keep = append(keep, s)
		}
	}
	clear(e.running[len(keep):])
	e.running = keep
}

// blockCache is the prefix cache: physical blocks in LRU order, found by
// chained block hashes (a block's hash covers every token before it, as in
// vLLM's prefix caching). A sequence's blocks are touched tail first, so
// that its head is the most recent and its tail is evicted first: vLLM
// frees a finished request's blocks in reverse order for that reason
// (vllm/v1/core/kv_cache_manager.py, free), and SGLang's radix cache evicts
// only leaves. Evicting a head first, as a plain LRU touched in order does,
// leaves the rest of that sequence's blocks unreachable (a match stops at
// the first missing block) while they still take room. As in vLLM's block
// pool, two blocks may hold the same hash (a block computed again, see
// hold): both take room, and a lookup finds the older.
type blockCache struct {
	cap    int
	lru    *list.List                 // of *cblock, most recent first
	m      map[uint64][]*list.Element // live blocks by hash, oldest first
	hashes []uint64                   // scratch for hold
}

// cblock is one physical block.
type cblock struct {
	h     uint64
	alive bool
}

func newBlockCache(blocks int) *blockCache {
	return &blockCache{cap: blocks, lru: list.New(), m: map[uint64][]*list.Element{}}
}

// drop marks every block gone (the cache is being replaced).
func (c *blockCache) drop() {
	for el := c.lru.Front(); el != nil; el = el.Next() {
		el.Value.(*cblock).alive = false
	}
}

// saltSeed is the hash chain's start under a cache salt (0: none).
func saltSeed(salt string) uint64 {
	if salt == "" {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(salt))
	return h.Sum64()
}

func blockHashes(ids []int, bs int, seed uint64, f func(h uint64) bool) {
	parent := seed
	buf := make([]byte, 8+4*bs)
	for i := 0; i+bs <= len(ids); i += bs {
		h := fnv.New64a()
		binary.LittleEndian.PutUint64(buf, parent)
		for j, id := range ids[i : i+bs] {
			binary.LittleEndian.PutUint32(buf[8+4*j:], uint32(id))
		}
		_, _ = h.Write(buf)
		parent = h.Sum64()
		if !f(parent) {
			return
		}
	}
}

// match is the number of leading tokens of ids in the cache (the caller
// holds ids next, which touches them).
func (c *blockCache) match(ids []int, bs int, seed uint64) int {
	n := 0
	blockHashes(ids, bs, seed, func(h uint64) bool {
		if len(c.m[h]) == 0 {
			return false
		}
		n += bs
		return true
	})
	return n
}

// hold makes ids' full blocks those of one request and touches them tail
// first; it returns them by block number. held are the blocks the request
// holds already; blocks from len(held) up to reuse are looked up (its
// prefix hit), and later ones computed anew: a new block even where one
// with that hash is cached, as vLLM allocates them (its hit ends before
// the prompt's last token, so a block-aligned prompt seen before has its
// last block computed twice). A held block evicted meanwhile (the
// simulator does not pin running requests' blocks, vLLM does) is looked
// up or computed again.
func (c *blockCache) hold(ids []int, bs int, seed uint64, held []*list.Element, reuse int) []*list.Element {
	if c.cap <= 0 {
		return nil
	}
	c.hashes = c.hashes[:0]
	blockHashes(ids, bs, seed, func(h uint64) bool {
		c.hashes = append(c.hashes, h)
		return true
	})
	out := make([]*list.Element, len(c.hashes))
	for i := len(c.hashes) - 1; i >= 0; i-- {
		h := c.hashes[i]
		var el *list.Element
		switch {
		case i < len(held) && held[i] != nil && held[i].Value.(*cblock).alive:
			el = held[i]
		case (i < reuse || i < len(held)) && len(c.m[h]) > 0:
			el = c.m[h][0]
		default:
			el = c.lru.PushFront(&cblock{h: h, alive: true})
			c.m[h] = append(c.m[h], el)
			for c.lru.Len() > c.cap {
				c.evict(c.lru.Back())
			}
		}
		c.lru.MoveToFront(el) // a no-op for one just evicted
		out[i] = el
	}
	return out
}

func (c *blockCache) evict(el *list.Element) {
	b := el.Value.(*cblock)
	c.lru.Remove(el)
	b.alive = false
	els := c.m[b.h]
	for i, e := range els {
		if e == el {
			els = append(els[:i], els[i+1:]...)
			break
		}
	}
	if len(els) == 0 {
		delete(c.m, b.h)
	} else {
		c.m[b.h] = els
	}
}
