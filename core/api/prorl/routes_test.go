package prorl

import (
	"strings"
	"testing"

	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/core/config"
)

// settingsOnly is a Service that only has settings: Routes reads no more.
type settingsOnly struct{ api.Service }

func (settingsOnly) Settings() *config.Config { return config.Default() }

// TestRoutesDocumented: each ProRL route is documented (the OpenAPI
// document the host serves is built from these), with the token ProRL's
// server needs for it.
func TestRoutesDocumented(t *testing.T) {
	admin := map[string]bool{"/start": true, "/stop": true, "/add_llm_server": true, "/clear_llm_server": true}
	rs := Routes(settingsOnly{})
	if len(rs) != 7 {
		t.Fatalf("%d routes", len(rs))
	}
	for _, rt := range rs {
		if rt.Doc.Summary == "" || rt.Doc.Resp == nil || !strings.HasPrefix(rt.Name, "prorl_") || rt.Handler == nil {
			t.Errorf("%s %s: %+v", rt.Method, rt.Path, rt)
		}
		if want := api.UserLevel; admin[rt.Path] && rt.Level != api.AdminLevel || !admin[rt.Path] && rt.Level != want {
			t.Errorf("%s: level %d", rt.Path, rt.Level)
		}
	}
}
