package polar

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// polarEvents is GET /events: the task and session events as SSE.
func (s *server) events(w http.ResponseWriter, r *http.Request) {
	sub := s.tasks.events.subscribe()
	defer s.tasks.events.unsubscribe(sub)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	flush := func() {
		if fl != nil {
			fl.Flush()
		}
	}
	fmt.Fprint(w, ": connected\n\n")
	flush()
	ctx, cancel := s.svc.WaitCtx(r)
	defer cancel()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-sub.ch:
			if !ok {
				return // too slow: dropped, the client reconnects
			}
			_, _ = w.Write(ev)
			flush()
		case <-keep.C:
			fmt.Fprint(w, ": heartbeat\n\n")
			flush()
		}
	}
}

// eventBus fans events out to SSE subscribers. A subscriber that falls
// 256 events behind is dropped rather than slowing the host.
type eventBus struct {
	mu   sync.Mutex
	seq  uint64
	subs map[*subscriber]struct{}
}

type subscriber struct{ ch chan []byte }

func newEventBus() *eventBus { return &eventBus{subs: map[*subscriber]struct{}{}} }

func (b *eventBus) subscribe() *subscriber {
	s := &subscriber{ch: make(chan []byte, 256)}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s
}

func (b *eventBus) unsubscribe(s *subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.subs[s]; ok {
		delete(b.subs, s)
		close(s.ch)
	}
}

func (b *eventBus) publish(typ string, payload map[string]any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	data, _ := json.Marshal(map[string]any{"type": typ, "payload": payload, "ts": float64(time.Now().UnixNano()) / 1e9})
	ev := []byte(fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n\n", b.seq, typ, data))
	for s := range b.subs {
		select {
		case s.ch <- ev:
		default:
			delete(b.subs, s)
			close(s.ch)
		}
	}
}
