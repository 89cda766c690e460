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
	"github.com/prorl/prorl/core/gateway/session"
)

// TestAdmitAnswers: a refused call answers as the providers do: too many
// at once a retryable 429, a spent budget the quota, an ended session 404.
func TestAdmitAnswers(t *testing.T) {
	s := session.NewSession(session.Config{ID: "r-1", MaxConcurrent: 1, MaxRequests: 1})
	release, e := admit(s, session.Meta)
	if e != nil {
		t.Fatal(e)
	}
	if _, e := admit(s, session.Generate); e == nil || e.status != http.StatusTooManyRequests || e.kind != kindRateLimit || e.retryAfter == 0 {
		t.Errorf("second at once: %+v", e)
	}
	release()
	if _, e := admit(s, session.Meta); e == nil || e.status != http.StatusTooManyRequests || e.kind != kindQuota || e.retryAfter != 0 {
		t.Errorf("over the budget: %+v", e)
	}
	s.Close()
	if _, e := admit(s, session.Generate); e == nil || e.status != http.StatusNotFound || e.kind != kindNotFound {
		t.Errorf("closed: %+v", e)
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
