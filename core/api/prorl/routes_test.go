package prorl

import (
	"testing"

	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/core/config"
	"github.com/prorl/prorl/internal/apitest"
)

// settingsOnly is a Service that only has settings: Routes reads no more.
type settingsOnly struct{ api.Service }

func (settingsOnly) Settings() *config.Config { return config.Default() }

// TestRoutesDocumented: each ProRL route is documented (the OpenAPI
// document the host serves is built from these), with the token ProRL's
// server needs for it.
func TestRoutesDocumented(t *testing.T) {
	admin := map[string]bool{"/start": true, "/stop": true, "/add_llm_server": true, "/clear_llm_server": true}
	apitest.CheckRoutes(t, Routes(settingsOnly{}), 7, "prorl_", func(rt api.Route) api.Level {
		if admin[rt.Path] {
			return api.AdminLevel
		}
		return api.UserLevel
	})
}
