// Package apitest builds the host's API for the tests of its dialects: a
// real pipeline, store and (empty) backend pool, no plugins.
package apitest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/core/backend"
	"github.com/prorl/prorl/core/config"
	"github.com/prorl/prorl/core/pipeline"
	"github.com/prorl/prorl/core/store"
)

// NewServer is the API on st with the default config, a pipeline and an
// empty backend pool, no plugins, and the dialects given.
func NewServer(t testing.TB, st store.Store, dialects ...api.Dialect) (*api.Server, http.Handler) {
	t.Helper()
	cfg, log := config.Default(), hclog.NewNullLogger()
	pool := backend.NewPool(log)
	p, err := pipeline.New(pipeline.Deps{Cfg: cfg, Log: log, Pool: pool, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	return api.New(api.Deps{Cfg: cfg, Log: log, Pipeline: p, Pool: pool, Store: st, Dialects: dialects})
}

// CheckRoutes checks a dialect's routes: n of them, each named with
// prefix, documented (the host's OpenAPI document is built from these),
// with a handler and the token level wants.
func CheckRoutes(t *testing.T, rs []api.Route, n int, prefix string, level func(api.Route) api.Level) {
	t.Helper()
	if len(rs) != n {
		t.Fatalf("%d routes, want %d", len(rs), n)
	}
	for _, rt := range rs {
		if rt.Doc.Summary == "" || rt.Doc.Resp == nil || !strings.HasPrefix(rt.Name, prefix) || rt.Handler == nil {
			t.Errorf("%s %s: %+v", rt.Method, rt.Path, rt)
		}
		if want := level(rt); rt.Level != want {
			t.Errorf("%s %s: level %d, want %d", rt.Method, rt.Path, rt.Level, want)
		}
	}
}

// SettingsOnly is a Service that answers only Settings (the default
// config): all that building most dialects' routes reads.
type SettingsOnly struct{ api.Service }

// Settings implements api.Service.
func (SettingsOnly) Settings() *config.Config { return config.Default() }
