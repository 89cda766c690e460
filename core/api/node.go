package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/prorl/prorl/core/backend"
	"github.com/prorl/prorl/core/pipeline"
)

// nodeRollouts is POST /v1/node/rollouts: a coordinator places rollouts on
// this host under its own ids and attempts (admin token). A rollout this
// host already has is reported "running" or "finished", never run twice.
func (s *Server) nodeRollouts(w http.ResponseWriter, r *http.Request) {
	var req NodeRolloutsRequest
	if e := Decode(w, r, s.Cfg.Server.MaxBodyBytes, &req); e != nil {
		WriteError(w, e)
		return
	}
	if len(req.Rollouts) == 0 || len(req.Rollouts) > s.Cfg.Server.MaxBatch*s.Cfg.Server.MaxSamples {
		WriteError(w, Invalid("rollouts", "give between 1 and %d rollouts", s.Cfg.Server.MaxBatch*s.Cfg.Server.MaxSamples))
		return
	}
	for i, a := range req.Rollouts {
		if a.ID == "" || !validID(a.ID) {
			WriteError(w, Invalid(fmt.Sprintf("rollouts[%d].id", i), "required: at most %d characters of [A-Za-z0-9-_.:]", maxIDLen))
			return
		}
		if a.Attempt < 1 {
			WriteError(w, Invalid(fmt.Sprintf("rollouts[%d].attempt", i), "must be at least 1"))
			return
		}
	}
	if s.closing.Load() {
		WriteError(w, Errf(http.StatusServiceUnavailable, "shutting_down", "", "the host is shutting down"))
		return
	}
	states, err := s.Pipeline.SubmitAssigned(req.Rollouts)
	switch {
	case errors.Is(err, pipeline.ErrQueueFull):
		WriteError(w, Errf(http.StatusTooManyRequests, "queue_full", "", "%v; retry later", err))
	case errors.Is(err, pipeline.ErrShuttingDown), errors.Is(err, pipeline.ErrStore):
		WriteError(w, Errf(http.StatusServiceUnavailable, "unavailable", "", "%v", err))
	case err != nil:
		WriteError(w, Invalid("rollouts", "%v", err))
	default:
		WriteJSON(w, http.StatusOK, map[string]any{"rollouts": states})
	}
}

// addNodeBackend gives an inference server to the coordinator's live node
// with the fewest backends (a trainer that registers its servers with the
// rollout service, as ProRL's /add_llm_server does, spreads them over the
// nodes); the node checks and adds it as it would its own.
func (s *Server) addNodeBackend(ctx context.Context, req BackendRequest, field string) (backend.Status, int, *Error) {
	node, rep, err := s.Cluster.AddBackend(ctx, req)
	if err != nil {
		return backend.Status{}, 0, Errf(http.StatusServiceUnavailable, "no_capacity", "", "%v", err)
	}
	if rep.Status/100 != 2 {
		var body struct {
			Error *Error `json:"error"`
		}
		if json.Unmarshal(rep.Body, &body) == nil && body.Error != nil {
			if body.Error.Field != "" {
				body.Error.Field = field + body.Error.Field
			}
			body.Error.Message = fmt.Sprintf("node %s: %s", node, body.Error.Message)
			body.Error.Status = rep.Status
			return backend.Status{}, 0, body.Error
		}
		return backend.Status{}, 0, Errf(http.StatusBadGateway, "node_failed", "", "node %s answered %d %s%s", node, rep.Status, rep.Body, rep.Error)
	}
	var st backend.Status
	if err := json.Unmarshal(rep.Body, &st); err != nil {
		return backend.Status{}, 0, Errf(http.StatusBadGateway, "node_failed", "", "node %s: %v", node, err)
	}
	s.Log.Info("backend given to a node", "node", node, "url", st.URL)
	return st, rep.Status, nil
}
