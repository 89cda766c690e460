package prorl

import (
	"testing"

	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/internal/apitest"
)

// TestRoutesDocumented: each ProRL route is documented (the OpenAPI
// document the host serves is built from these), with the token ProRL's
// server needs for it.
func TestRoutesDocumented(t *testing.T) {
	admin := map[string]bool{"/start": true, "/stop": true, "/add_llm_server": true, "/clear_llm_server": true}
	apitest.CheckRoutes(t, Routes(apitest.SettingsOnly{}), 7, "prorl_", func(rt api.Route) api.Level {
		if admin[rt.Path] {
			return api.AdminLevel
		}
		return api.UserLevel
	})
}
