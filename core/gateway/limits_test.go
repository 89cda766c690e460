package gateway

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/mux"
	"github.com/hashicorp/go-hclog"
)

// TestAdmit: a session serves at most MaxConcurrent calls at once (429,
// retry), at most MaxRequests calls that generate nothing, and no token
// count once its turns are spent (the quota answers); completions past
// the turn budget are still admitted for their clean stop.
func TestAdmit(t *testing.T) {
	s := NewSession(Config{ID: "r-1", MaxConcurrent: 2, MaxRequests: 3, MaxCalls: 1})
	r1, e := s.admit(callGenerate)
	if e != nil {
		t.Fatal(e)
	}
	r2, e := s.admit(callCount)
	if e != nil {
		t.Fatal(e)
	}
	if _, e := s.admit(callMeta); e == nil || e.status != http.StatusTooManyRequests || e.kind != kindRateLimit || e.retryAfter == 0 {
		t.Fatalf("third at once: %+v", e)
	}
	r1()
	r2()
	if r, e := s.admit(callMeta); e != nil {
		t.Fatal(e)
	} else {
		r()
	}
	s.mu.Lock()
	s.calls = 1 // the one turn spent
	s.mu.Unlock()
	if _, e := s.admit(callCount); e == nil || e.kind != kindQuota {
		t.Fatalf("count after the turns: %+v", e)
	}
	if r, e := s.admit(callGenerate); e != nil {
		t.Fatalf("a completion past the turns: %+v", e)
	} else {
		r()
	}
	if r, e := s.admit(callMeta); e != nil { // the third that generates nothing
		t.Fatal(e)
	} else {
		r()
	}
	if _, e := s.admit(callMeta); e == nil || e.kind != kindQuota {
		t.Fatalf("fourth that generates nothing: %+v", e)
	}
	s.Close()
	if _, e := s.admit(callGenerate); e == nil || e.status != http.StatusNotFound {
		t.Fatalf("closed: %+v", e)
	}
}

// TestProviderShapes: the bounds answer in each provider's vocabulary.
func TestProviderShapes(t *testing.T) {
	for _, tc := range []struct {
		p         provider
		e         *apiError
		status    int
		body, hdr string
	}{
		{openAI, &apiError{status: 429, kind: kindRateLimit, msg: "m", retryAfter: 1}, 429, `"code":"rate_limit_exceeded"`, "1"},
		{anthropic, &apiError{status: 429, kind: kindRateLimit, msg: "m", retryAfter: 1}, 429, `"type":"rate_limit_error"`, "1"},
		{openAI, &apiError{status: 429, kind: kindQuota, msg: "m"}, 429, `"type":"insufficient_quota"`, ""},
		{anthropic, &apiError{status: 429, kind: kindQuota, msg: "m"}, 402, `"type":"billing_error"`, ""},
	} {
		w := httptest.NewRecorder()
		writeErr(w, tc.p, tc.e)
		if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.body) || w.Header().Get("Retry-After") != tc.hdr {
			t.Errorf("%v %+v: %d %s %q", tc.p, tc.e, w.Code, w.Body, w.Header().Get("Retry-After"))
		}
	}
}

// TestBodyDeadline: a body dripped slower than bodyTimeout is cut off;
// the connection does not stay held.
func TestBodyDeadline(t *testing.T) {
	old := bodyTimeout
	bodyTimeout = 200 * time.Millisecond
	defer func() { bodyTimeout = old }()
	g := New(hclog.NewNullLogger(), 1<<20)
	r := mux.NewRouter()
	r.HandleFunc("/x", func(w http.ResponseWriter, r *http.Request) {
		var v map[string]any
		if e := g.decode(w, r, &v); e != nil {
			writeErr(w, openAI, e)
		}
	})
	srv := httptest.NewServer(r)
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	t0 := time.Now()
	b, _ := io.ReadAll(c)
	if !strings.Contains(string(b), " 408 ") || time.Since(t0) > 3*time.Second {
		t.Fatalf("after %v: %q", time.Since(t0), b)
	}
}
