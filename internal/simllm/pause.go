package simllm

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// pauseState is vLLM's generation pause (POST /pause, /resume, GET
// /is_paused; vLLM >= 0.11): while paused, new generation requests wait;
// mode=abort ends the in-flight ones, which answer with finish_reason
// "abort" and the tokens generated so far; mode=wait lets them finish.
// Either way /pause answers once none is in flight.
type pauseState struct {
	mu       sync.Mutex
	paused   bool
	resumed  chan struct{} // closed at /resume
	abort    chan struct{} // closed (and replaced) by each abort
	inflight int
	drained  chan struct{} // closed when inflight reaches 0
}

// admit waits while paused and counts the request in flight; abort closes
// if a /pause aborts it.
func (s *Server) admit(ctx context.Context) (abort <-chan struct{}, leave func(), err error) {
	for {
		s.pause.mu.Lock()
		if !s.pause.paused {
			s.pause.inflight++
			ch := s.pause.abort
			s.pause.mu.Unlock()
			return ch, s.leave, nil
		}
		r := s.pause.resumed
		s.pause.mu.Unlock()
		select {
		case <-r:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

func (s *Server) leave() {
	s.pause.mu.Lock()
	defer s.pause.mu.Unlock()
	s.pause.inflight--
	if s.pause.inflight == 0 && s.pause.drained != nil {
		close(s.pause.drained)
		s.pause.drained = nil
	}
}

func (s *Server) pauseHandler(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	mode := q.Get("mode")
	if mode == "" { // before vLLM had mode: wait_for_inflight_requests, default abort
		mode = "abort"
		if b, _ := strconv.ParseBool(q.Get("wait_for_inflight_requests")); b {
			mode = "wait"
		}
	}
	if mode != "abort" && mode != "wait" {
		s.apiError(w, http.StatusBadRequest, "mode must be abort or wait (the simulator does not model keep)")
		return
	}
	clearCache := true
	if v := q.Get("clear_cache"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			s.apiError(w, http.StatusBadRequest, "clear_cache must be a boolean")
			return
		}
		clearCache = b
	}
	for {
		s.pause.mu.Lock()
		if !s.pause.paused {
			s.pause.paused, s.pause.resumed = true, make(chan struct{})
		}
		if mode == "abort" {
			close(s.pause.abort)
			s.pause.abort = make(chan struct{})
		}
		if s.pause.inflight == 0 {
			s.pause.mu.Unlock()
			break
		}
		if s.pause.drained == nil {
			s.pause.drained = make(chan struct{})
		}
		drained := s.pause.drained
		s.pause.mu.Unlock()
		if mode == "abort" && s.engine != nil {
			if err := s.engine.AbortAll(r.Context()); err != nil {
				return
			}
		}
		if mode == "wait" {
			select {
			case <-drained:
			case <-r.Context().Done():
				return
			}
			continue
		}
		// A request admitted just before the pause may reach the engine
		// after AbortAll: abort again until none is left.
		select {
		case <-drained:
		case <-r.Context().Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	if clearCache && s.engine != nil {
		s.engine.ClearCache()
	}
	writeJSON(w, map[string]string{"status": "paused"})
}

func (s *Server) resumeHandler(w http.ResponseWriter, _ *http.Request) {
	s.pause.mu.Lock()
	if s.pause.paused {
		s.pause.paused = false
		close(s.pause.resumed)
	}
	s.pause.mu.Unlock()
	writeJSON(w, map[string]string{"status": "resumed"})
}

func (s *Server) isPaused(w http.ResponseWriter, _ *http.Request) {
	s.pause.mu.Lock()
	p := s.pause.paused
	s.pause.mu.Unlock()
	writeJSON(w, map[string]bool{"is_paused": p})
}
