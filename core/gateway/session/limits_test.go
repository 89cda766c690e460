package session

import "testing"

// TestAdmit: a session serves at most MaxConcurrent calls at once (a rate
// limit, retry), at most MaxRequests calls that generate nothing, and no
// token count once its turns are spent (the quota); completions past the
// turn budget are still admitted for their clean stop.
func TestAdmit(t *testing.T) {
	s := NewSession(Config{ID: "r-1", MaxConcurrent: 2, MaxRequests: 3, MaxCalls: 1})
	r1, e := s.Admit(Generate)
	if e != nil {
		t.Fatal(e)
	}
	r2, e := s.Admit(Count)
	if e != nil {
		t.Fatal(e)
	}
	if _, e := s.Admit(Meta); e == nil || e.Reason != RateLimited || e.RetryAfter == 0 {
		t.Fatalf("third at once: %+v", e)
	}
	r1()
	r2()
	if r, e := s.Admit(Meta); e != nil {
		t.Fatal(e)
	} else {
		r()
	}
	s.mu.Lock()
	s.calls = 1 // the one turn spent
	s.mu.Unlock()
	if _, e := s.Admit(Count); e == nil || e.Reason != OverQuota {
		t.Fatalf("count after the turns: %+v", e)
	}
	if r, e := s.Admit(Generate); e != nil {
		t.Fatalf("a completion past the turns: %+v", e)
	} else {
		r()
	}
	if r, e := s.Admit(Meta); e != nil { // the third that generates nothing
		t.Fatal(e)
	} else {
		r()
	}
	if _, e := s.Admit(Meta); e == nil || e.Reason != OverQuota {
		t.Fatalf("fourth that generates nothing: %+v", e)
	}
	s.Close()
	if _, e := s.Admit(Generate); e == nil || e.Reason != Ended {
		t.Fatalf("closed: %+v", e)
	}
}
