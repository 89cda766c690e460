package nodes

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorilla/mux"
	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/core/coord"
	"github.com/prorl/prorl/internal/apitest"
)

func serve(c *coord.Coordinator) *mux.Router {
	r := mux.NewRouter()
	for _, rt := range Routes(c)(apitest.SettingsOnly{}) {
		r.HandleFunc(rt.Path, rt.Handler).Methods(rt.Method)
	}
	return r
}

// TestRegistry: a coordinator registers, lists, hears and drains its
// nodes, and refuses what it must; a plain host answers every registry
// route 404 not_a_coordinator.
func TestRegistry(t *testing.T) {
	c := coord.New(coord.Options{Version: "v", Plugins: []string{"math"}, Token: "t"})
	defer c.Close()
	cases := []struct {
		name, method, path, body string
		coordinator              bool
		code                     int
		want                     string
	}{
		{"register", "POST", "/v1/nodes", `{"id":"n1","url":"http://127.0.0.1:1","version":"v","plugins":["math"]}`, true, 200, `"state":"live"`},
		{"another version", "POST", "/v1/nodes", `{"id":"n2","url":"http://127.0.0.1:2","version":"w","plugins":["math"]}`, true, 409, `"node_refused"`},
		{"unknown field", "POST", "/v1/nodes", `{"id":"n3","uri":"x"}`, true, 400, `"uri"`},
		{"heartbeat", "POST", "/v1/nodes/n1:heartbeat", `{"capacity":4,"healthy":true}`, true, 200, `"ok":true`},
		{"heartbeat of a stranger", "POST", "/v1/nodes/nx:heartbeat", `{}`, true, 404, `"unknown_node"`},
		{"list", "GET", "/v1/nodes", ``, true, 200, `"n1"`},
		{"drain", "POST", "/v1/nodes/n1:drain", `{}`, true, 200, `"state":"draining"`},
		{"plain host: register", "POST", "/v1/nodes", `{}`, false, 404, `"not_a_coordinator"`},
		{"plain host: list", "GET", "/v1/nodes", ``, false, 404, `"not_a_coordinator"`},
		{"plain host: heartbeat", "POST", "/v1/nodes/n1:heartbeat", `{}`, false, 404, `"not_a_coordinator"`},
		{"plain host: drain", "POST", "/v1/nodes/n1:drain", `{}`, false, 404, `"not_a_coordinator"`},
	}
	coordinator, plain := serve(c), serve(nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := plain
			if tc.coordinator {
				h = coordinator
			}
			w := httptest.NewRecorder()
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			h.ServeHTTP(w, req)
			if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.want) || !json.Valid(w.Body.Bytes()) {
				t.Errorf("%d %s, want %d with %s", w.Code, w.Body, tc.code, tc.want)
			}
		})
	}
}

// TestRoutesDocumented: each route is documented, and only listing the
// nodes takes the user's token.
func TestRoutesDocumented(t *testing.T) {
	apitest.CheckRoutes(t, Routes(nil)(apitest.SettingsOnly{}), 4, "", func(rt api.Route) api.Level {
		if rt.Method == http.MethodGet {
			return api.UserLevel
		}
		return api.AdminLevel
	})
}
