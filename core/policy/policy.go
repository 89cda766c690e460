// Package policy keeps the policy version every generated token is
// stamped with, and the gate that holds generation while the policy's
// weights change (POST /v1/policy:pause ... :resume): drain waits for the
// requests in flight, abort ends them (keeping their tokens where the
// backend can abort by itself). The version and a pause are stored, so a
// restarted host takes them up.
package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/core/backend"
	"github.com/prorl/prorl/core/engine"
)

// Store keeps the policy's state across restarts (store.Store has it).
type Store interface {
	SetState(name string, v []byte) error
	State(name string) ([]byte, bool)
}

// Deps are what the gate works with.
type Deps struct {
	Pool  *backend.Pool
	Store Store
	Log   hclog.Logger
}

// Gate holds generation requests while the policy's weights change.
// Everything else — tools, sandboxes, grading — keeps running: only the
// backends must be idle.
type Gate struct {
	d        Deps
	version  atomic.Int64
	saveMu   sync.Mutex // orders the writes of the state (save)
	mu       sync.Mutex
	paused   bool
	mode     string
	since    time.Time
	open     chan struct{} // closed by resume
	inflight map[*Slot]struct{}
	drained  chan struct{} // closed when inflight empties
	aborted  int           // requests cut or aborted since the pause
	// held are the backends paused by their own API (vLLM's /pause), to
	// resume at :resume.
	held map[*backend.Backend]bool
	// evacuations are the pool's aborts in progress (evacuate); a pause
	// waits for them (evacDone is closed when none is left).
	evacuations int
	evacDone    chan struct{}
	// restored: the pause was read back at start (the host stopped while
	// paused), so which backends an abort paused by their own API is not
	// known; :resume resumes every one that can.
	restored bool
}

// Slot is one generation request in flight.
type Slot struct {
	backend string
	cancel  context.CancelFunc
	cut     bool
}

// ErrCut: the gate cancelled a request to a backend that cannot abort by
// itself; the generation starts again after the pause.
var ErrCut = errors.New("generation cut by a policy pause")

// abortGrace is how long an abort waits for requests on a backend that
// paused by its own API: their answers are in transit, or (sent just
// after the backend paused) they wait in its queue with nothing generated
// and are cut.
const abortGrace = 2 * time.Second

// New returns the gate with the state a previous run of the host stored.
func New(d Deps) *Gate {
	if d.Log == nil {
		d.Log = hclog.NewNullLogger()
	}
	g := &Gate{d: d, inflight: map[*Slot]struct{}{}, held: map[*backend.Backend]bool{}}
	g.load()
	return g
}

// Version is the current policy version.
func (g *Gate) Version() int64 { return g.version.Load() }

// SetVersion records new weights; later turns are stamped with it.
func (g *Gate) SetVersion(v int64) {
	g.version.Store(v)
	g.save()
}

// Enter waits while paused, then counts a request to backend b in flight;
// ctx is the request's context and version the policy it runs under.
func (g *Gate) Enter(ctx context.Context, b string) (context.Context, int64, *Slot, error) {
	for {
		g.mu.Lock()
		if !g.paused {
			s := &Slot{backend: b}
			gctx, cancel := context.WithCancel(ctx)
			s.cancel = cancel
			g.inflight[s] = struct{}{}
			v := g.version.Load()
			g.mu.Unlock()
			return gctx, v, s, nil
		}
		open := g.open
		g.mu.Unlock()
		select {
		case <-open:
		case <-ctx.Done():
			return nil, 0, nil, ctx.Err()
		}
	}
}

// Leave ends a request; it reports whether the gate cut it.
func (g *Gate) Leave(s *Slot) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.inflight, s)
	s.cancel()
	if len(g.inflight) == 0 && g.drained != nil {
		close(g.drained)
		g.drained = nil
	}
	return s.cut
}

// CountAbort counts a request a backend aborted itself (its tokens kept).
func (g *Gate) CountAbort() {
	g.mu.Lock()
	g.aborted++
	g.mu.Unlock()
}

// PauseReport is what a pause did.
type PauseReport struct {
	Paused   bool    `json:"paused"`
	Mode     string  `json:"mode"`
	InFlight int     `json:"in_flight"` // generation requests in flight when it began
	Aborted  int     `json:"aborted"`   // of those, ended early (their tokens kept where the backend could abort)
	Left     int     `json:"left"`      // still in flight (when the wait timed out)
	WaitedMS float64 `json:"waited_ms"`
	Version  int64   `json:"version"`
}

// Pause stops new generation requests. drain waits for the in-flight ones;
// abort ends them: backends with a pause API (vLLM) abort and answer with
// their tokens so far, which the rollout keeps; the others' requests are
// cancelled and generate again after the pause. It returns once no request
// is in flight, or with ctx's error (still paused) when ctx ends first.
func (g *Gate) Pause(ctx context.Context, abort bool) (PauseReport, error) {
	t0 := time.Now()
	g.mu.Lock()
	if !g.paused {
		g.paused, g.open, g.since, g.aborted, g.mode = true, make(chan struct{}), t0, 0, "drain"
	}
	if abort {
		g.mode = "abort"
	}
	g.mu.Unlock()
	// An evacuation's resume must not undo this pause: wait for it.
	for {
		g.mu.Lock()
		if g.evacuations == 0 {
			break
		}
		if g.evacDone == nil {
			g.evacDone = make(chan struct{})
		}
		done := g.evacDone
		g.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return PauseReport{Paused: true, Version: g.version.Load()}, fmt.Errorf("an evacuation is in progress: %w", ctx.Err())
		}
	}
	rep := PauseReport{Paused: true, Mode: g.mode, InFlight: len(g.inflight), Version: g.version.Load()}
	g.mu.Unlock()
	g.save()
	g.d.Log.Info("policy pause", "mode", rep.Mode, "in_flight", rep.InFlight)
	if abort {
		g.abortBackends(ctx)
	}
	// After the grace the rest are cut, once: the timer fires one time.
	var grace <-chan time.Time
	if abort {
		t := time.NewTimer(abortGrace)
		defer t.Stop()
		grace = t.C
	}
	for {
		g.mu.Lock()
		if len(g.inflight) == 0 {
			rep.Aborted = g.aborted
			g.mu.Unlock()
			rep.WaitedMS = float64(time.Since(t0).Microseconds()) / 1000
			return rep, nil
		}
		if g.drained == nil {
			g.drained = make(chan struct{})
		}
		drained := g.drained
		g.mu.Unlock()
		select {
		case <-drained:
		case <-grace:
			g.cut(func(*Slot) bool { return true })
			grace = nil
		case <-ctx.Done():
			g.mu.Lock()
			rep.Aborted, rep.Left = g.aborted, len(g.inflight)
			g.mu.Unlock()
			rep.WaitedMS = float64(time.Since(t0).Microseconds()) / 1000
			return rep, fmt.Errorf("%d generation requests still in flight: %w", rep.Left, ctx.Err())
		}
	}
}

// abortBackends pauses every backend that can abort by itself and cuts the
// requests in flight to the others.
func (g *Gate) abortBackends(ctx context.Context) {
	var mu sync.Mutex
	paused := map[string]bool{}
	var wg sync.WaitGroup
	for _, b := range g.d.Pool.Backends() {
		pz, ok := b.Client.(engine.Pauser)
		if !ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := pz.Pause(ctx, true)
			if err != nil {
				if !errors.Is(err, engine.ErrNoPause) {
					g.d.Log.Warn("backend did not pause; its requests are cut instead", "backend", b.ID, "error", err)
				}
				return
			}
			mu.Lock()
			paused[b.ID] = true
			mu.Unlock()
			g.mu.Lock()
			g.held[b] = true
			g.mu.Unlock()
		}()
	}
	wg.Wait()
	g.cut(func(s *Slot) bool { return !paused[s.backend] })
}

// ErrPaused: no evacuation while the policy is paused.
var ErrPaused = errors.New("the policy is paused")

// Evacuate aborts b's generations for the pool (backend/evacuate.go),
// never while the policy is paused; a pause waits for it.
func (g *Gate) Evacuate(ctx context.Context, b *backend.Backend) error {
	g.mu.Lock()
	if g.paused {
		g.mu.Unlock()
		return ErrPaused
	}
	g.evacuations++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		if g.evacuations--; g.evacuations == 0 && g.evacDone != nil {
			close(g.evacDone)
			g.evacDone = nil
		}
		g.mu.Unlock()
	}()
	return b.AbortInFlight(ctx)
}

// cut cancels the in-flight requests that match.
func (g *Gate) cut(match func(*Slot) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for s := range g.inflight {
		if !s.cut && match(s) {
			s.cut = true
			s.cancel()
			g.aborted++
		}
	}
}

// ResumeReport is what a resume did.
type ResumeReport struct {
	Version   int64    `json:"version"`
	WasPaused bool     `json:"was_paused"`
	PausedMS  float64  `json:"paused_ms"`
	Errors    []string `json:"backend_errors,omitempty"`
}

// Resume sets the policy version and lets generation continue: backends
// paused by their API resume first, then the held requests go, stamped with
// the new version.
func (g *Gate) Resume(ctx context.Context, version int64) ResumeReport {
	g.mu.Lock()
	held := g.held
	g.held = map[*backend.Backend]bool{}
	if g.restored && g.paused && g.mode == "abort" { // only an abort pauses backends
		for _, b := range g.d.Pool.Backends() {
			if _, ok := b.Client.(engine.Pauser); ok {
				held[b] = false // false: it may never have paused
			}
		}
	}
	g.mu.Unlock()
	rep := ResumeReport{Version: version}
	for b, surely := range held {
		err := b.Client.(engine.Pauser).Resume(ctx)
		var se *engine.StatusError
		if err != nil && !surely && errors.As(err, &se) && (se.Status == http.StatusNotFound || se.Status == http.StatusMethodNotAllowed) {
			err = nil // a server without the pause API: it never paused
		}
		if err != nil {
			g.d.Log.Warn("backend did not resume", "backend", b.ID, "error", err)
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", b.ID, err))
		}
	}
	g.mu.Lock()
	g.version.Store(version)
	if g.paused {
		rep.WasPaused, rep.PausedMS = true, float64(time.Since(g.since).Microseconds())/1000
		g.paused, g.restored = false, false
		close(g.open)
	}
	g.mu.Unlock()
	g.save()
	g.d.Log.Info("policy resume", "version", version, "paused_ms", rep.PausedMS)
	return rep
}

// policyStateName is the policy's record in the store (store.SetState).
const policyStateName = "policy"

// savedPolicy is what a restarted host takes up: the version its tokens
// are stamped with, and a pause a trainer has not ended (generating
// through it would use weights being loaded).
type savedPolicy struct {
	Version int64  `json:"version"`
	Paused  bool   `json:"paused,omitempty"`
	Mode    string `json:"mode,omitempty"`
}

// save records the policy's state as it is now. One write at a time,
// each of the state read under the lock, so the last written is the latest.
func (g *Gate) save() {
	g.saveMu.Lock()
	defer g.saveMu.Unlock()
	st := g.State()
	b, _ := json.Marshal(savedPolicy{Version: st.Version, Paused: st.Paused, Mode: st.Mode})
	if err := g.d.Store.SetState(policyStateName, b); err != nil {
		// Held by the store until its file takes writes (store.ErrHeld):
		// only a crash before then would cost anything, the restarted host
		// stamping tokens with the version, and pause, it last stored.
		g.d.Log.Warn("store the policy state", "version", st.Version, "paused", st.Paused, "error", err)
	}
}

// load takes up the policy state a previous run of the host stored.
func (g *Gate) load() {
	b, ok := g.d.Store.State(policyStateName)
	if !ok {
		return
	}
	var sp savedPolicy
	if err := json.Unmarshal(b, &sp); err != nil {
		g.d.Log.Warn("unreadable stored policy state; starting at version 0, not paused", "error", err)
		return
	}
	g.version.Store(sp.Version)
	if sp.Paused {
		g.paused, g.restored, g.mode, g.since, g.open = true, true, sp.Mode, time.Now(), make(chan struct{})
		g.d.Log.Warn("generation stays paused, as it was when the host stopped, until POST /v1/policy:resume", "version", sp.Version, "mode", sp.Mode)
	} else {
		g.d.Log.Info("policy version taken up", "version", sp.Version)
	}
}

// State is the policy version and the gate's state.
type State struct {
	Version int64  `json:"version"`
	Paused  bool   `json:"paused"`
	Mode    string `json:"mode,omitempty"`
	// Generating is the generation requests in flight to backends.
	Generating int `json:"generating"`
}

// State returns the policy version and whether generation is paused.
func (g *Gate) State() State {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := State{Version: g.version.Load(), Paused: g.paused, Generating: len(g.inflight)}
	if g.paused {
		st.Mode = g.mode
	}
	return st
}
