package api

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prorl/prorl/core/config"
)

func TestAuth(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	tests := []struct {
		name, user, admin, header string
		need                      level
		want                      int
	}{
		{"open deployment", "", "", "", adminLevel, 200},
		{"missing token", "u", "a", "", userLevel, 401},
		{"wrong token", "u", "a", "Bearer nope", userLevel, 401},
		{"not bearer", "u", "a", "u", userLevel, 401},
		{"user on user", "u", "a", "Bearer u", userLevel, 200},
		{"user on admin", "u", "a", "Bearer u", adminLevel, 403},
		{"admin on admin", "u", "a", "Bearer a", adminLevel, 200},
		{"admin on user", "u", "a", "Bearer a", userLevel, 200},
		{"one token for both", "u", "", "Bearer u", adminLevel, 200},
		{"admin token only", "", "a", "Bearer a", userLevel, 200},
		{"admin token only, none given", "", "a", "", userLevel, 401},
		{"prefix of the token", "secret", "", "Bearer secre", userLevel, 401},
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
