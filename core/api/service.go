package api

import (
	"context"
	"net/http"

	"github.com/hashicorp/go-hclog"

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

	// ResolveDomain is the enabled, healthy domain a name picks: a domain's
	// name, else a data_source one accepts; field names the request's task.
	ResolveDomain(name, field string) (string, *Error)
	// Group builds a checked submission's group of rollouts in domain, and
	// its group id.
	Group(sr *SubmitRequest, domain string) ([]pipeline.Request, string)
	// CheckHarness checks a request to run a configured harness.
	CheckHarness(hr *HarnessRequest, field string) *Error
	// Record is the submission stored under key in the store's key table
	// (shared with v1's idempotency keys, expiring with them); Mark stores
	// key with no rollouts, replacing one there.
	Record(key string) (store.Submission, bool)
	Mark(key string) error
	// Live is a rollout still in the pipeline; Snapshot its state now.
	Live(id string) (*pipeline.Rollout, bool)
	Snapshot(r *pipeline.Rollout) *trajectory.Result
	// Lifetime ends when the host stops waiting for results (shutdown);
	// WaitCtx is a request's context, ended with it too.
	Lifetime() context.Context
	WaitCtx(r *http.Request) (context.Context, context.CancelFunc)
	Logger() hclog.Logger
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

// ResolveDomain implements Service.
func (s *Server) ResolveDomain(name, field string) (string, *Error) {
	h := taskHeader{Domain: name} // unknown: refused with the list of domains
	if _, ok := s.Plugins.Get(name); !ok {
		if _, ok := s.Plugins.ByDataSource(name); ok {
			h = taskHeader{DataSource: name}
		}
	}
	p, e := s.resolveDomain(h, field)
	if e != nil {
		return "", e
	}
	return p.Name, nil
}

// Group implements Service.
func (s *Server) Group(sr *SubmitRequest, domain string) ([]pipeline.Request, string) {
	return groupRequests(sr, domain, retryPolicy(s.Cfg.Pipeline.Retry, sr))
}

// CheckHarness implements Service.
func (s *Server) CheckHarness(hr *HarnessRequest, field string) *Error {
	return s.checkHarness(hr, field)
}

// Record implements Service.
func (s *Server) Record(key string) (store.Submission, bool) { return s.Store.Idempotent(key) }

// Mark implements Service.
func (s *Server) Mark(key string) error {
	return s.Store.Submit(nil, &store.Keyed{Key: key, Replace: true})
}

// Live implements Service.
func (s *Server) Live(id string) (*pipeline.Rollout, bool) { return s.Pipeline.Lookup(id) }

// Snapshot implements Service.
func (s *Server) Snapshot(r *pipeline.Rollout) *trajectory.Result { return s.Pipeline.Snapshot(r) }

// Lifetime implements Service.
func (s *Server) Lifetime() context.Context { return s.waits }

// WaitCtx implements Service.
func (s *Server) WaitCtx(r *http.Request) (context.Context, context.CancelFunc) { return s.waitCtx(r) }

// Logger implements Service.
func (s *Server) Logger() hclog.Logger { return s.Log }
