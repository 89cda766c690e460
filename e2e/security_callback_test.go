package e2e

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestCallbackSSRF: a Polar task's callback_url made the host POST its
// results anywhere, following redirects (a loopback listener answering 307
// got the results re-POSTed to another loopback path; vLLM's unauthenticated
// /pause would have been as reachable). Callbacks now go only where the
// operator allows, are checked at connect time, and follow no redirect.
func TestCallbackSSRF(t *testing.T) {
	var victim atomic.Int32 // stands for an admin endpoint on this machine
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { victim.Add(1) }))
	defer target.Close()
	var bounced atomic.Int32
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bounced.Add(1)
		http.Redirect(w, r, target.URL+"/pause", http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	ru, _ := url.Parse(redirector.URL)

	// Only the redirector's own address is allowed: a trainer's listener.
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "1", "--think-turns", "1"}, staticBackend: true,
		serverTOML: "callback_allow = [\"" + ru.Host + "\"]\n"})
	e.startHost()

	// Straight at the target: refused at submission, field named.
	for i, cb := range []string{target.URL + "/pause", "http://169.254.169.254/latest/meta-data/", "http://localhost:" + ru.Port() + "/x", "file:///etc/passwd"} {
		r := e.do("POST", "/rollout/task/submit", polarTask("ssrf-"+string(rune('a'+i)), 1, map[string]any{"callback_url": cb}))
		if r.code != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "callback_url") {
			t.Fatalf("callback to %s: %d %s", cb, r.code, r.body)
		}
	}
	// Through the allowed listener, which redirects: it is POSTed to (and
	// retried, its 307 being no success), the redirect never followed.
	r := e.do("POST", "/rollout/task/submit", polarTask("ssrf-ok", 2, map[string]any{"callback_url": redirector.URL + "/done"}))
	if r.code != http.StatusOK {
		t.Fatalf("allowed callback: %d %s", r.code, r.body)
	}
	if st := e.waitTask(t, "ssrf-ok"); st.Status != "completed" {
		t.Fatalf("task: %s", st.Status)
	}
	deadline := time.Now().Add(30 * time.Second)
	for bounced.Load() < 4 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if bounced.Load() == 0 {
		t.Fatal("the allowed callback was never sent")
	}
	time.Sleep(200 * time.Millisecond)
	if n := victim.Load(); n != 0 {
		t.Fatalf("the redirect target was POSTed %d times", n)
	}
	t.Logf("callback tried %d times, redirect followed 0 times", bounced.Load())
}
