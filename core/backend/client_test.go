package backend

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
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
