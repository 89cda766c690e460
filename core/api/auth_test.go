package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prorl/prorl/core/config"
)

func TestAuth(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	tests := []struct {
		name, user, admin, header string
		need                      Level
		want                      int
	}{
		{"open deployment", "", "", "", AdminLevel, 200},
		{"missing token", "u", "a", "", UserLevel, 401},
		{"wrong token", "u", "a", "Bearer nope", UserLevel, 401},
		{"not bearer", "u", "a", "u", UserLevel, 401},
		{"user on user", "u", "a", "Bearer u", UserLevel, 200},
		{"user on admin", "u", "a", "Bearer u", AdminLevel, 403},
		{"admin on admin", "u", "a", "Bearer a", AdminLevel, 200},
		{"admin on user", "u", "a", "Bearer a", UserLevel, 200},
		{"one token for both", "u", "", "Bearer u", AdminLevel, 200},
		{"admin token only", "", "a", "Bearer a", UserLevel, 200},
		{"admin token only, none given", "", "a", "", UserLevel, 401},
		{"prefix of the token", "secret", "", "Bearer secre", UserLevel, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Server.Token, cfg.Server.AdminToken = tt.user, tt.admin
			s := &Server{Deps: Deps{Cfg: cfg}}
			req := httptest.NewRequest("GET", "/x", nil)
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			rec := httptest.NewRecorder()
			s.auth(tt.need, ok)(rec, req)
			if rec.Code != tt.want {
				t.Fatalf("status %d, want %d (%s)", rec.Code, tt.want, rec.Body)
			}
			if rec.Code == 401 && rec.Header().Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
}

// TestEveryRouteAuth: every route × {no token, user, admin}, from the one
// route table New serves.
func TestEveryRouteAuth(t *testing.T) {
	cfg := config.Default()
	cfg.Server.Token, cfg.Server.AdminToken = "u", "a"
	s := &Server{Deps: Deps{Cfg: cfg}}
	reached := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	for _, rt := range s.routes() {
		for _, who := range []struct{ name, header string }{{"no token", ""}, {"user", "Bearer u"}, {"admin", "Bearer a"}} {
			f := http.Handler(reached)
			if rt.Level != PublicLevel {
				f = s.auth(rt.Level, reached)
			}
			req := httptest.NewRequest(rt.Method, rt.Path, nil)
			if who.header != "" {
				req.Header.Set("Authorization", who.header)
			}
			rec := httptest.NewRecorder()
			f.ServeHTTP(rec, req)
			want := http.StatusTeapot
			switch {
			case rt.Level == PublicLevel:
			case who.header == "":
				want = http.StatusUnauthorized
			case rt.Level == AdminLevel && who.name == "user":
				want = http.StatusForbidden
			}
			if rec.Code != want {
				t.Errorf("%s %s as %s: %d, want %d", rt.Method, rt.Path, who.name, rec.Code, want)
			}
		}
	}
	// Cancels that reach every caller's rollouts need the admin token.
	for _, body := range []string{`{"before_policy_version": 9223372036854775807}`, `{"all": true}`} {
		req := httptest.NewRequest("POST", "/v1/rollouts:cancel", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer u")
		rec := httptest.NewRecorder()
		s.cancelMany(rec, req)
		if rec.Code != http.StatusForbidden {
			t.Errorf("user cancel %s: %d %s", body, rec.Code, rec.Body)
		}
	}
}
