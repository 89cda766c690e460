package engine

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// TestPostOverHTTPS: a backend the lean client does not serve (https)
// goes through net/http, with the same answer and status handling.
func TestPostOverHTTPS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/bad" {
			http.Error(w, "no", http.StatusBadRequest)
			return
		}
		w.Write([]byte(`{"echo":` + string(body) + `}`))
	}))
	defer srv.Close()
	saved := transport.TLSClientConfig
	transport.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig // trust the test server
	defer func() { transport.TLSClientConfig = saved }()
	var out struct {
		Echo []int `json:"echo"`
	}
	if err := postJSON(context.Background(), srv.URL+"/ok", []int{1, 2}, &out); err != nil || len(out.Echo) != 2 {
		t.Fatalf("%v %+v", err, out)
	}
	err := postJSON(context.Background(), srv.URL+"/bad", []int{1}, &out)
	if se, ok := err.(*StatusError); !ok || se.Status != http.StatusBadRequest {
		t.Fatalf("want a 400 StatusError, got %v", err)
	}
}

// TestAbortInFlight: vLLM's pause in abort mode keeping the cache, then a
// resume; a server without the pause API (404 or 405) is
// ErrNoPause, so the pool stops trying; another failure is not.
func TestAbortInFlight(t *testing.T) {
	for _, tc := range []struct {
		status int
		noAPI  bool
	}{{200, false}, {404, true}, {405, true}, {500, false}} {
		var calls []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls = append(calls, r.Method+" "+r.URL.RequestURI())
			w.WriteHeader(tc.status)
			_, _ = w.Write([]byte(`{}`))
		}))
		err := (&VLLM{BaseURL: srv.URL}).AbortInFlight(context.Background())
		srv.Close()
		if (err == nil) != (tc.status == 200) || errors.Is(err, ErrNoPause) != tc.noAPI {
			t.Fatalf("status %d: %v", tc.status, err)
		}
		want := []string{"POST /pause?mode=abort&clear_cache=false"}
		if tc.status == 200 {
			want = append(want, "POST /resume")
		}
		if !slices.Equal(calls, want) {
			t.Fatalf("status %d: calls %v, want %v", tc.status, calls, want)
		}
	}
	if err := (&Generate{}).AbortInFlight(context.Background()); !errors.Is(err, ErrNoPause) {
		t.Fatalf("generate protocol: %v", err)
	}
}
