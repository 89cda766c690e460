// Package nodes serves a coordinator's node registry (/v1/nodes): hosts
// join, report their load and are drained. The routes exist on every host
// so the API is one document; a host that is not a coordinator answers
// 404 not_a_coordinator.
package nodes

import (
	"errors"
	"net/http"

	"github.com/gorilla/mux"
	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/core/coord"
	"github.com/prorl/prorl/core/openapi"
)

type registry struct {
	svc api.Service
	c   *coord.Coordinator // nil: not a coordinator
}

// Routes is the registry of c (nil on a plain host) as a dialect.
func Routes(c *coord.Coordinator) api.Dialect {
	return func(svc api.Service) []api.Route {
		g := &registry{svc: svc, c: c}
		o, str := openapi.Object, openapi.String
		idState := o(map[string]openapi.Schema{"id": str, "state": str}, "id", "state")
		return []api.Route{
			{Path: "/v1/nodes", Method: http.MethodPost, Name: "register_node", Level: api.AdminLevel, Handler: g.register,
				Doc: api.Doc{Summary: "A host joins the coordinator (admin)", Body: coord.NodeInfo{}, Resp: idState}},
			{Path: "/v1/nodes", Method: http.MethodGet, Name: "list_nodes", Level: api.UserLevel, Handler: g.list,
				Doc: api.Doc{Summary: "The coordinator's nodes", Resp: o(map[string]openapi.Schema{"nodes": openapi.ArrayOf(openapi.Ref(coord.NodeStatus{}))}, "nodes")}},
			{Path: "/v1/nodes/{id:[^/:]+}:heartbeat", Method: http.MethodPost, Name: "node_heartbeat", Level: api.AdminLevel, Handler: g.heartbeat,
				Doc: api.Doc{Summary: "A node's heartbeat with its load (admin)", Body: coord.Load{}, Resp: o(map[string]openapi.Schema{"ok": openapi.Boolean}, "ok")}},
			{Path: "/v1/nodes/{id:[^/:]+}:drain", Method: http.MethodPost, Name: "drain_node", Level: api.AdminLevel, Handler: g.drain,
				Doc: api.Doc{Summary: "Stop placing rollouts on a node (admin)", Body: openapi.Schema{"type": "object"}, Resp: idState}},
		}
	}
}

// coordinator reports (with a 404) a host that is not a coordinator.
func (g *registry) coordinator(w http.ResponseWriter) bool {
	if g.c == nil {
		api.WriteError(w, api.Errf(http.StatusNotFound, "not_a_coordinator", "", "this host is not a coordinator (prorl-host coordinate)"))
		return false
	}
	return true
}

func (g *registry) register(w http.ResponseWriter, r *http.Request) {
	if !g.coordinator(w) {
		return
	}
	var in coord.NodeInfo
	if e := api.Decode(w, r, g.svc.Settings().Server.MaxBodyBytes, &in); e != nil {
		api.WriteError(w, e)
		return
	}
	if err := g.c.Register(in); err != nil {
		var re *coord.RegisterError
		if errors.As(err, &re) {
			api.WriteError(w, api.Errf(re.Status, "node_refused", re.Field, "%s", re.Msg))
			return
		}
		api.WriteError(w, api.Errf(http.StatusInternalServerError, "internal", "", "%v", err))
		return
	}
	api.WriteJSON(w, http.StatusOK, map[string]any{"id": in.ID, "state": coord.StateLive})
}

func (g *registry) heartbeat(w http.ResponseWriter, r *http.Request) {
	if !g.coordinator(w) {
		return
	}
	var l coord.Load
	if e := api.Decode(w, r, g.svc.Settings().Server.MaxBodyBytes, &l); e != nil {
		api.WriteError(w, e)
		return
	}
	if err := g.c.Heartbeat(mux.Vars(r)["id"], l); err != nil {
		api.WriteError(w, api.Errf(http.StatusNotFound, "unknown_node", "id", "%v", err))
		return
	}
	api.WriteJSON(w, http.StatusOK, map[string]any{"ok": true})
}

func (g *registry) drain(w http.ResponseWriter, r *http.Request) {
	if !g.coordinator(w) {
		return
	}
	id := mux.Vars(r)["id"]
	if err := g.c.Drain(id); err != nil {
		api.WriteError(w, api.Errf(http.StatusNotFound, "unknown_node", "id", "%v", err))
		return
	}
	api.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "state": coord.StateDraining})
}

func (g *registry) list(w http.ResponseWriter, _ *http.Request) {
	if !g.coordinator(w) {
		return
	}
	api.WriteJSON(w, http.StatusOK, map[string]any{"nodes": g.c.Nodes()})
}
