package coord

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/core/store"
)

// TestTokenStaysOnNetworkYouChose: a coordinator with a token refuses a
// node it would reach over plain http on another machine, unless told to.
func TestTokenStaysOnNetworkYouChose(t *testing.T) {
	for _, tc := range []struct {
		url, token string
		allow, ok  bool
	}{
		{"http://10.0.0.7:8006", "secret", false, false},
		{"http://node7.cluster:8006", "secret", false, false},
		{"http://10.0.0.7:8006", "secret", true, true},
		{"https://10.0.0.7:8006", "secret", false, true},
		{"http://127.0.0.1:8006", "secret", false, true},
		{"http://[::1]:8006", "secret", false, true},
		{"http://localhost:8006", "secret", false, true},
		{"http://10.0.0.7:8006", "", false, true}, // no token to leak
	} {
		c := New(Options{Version: "v1", Plugins: []string{"math"}, Token: tc.token, AllowPlainHTTP: tc.allow, Store: store.NewMemory(10), DeadAfter: time.Hour})
		err := c.Register(NodeInfo{ID: "n", URL: tc.url, Version: "v1", Plugins: []string{"math"}})
		c.Close()
		var re *RegisterError
		if tc.ok != (err == nil) || err != nil && (!errors.As(err, &re) || re.Field != "url" || !strings.Contains(re.Msg, "allow_plain_http")) {
			t.Errorf("%s token=%q allow=%v: %v", tc.url, tc.token, tc.allow, err)
		}
	}
}

// TestNoRedirectsWithToken: a node (or something at its address) that
// answers with a redirect does not get the coordinator's token sent on.
func TestNoRedirectsWithToken(t *testing.T) {
	var leaked atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Add(1)
		}
	}))
	defer elsewhere.Close()
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer node.Close()
	c := New(Options{Version: "v1", Plugins: []string{"math"}, Token: "secret", Store: store.NewMemory(10), DeadAfter: time.Hour})
	defer c.Close()
	if err := c.call(context.Background(), http.MethodGet, node.URL+"/v1/rollouts/x", nil, nil); err == nil {
		t.Fatal("a redirect was taken for an answer")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	since := uint64(0)
	_ = c.stream(ctx, "n", node.URL, &since)
	// A node's own requests to its coordinator carry the token too.
	mctx, mcancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer mcancel()
	m := &Member{Coordinator: node.URL, Token: "secret", Info: NodeInfo{ID: "n", URL: "http://127.0.0.1:1", Version: "v1"}, Interval: 50 * time.Millisecond,
		Load: func() Load { return Load{} }, Log: hclog.NewNullLogger()}
	_ = m.Run(mctx)
	if n := leaked.Load(); n != 0 {
		t.Fatalf("the token reached the redirect's target %d times", n)
	}
}
