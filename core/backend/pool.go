package backend

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/core/engine"
)

// ErrNoBackend means no healthy backend with spare capacity appeared in time.
var ErrNoBackend = errors.New("no healthy inference backend available")

// Backend is one registered inference server.
type Backend struct {
	ID             string `json:"id"`
	URL            string `json:"url"`
	Protocol       string `json:"protocol"`
	Model          string `json:"model,omitempty"`
	MaxConcurrency int    `json:"max_concurrency,omitempty"`
	// Slots is the server's batch size (vLLM's --max-num-seqs): the host
	// sends it at most that many requests at once and holds the rest,
	// giving each freed slot to the request that should have it (admit.go).
	// 0: no limit, the server queues.
	Slots int `json:"slots,omitempty"`
	// CacheTokens is the server's prefix-cache capacity in tokens (vLLM
	// logs it as "GPU KV cache size"). With it, a rollout starts on the
	// backend only while the contexts of the rollouts already there fit:
	// more would evict each other's conversations between turns and pay
	// their prefill again. 0: no limit.
	CacheTokens int `json:"cache_tokens,omitempty"`
	// Weight is the backend's capacity relative to others (2: twice as
	// fast); load-balancing routings divide load by it. 0 means 1.
	Weight float64       `json:"weight,omitempty"`
	Client engine.Client `json:"-"`

	// guarded by Pool.mu
	inflight   int
	requests   int                      // generation requests in flight (per-request routings)
	ctxTokens  int                      // context of the rollouts active here (admit.go)
	prompts    map[uint64]*sharedPrefix // prompts counted once in ctxTokens (prefix.go)
	load       float64                  // expected work of the rollouts in flight (Hint.Cost)
	migratedIn int64                    // rollouts moved here by rebalancing
	// evacuations counts aborts at the tail (evacuate.go); noEvacuate: it
	// cannot abort; evacDone: its abort has returned.
	evacuations          int64
	noEvacuate, evacDone bool
	// startSum sums the start times (s since epoch) of the requests in
	// flight; meanDur is a moving average of their durations (evacuate.go).
	startSum float64
	meanDur  time.Duration
	reqTotal int64
	assigned int64
	healthy  bool
	removed  bool
	lastErr  string
	index    int // in the heap; -1 when out
	added    time.Time
}

// Status is a backend as GET /v1/backends shows it.
type Status struct {
	ID             string    `json:"id"`
	URL            string    `json:"url"`
	Protocol       string    `json:"protocol"`
	Model          string    `json:"model,omitempty"`
	MaxConcurrency int       `json:"max_concurrency,omitempty"`
	Slots          int       `json:"slots,omitempty"`
	CacheTokens    int       `json:"cache_tokens,omitempty"`
	ContextTokens  int       `json:"context_tokens,omitempty"`
	Healthy        bool      `json:"healthy"`
	InFlight       int       `json:"in_flight"`
	Requests       int       `json:"requests_in_flight"`
	MigratedIn     int64     `json:"migrated_in,omitempty"`
	Evacuations    int64     `json:"evacuations,omitempty"`
	Weight         float64   `json:"weight"`
	Assigned       int64     `json:"assigned"`
	LastError      string    `json:"last_error,omitempty"`
	Added          time.Time `json:"added"`
}

// Pool chooses backends: a min-heap keyed by in-flight rollouts, then
// cumulative assignments. Keying on load first means a backend added late
// shares new work instead of taking all of it until its count catches up.
type Pool struct {
	log    hclog.Logger
	mu     sync.Mutex
	h      backendHeap
	all    map[string]*Backend
	byURL  map[string]*Backend
	nextID atomic.Int64
	// changed is closed and replaced whenever capacity may have appeared.
	changed chan struct{}
	route   Routing
	groups  map[string]*groupPlace
	// migrateMax bounds the context a waiting request moves (admit.go); 0: any.
	migrateMax int
	// overcommit scales CacheTokens for admission (admit.go).
	overcommit float64
	rr         uint64
	// waiting are requests held for a free slot (admit.go).
	waiting []*waiter
	wseq    uint64
	// evacuator aborts a backend's generations; evacuating is the backend
	// being evacuated (evacuate.go).
	evacuator  func(context.Context, *Backend) error
	evacuating *Backend
}

// NewPool returns an empty pool.
func NewPool(log hclog.Logger) *Pool {
	return &Pool{log: log, all: map[string]*Backend{}, byURL: map[string]*Backend{}, changed: make(chan struct{}),
		route: RouteSticky, groups: map[string]*groupPlace{}, overcommit: DefaultCacheOvercommit}
}

// SetCacheOvercommit sets how far the contexts of the rollouts active on a
// backend may exceed its CacheTokens before new rollouts wait (admit.go);
// values below 1 are taken as DefaultCacheOvercommit.
func (p *Pool) SetCacheOvercommit(f float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f < 1 {
		f = DefaultCacheOvercommit
	}
	p.overcommit = f
	p.dispatchLocked()
}

// SetMigrateMaxTokens sets the largest context a request waiting for a
// slot may take to another backend with room (its lease moves, and the
// context is prefilled there again); 0, the default: any.
func (p *Pool) SetMigrateMaxTokens(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.migrateMax = n
}

// SetRouting chooses how rollouts and requests are placed (see Routing).
func (p *Pool) SetRouting(r Routing) error {
	if err := r.Check(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.route = r
	return nil
}

func (p *Pool) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
	p.dispatchLocked()
}

// ErrDuplicate is returned when a URL is already registered.
var ErrDuplicate = errors.New("backend already registered")

// Add registers a backend. It takes work only once a health check has
// passed; the first check starts at once.
func (p *Pool) Add(b *Backend) (*Backend, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.byURL[b.URL]; ok {
		return old, ErrDuplicate
	}
	if b.ID == "" {
		b.ID = "b" + strconv.FormatInt(p.nextID.Add(1), 10)
	}
	b.healthy, b.index, b.added, b.lastErr = false, -1, time.Now(), "not checked yet"
	p.all[b.ID] = b
	p.byURL[b.URL] = b
	if b.Client != nil {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), firstCheckTimeout)
			defer cancel()
			p.SetHealth(b.ID, b.Client.Health(ctx))
		}()
	}
	return b, nil
}

// firstCheckTimeout bounds a new backend's first health check.
const firstCheckTimeout = 10 * time.Second

// Remove unregisters a backend; leases on it stay valid until released.
func (p *Pool) Remove(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.all[id]
	if !ok {
		return false
	}
	b.removed = true
	if b.index >= 0 {
		heap.Remove(&p.h, b.index)
	}
	delete(p.all, id)
	delete(p.byURL, b.URL)
	p.dispatchLocked() // its waiting requests may go elsewhere now
	return true
}

// Clear removes every backend.
func (p *Pool) Clear() {
	p.mu.Lock()
	ids := make([]string, 0, len(p.all))
	for id := range p.all {
		ids = append(ids, id)
	}
	p.mu.Unlock()
	for _, id := range ids {
		p.Remove(id)
	}
}

// Len is the number of registered backends.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.all)
}

// List returns every backend's status, ordered by id.
func (p *Pool) List() []Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Status, 0, len(p.all))
	for _, b := range p.all {
		out = append(out, Status{
			ID: b.ID, URL: b.URL, Protocol: b.Protocol, Model: b.Model, MaxConcurrency: b.MaxConcurrency, Slots: b.Slots, CacheTokens: b.CacheTokens, ContextTokens: b.ctxTokens,
			Healthy: b.healthy, InFlight: b.inflight, Requests: b.requests, MigratedIn: b.migratedIn, Evacuations: b.evacuations, Weight: b.weight(), Assigned: b.assigned, LastError: b.lastErr, Added: b.added,
		})
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Added.Before(out[j].Added) || out[i].Added.Equal(out[j].Added) && out[i].ID < out[j].ID
	})
	return out
}

// Backends returns the backends (a snapshot, in no order).
func (p *Pool) Backends() []*Backend {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*Backend, 0, len(p.all))
	for _, b := range p.all {
		out = append(out, b)
	}
	return out
}

// Lease is a rollout's hold on one backend for its whole life (sticky, so the
// server's prefix cache keeps the conversation).
type Lease struct {
	p    *Pool
	B    *Backend
	hint Hint
	once sync.Once
	// active: its context counts against its backend's CacheTokens.
	active bool
	ctx    int
	// promptKey and promptTokens: its first prompt (SetPrompt); shared: how
	// much of ctx its backend counts once for all that share the prompt.
	promptKey    uint64
	promptTokens int
	shared       int
	// evacuated is the backend its last request was aborted on, to leave
	// at its next request if a faster one has room (evacuate.go).
	evacuated *Backend
	// asked orders the rollout among those under way: when it first
	// asked for a slot (the pool's waiter sequence).
	asked uint64
}

// Release returns the lease's capacity.
func (l *Lease) Release() {
	l.once.Do(func() {
		p := l.p
		p.mu.Lock()
		defer p.mu.Unlock()
		l.B.inflight--
		l.B.load -= l.hint.cost()
		p.deactivateLocked(l)
		p.leaveGroupLocked(l)
		if l.B.index >= 0 {
			heap.Fix(&p.h, l.B.index)
		}
		p.notifyLocked()
	})
}

func (b *Backend) full() bool { return b.MaxConcurrency > 0 && b.inflight >= b.MaxConcurrency }

// tryAcquireLocked takes a backend with spare capacity by the routing.
func (p *Pool) tryAcquireLocked(h Hint) *Backend {
	if len(p.h) == 0 {
		return nil
	}
	var b *Backend
	switch p.route {
	case RouteProRL:
		b = p.pickLocked(func(a, c *Backend) bool { return a.assigned < c.assigned || a.assigned == c.assigned && a.ID < c.ID })
	case RouteConsistentHash:
		b = p.pickLocked(func(a, c *Backend) bool { return rendezvous(h.Key, a.ID) > rendezvous(h.Key, c.ID) })
	case RouteGroup:
		b = p.groupPickLocked(h)
	default:
		b = p.stickyPickLocked()
	}
	if b == nil {
		return nil
	}
	b.inflight++
	b.assigned++
	b.load += h.cost()
	heap.Fix(&p.h, b.index)
	return b
}

// stickyPickLocked is the heap's least-loaded backend with room.
func (p *Pool) stickyPickLocked() *Backend {
	b := p.h[0]
	if b.full() {
		// The least-loaded is full; one with a higher cap may not be.
		b = nil
		for _, c := range p.h {
			if !c.full() && (b == nil || less(c, b)) {
				b = c
			}
		}
	}
	return b
}

// Acquire waits up to wait for a healthy backend with capacity.
func (p *Pool) Acquire(ctx context.Context, wait time.Duration) (*Lease, error) {
	return p.AcquireFor(ctx, wait, Hint{})
}

// AcquireFor is Acquire for a rollout the hint describes (its session and
// group, for routings that place by them).
func (p *Pool) AcquireFor(ctx context.Context, wait time.Duration, h Hint) (*Lease, error) {
	var timer <-chan time.Time
	for {
		p.mu.Lock()
		b := p.tryAcquireLocked(h)
		var l *Lease
		if b != nil {
			l = &Lease{p: p, B: b, hint: h}
			p.joinGroupLocked(l)
		}
		ch := p.changed
		p.mu.Unlock()
		if l != nil {
			return l, nil
		}
		if timer == nil {
			if wait <= 0 {
				return nil, ErrNoBackend
			}
			t := time.NewTimer(wait)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-ch:
		case <-timer:
			return nil, fmt.Errorf("%w after waiting %s", ErrNoBackend, wait)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// SetHealth records a health check: an unhealthy backend leaves the heap and
// comes back when healthy.
func (p *Pool) SetHealth(id string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.all[id]
	if !ok {
		return
	}
	healthy := err == nil
	if err != nil {
		b.lastErr = err.Error()
	} else {
		b.lastErr = ""
	}
	if healthy == b.healthy {
		return
	}
	b.healthy = healthy
	if healthy {
		heap.Push(&p.h, b)
		p.notifyLocked()
		p.log.Info("backend healthy again", "backend", b.ID, "url", b.URL)
	} else {
		if b.index >= 0 {
			heap.Remove(&p.h, b.index)
		}
		p.dispatchLocked() // its waiting requests may go elsewhere now
		p.log.Warn("backend unhealthy, out of rotation", "backend", b.ID, "url", b.URL, "error", err)
	}
}

// RunHealthChecks checks every backend each interval until ctx ends.
func (p *Pool) RunHealthChecks(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		bs := make([]*Backend, 0, len(p.all))
		for _, b := range p.all {
			bs = append(bs, b)
		}
		p.mu.Unlock()
		var wg sync.WaitGroup
		for _, b := range bs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cctx, cancel := context.WithTimeout(ctx, interval)
				defer cancel()
				p.SetHealth(b.ID, b.Client.Health(cctx))
			}()
		}
		wg.Wait()
	}
}

func less(a, b *Backend) bool {
	if a.inflight != b.inflight {
		return a.inflight < b.inflight
	}
	if a.assigned != b.assigned {
		return a.assigned < b.assigned
	}
	return a.ID < b.ID
}

type backendHeap []*Backend

func (h backendHeap) Len() int           { return len(h) }
func (h backendHeap) Less(i, j int) bool { return less(h[i], h[j]) }
func (h backendHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *backendHeap) Push(x any) {
	b := x.(*Backend)
	b.index = len(*h)
	*h = append(*h, b)
}
func (h *backendHeap) Pop() any {
	old := *h
	b := old[len(old)-1]
	old[len(old)-1] = nil
	b.index = -1
	*h = old[:len(old)-1]
	return b
}
