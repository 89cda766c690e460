package api

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/gorilla/mux"
	"github.com/prorl/prorl/core/config"
	"github.com/prorl/prorl/core/gateway"
	"github.com/prorl/prorl/core/metrics"
	"github.com/prorl/prorl/core/openapi"
)

// TestOpenAPIMatchesRouter: every route the router serves is in the
// document and every documented operation is served, with a summary and
// a success response. Adding a route without documenting it fails here.
func TestOpenAPIMatchesRouter(t *testing.T) {
	s := &Server{Deps: Deps{Cfg: config.Default(), Metrics: metrics.New()}}
	r := s.router((*gateway.Gateway)(nil))
	var served []string
	err := r.Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		tpl, err := route.GetPathTemplate()
		if err != nil {
			return nil
		}
		methods, err := route.GetMethods()
		if err != nil { // the gateway's catch-all 404
			if tpl != "/gateway/" {
				t.Errorf("route %s has no methods", tpl)
			}
			return nil
		}
		for _, m := range methods {
			if m == http.MethodHead {
				continue
			}
			served = append(served, openapi.Path(tpl)+" "+m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
		Paths   map[string]map[string]struct {
			Summary   string                     `json:"summary"`
			Responses map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(s.document(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q", doc.OpenAPI)
	}
	var documented []string
	for p, ops := range doc.Paths {
		for m, op := range ops {
			documented = append(documented, p+" "+strings.ToUpper(m))
			if op.Summary == "" {
				t.Errorf("%s %s: no summary (document it in apiDocs)", strings.ToUpper(m), p)
			}
			ok := false
			for code := range op.Responses {
				ok = ok || code[0] == '2'
			}
			if !ok {
				t.Errorf("%s %s: no success response", strings.ToUpper(m), p)
			}
		}
	}
	slices.Sort(served)
	slices.Sort(documented)
	for _, x := range served {
		if !slices.Contains(documented, x) {
			t.Errorf("served but not documented: %s", x)
		}
	}
	for _, x := range documented {
		if !slices.Contains(served, x) {
			t.Errorf("documented but not served: %s", x)
		}
	}
	if len(served) < 40 {
		t.Errorf("only %d routes walked", len(served))
	}
}
