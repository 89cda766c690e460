package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prorl/prorl/core/config"
)

func TestGuard(t *testing.T) {
	cfg := config.Default()
	cfg.Server.Listen = "trainer-box:8006"
	cfg.Server.AllowedHosts = []string{"prorl.example"}
	cfg.Server.AllowedOrigins = []string{"https://notebook.example"}
	g := newGuard(cfg)
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h := g.guarded(next)
	for _, tc := range []struct {
		name, method, host string
		hdr                map[string]string
		want               int
		cors               string
	}{
		{"loopback address", "GET", "127.0.0.1:8006", nil, 418, ""},
		{"IPv6 loopback", "GET", "[::1]:8006", nil, 418, ""},
		{"an address of the machine", "GET", "10.1.2.3:8006", nil, 418, ""},
		{"localhost", "GET", "localhost:8006", nil, 418, ""},
		{"a .localhost name", "GET", "ui.localhost", nil, 418, ""},
		{"the listen name", "GET", "trainer-box:8006", nil, 418, ""},
		{"an allowed name", "GET", "PROrl.example.", nil, 418, ""},
		{"a rebound name", "GET", "evil.example:8006", nil, 403, ""},
		{"a name ending like an allowed one", "GET", "prorl.example.evil.example", nil, 403, ""},
		{"same origin", "POST", "127.0.0.1:8006", map[string]string{"Origin": "http://127.0.0.1:8006"}, 418, ""},
		{"another port is another origin", "POST", "127.0.0.1:8006", map[string]string{"Origin": "http://127.0.0.1:3000"}, 403, ""},
		{"an allowed origin", "POST", "127.0.0.1:8006", map[string]string{"Origin": "https://notebook.example"}, 418, "https://notebook.example"},
		{"its preflight", "OPTIONS", "127.0.0.1:8006", map[string]string{"Origin": "https://notebook.example", "Access-Control-Request-Method": "POST"}, 204, "https://notebook.example"},
		{"a preflight of another origin", "OPTIONS", "127.0.0.1:8006", map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}, 403, ""},
		{"same-site is not same-origin", "GET", "127.0.0.1:8006", map[string]string{"Sec-Fetch-Site": "same-site"}, 403, ""},
		{"typed in the address bar", "GET", "127.0.0.1:8006", map[string]string{"Sec-Fetch-Site": "none"}, 418, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "/v1/backends", nil)
			r.Host = tc.host
			for k, v := range tc.hdr {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want || w.Header().Get("Access-Control-Allow-Origin") != tc.cors {
				t.Fatalf("%d (CORS %q) %s; want %d (CORS %q)", w.Code, w.Header().Get("Access-Control-Allow-Origin"), w.Body, tc.want, tc.cors)
			}
		})
	}
	// "*" opens either check, for a deployment behind its own gate.
	cfg.Server.AllowedHosts, cfg.Server.AllowedOrigins = []string{"*"}, []string{"*"}
	open := newGuard(cfg)
	r := httptest.NewRequest("POST", "/v1/backends", strings.NewReader("{}"))
	r.Host, r.Header["Origin"] = "any.example", []string{"https://other.example"}
	if e := open.check(r); e != nil {
		t.Fatal(e)
	}
}

func TestJSONBody(t *testing.T) {
	for _, tc := range []struct {
		ct, body string
		ok       bool
	}{
		{"application/json", "{}", true},
		{"Application/JSON; charset=utf-8", "{}", true},
		{"application/merge-patch+json", "{}", true},
		{"text/plain", "{}", false},
		{"", "{}", false},
		{"multipart/form-data; boundary=x", "{}", false},
		{"", "", true},
	} {
		var r *http.Request
		if tc.body == "" {
			r = httptest.NewRequest("POST", "/", nil)
		} else {
			r = httptest.NewRequest("POST", "/", strings.NewReader(tc.body))
		}
		if tc.ct != "" {
			r.Header.Set("Content-Type", tc.ct)
		}
		if e := jsonBody(r); (e == nil) != tc.ok {
			t.Errorf("%q %q: %v", tc.ct, tc.body, e)
		}
	}
}
