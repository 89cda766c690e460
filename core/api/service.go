package api

import (
	"context"

	"github.com/prorl/prorl/core/backend"
	"github.com/prorl/prorl/core/config"
	"github.com/prorl/prorl/core/pipeline"
	"github.com/prorl/prorl/core/store"
	"github.com/prorl/prorl/core/trajectory"
)

// Service is what another server's API (a Dialect) asks of the host: the
// v1 API's own operations, so a dialect only translates its requests and
// answers, and reaches the store, the backends and the plugins through
// these alone.
type Service interface {
	// Settings is the deployment's config.
	Settings() *config.Config
	// Enqueue submits checked requests (as POST /v1/rollouts does once it
	// validated its body), stored under key when given; field names the
	// request's part at fault in an error.
	Enqueue(reqs []pipeline.Request, key *store.Keyed, field string) ([]*pipeline.Rollout, *Error)
	// Validate checks a v1 submission's fields.
	Validate(sr *SubmitRequest) *Error
	// DomainOf is the enabled domain serving a dataset's data_source.
	DomainOf(dataSource string) (string, bool)
	// Result is a finished rollout's result; Ack hands results over.
	Result(id string) (*trajectory.Result, bool)
	Ack(ids []string) (int, error)
	// Cancel ends a live rollout, CancelWhere every one match picks.
	Cancel(id, why string) bool
	CancelWhere(match func(*pipeline.Rollout) bool, why string) int
	// Stats are the pipeline's queues and stages.
	Stats() pipeline.Stats
	// HasBackends reports whether rollouts have somewhere to generate.
	HasBackends() bool
	// AddBackend registers an inference server (200: already there, 201:
	// added); ClearBackends removes them all.
	AddBackend(ctx context.Context, req BackendRequest, field string) (backend.Status, int, *Error)
	ClearBackends()
}

var _ Service = (*Server)(nil)

// Settings implements Service.
func (s *Server) Settings() *config.Config { return s.Cfg }

// Validate implements Service.
func (s *Server) Validate(sr *SubmitRequest) *Error { return sr.validate("", s.Cfg.Server.MaxSamples) }

// DomainOf implements Service.
func (s *Server) DomainOf(dataSource string) (string, bool) {
	p, ok := s.Plugins.ByDataSource(dataSource)
	if !ok {
		return "", false
	}
	return p.Name, true
}

// Result implements Service.
func (s *Server) Result(id string) (*trajectory.Result, bool) { return s.Store.Get(id) }

// Ack implements Service.
func (s *Server) Ack(ids []string) (int, error) { return s.Store.Ack(ids) }

// Cancel implements Service.
func (s *Server) Cancel(id, why string) bool { return s.Pipeline.Cancel(id, why) }

// CancelWhere implements Service.
func (s *Server) CancelWhere(match func(*pipeline.Rollout) bool, why string) int {
	return s.Pipeline.CancelWhere(match, why)
}

// Stats implements Service.
func (s *Server) Stats() pipeline.Stats { return s.Pipeline.Stats() }

// HasBackends implements Service: a coordinator's backends are its nodes'.
func (s *Server) HasBackends() bool { return s.Pool.Len() > 0 || s.Cluster != nil }

// AddBackend implements Service.
func (s *Server) AddBackend(ctx context.Context, req BackendRequest, field string) (backend.Status, int, *Error) {
	return s.addBackendReq(ctx, req, field)
}

// ClearBackends implements Service.
func (s *Server) ClearBackends() { s.Pool.Clear() }
