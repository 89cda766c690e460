package backend

import (
	"context"
	"errors"
	"time"

	"github.com/prorl/prorl/core/engine"
)

// Evacuation, at a step's tail: when no request waits in the host and a
// slower backend is still generating while backends at least
// evacuateMinRatio times as fast have free slots for all of its requests,
// its generations are aborted with their tokens kept (an engine.Aborter), and each
// continues on a faster backend from the tokens it has. Admission alone
// cannot help then: with a math step's answers of unknown length, the
// half-speed engines were still decoding long answers after the fast ones
// had gone idle. A continuation starts from the exact tokens sampled so
// far, so the sample stays one of the policy's (no length is selected);
// the cost is a prefill of the moved contexts on the faster backends.
//
// Only generations that have run, on average, at least as long as the
// backend's requests usually take are moved (any, before one has finished): those are the long ones a
// step waits for. Short turns (an agent's between tool calls) would finish
// before their contexts were prefilled again elsewhere: in the SWE-like
// bench evacuating them made steps no shorter.
//
// The evacuated backend takes nothing new until its aborted requests have
// ended, and each of their rollouts is sent to a faster free backend if
// there is one when it asks next (else it may come back).

// evacuateMinRatio is the speed ratio below which moving a generation
// gains too little to pay for prefilling its context again.
const evacuateMinRatio = 1.5

// evacuateTimeout bounds one abort.
const evacuateTimeout = 30 * time.Second

// AbortInFlight aborts b's generations through its client's engine.Aborter;
// engine.ErrNoPause if it has none.
func (b *Backend) AbortInFlight(ctx context.Context) error {
	a, ok := b.Client.(engine.Aborter)
	if !ok {
		return engine.ErrNoPause
	}
	return a.AbortInFlight(ctx)
}

// SetEvacuator turns evacuation on: fn aborts b's generations (it runs in
// its own goroutine; the pipeline uses it to keep evacuations and policy
// pauses apart). nil turns it off.
func (p *Pool) SetEvacuator(fn func(ctx context.Context, b *Backend) error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.evacuator = fn
}

// maybeEvacuateLocked starts an evacuation where one is due (one at a
// time: the free slots counted are for its requests).
func (p *Pool) maybeEvacuateLocked() {
	if p.evacuator == nil || len(p.waiting) > 0 {
		return
	}
	for _, b := range p.h {
		if p.evacuating != nil {
			return
		}
		if !b.admits() || b.requests == 0 || b.noEvacuate || !b.runningLongLocked() {
			continue
		}
		free := 0
		for _, c := range p.h {
			if c != b && c.Slots > 0 && c.weight() >= evacuateMinRatio*b.weight() {
				free += max(c.Slots-c.requests, 0)
			}
		}
		if free < b.requests {
			continue
		}
		p.evacuating, b.evacuations = b, b.evacuations+1
		p.log.Info("evacuating a slower backend at the tail: its generations continue on faster ones", "backend", b.ID, "requests", b.requests, "free_faster_slots", free)
		go p.evacuate(p.evacuator, b)
	}
}

func (p *Pool) evacuate(fn func(context.Context, *Backend) error, b *Backend) {
	ctx, cancel := context.WithTimeout(context.Background(), evacuateTimeout)
	err := fn(ctx, b)
	cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.log.Warn("evacuation failed; the backend's generations run on", "backend", b.ID, "error", err)
		if errors.Is(err, engine.ErrNoPause) {
			b.noEvacuate = true
		}
	}
	b.evacDone = true
	p.endEvacuationLocked(b)
}

// endEvacuationLocked lets b take requests again once its abort is done
// and its aborted requests have ended.
func (p *Pool) endEvacuationLocked(b *Backend) {
	if p.evacuating == b && b.evacDone && b.requests == 0 {
		p.evacuating, b.evacDone = nil, false
		p.dispatchLocked()
	}
}

// evacuableLocked is whether b's generations can be evacuated: an
// evacuator is set and b's client can abort (and has not said it cannot).
func (p *Pool) evacuableLocked(b *Backend) bool {
	if p.evacuator == nil || b.noEvacuate {
		return false
	}
	_, ok := b.Client.(engine.Aborter)
	return ok
}

// evacuatedLocked is whether b takes no requests (being evacuated).
func (p *Pool) evacuatedLocked(b *Backend) bool { return p.evacuating == b }

// runningLongLocked is whether b's requests in flight have run, on
// average, at least as long as its requests take (true while none has
// finished there to compare with).
func (b *Backend) runningLongLocked() bool {
	if b.requests == 0 {
		return false
	}
	if b.meanDur <= 0 {
		return true
	}
	age := sinceEpoch(time.Now()) - b.startSum/float64(b.requests)
	return age >= b.meanDur.Seconds()
}

// noteDuration adds a finished request's duration to b's moving average
// (the last 64 or so).
func (b *Backend) noteDuration(d time.Duration) {
	if b.meanDur == 0 {
		b.meanDur = d
		return
	}
	b.meanDur += (d - b.meanDur) / 64
}

// epoch keeps start-time sums small enough to be exact.
var epoch = time.Now()

func sinceEpoch(t time.Time) float64 { return t.Sub(epoch).Seconds() }
