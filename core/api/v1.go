package api

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/prorl/prorl/core/backend"
	"github.com/prorl/prorl/core/baseurl"
	"github.com/prorl/prorl/core/config"
	"github.com/prorl/prorl/core/coord"
	"github.com/prorl/prorl/core/engine"
	"github.com/prorl/prorl/core/pipeline"
	"github.com/prorl/prorl/core/pluginhost"
	"github.com/prorl/prorl/core/store"
	"github.com/prorl/prorl/core/trajectory"
)

// resolveDomain finds the plugin for a task: by "domain", else by ProRL's
// "data_source".
func (s *Server) resolveDomain(h taskHeader, field string) (*pluginhost.Plugin, *Error) {
	var p *pluginhost.Plugin
	var ok bool
	switch {
	case h.Domain != "":
		p, ok = s.Plugins.Get(h.Domain)
		if !ok {
			return nil, Invalid(field+".domain", "unknown domain %q; enabled domains: %s", h.Domain, strings.Join(s.Plugins.Names(), ", "))
		}
	case h.DataSource != "":
		p, ok = s.Plugins.ByDataSource(h.DataSource)
		if !ok {
			return nil, Invalid(field+".data_source", "no enabled domain accepts data_source %q", h.DataSource)
		}
	default:
		return nil, Invalid(field+".domain", "required (or give data_source)")
	}
	if !p.Healthy() {
		return nil, Errf(http.StatusServiceUnavailable, "domain_unavailable", field+".domain", "domain %q is %s: %s", p.Name, p.Status().State, p.LastError())
	}
	return p, nil
}

// requests turns a submit request into pipeline requests, checking it.
func (s *Server) requests(sr *SubmitRequest, prefix string) ([]pipeline.Request, string, *Error) {
	if e := sr.validate(prefix, s.Cfg.Server.MaxSamples); e != nil {
		return nil, "", e
	}
	h, e := readTask(sr.Task, prefix+"task")
	if e != nil {
		return nil, "", e
	}
	plug, e := s.resolveDomain(h, prefix+"task")
	if e != nil {
		return nil, "", e
	}
	if e := s.checkHarness(sr.Harness, prefix+"harness"); e != nil {
		return nil, "", e
	}
	reqs, gid := groupRequests(sr, plug.Name, retryPolicy(s.Cfg.Pipeline.Retry, sr))
	return reqs, gid, nil
}

// retryPolicy is a submission's retry policy: the deployment's
// [pipeline.retry] with what the request overrides; nil for none.
func retryPolicy(c config.Retry, sr *SubmitRequest) *pipeline.Retry {
	on := c.Infra
	if sr.RetryInfra != nil {
		on = *sr.RetryInfra
	}
	if !on {
		return nil
	}
	rp := &pipeline.Retry{Budget: maps.Clone(c.Budget), Deadline: c.Deadline.Duration}
	if rp.Budget == nil {
		rp.Budget = map[string]int{}
	}
	maps.Copy(rp.Budget, sr.RetryBudget)
	if sr.RetryDeadline != nil {
		rp.Deadline = time.Duration(*sr.RetryDeadline)
	}
	return rp
}

// groupRequests builds a checked submission's group of rollouts.
func groupRequests(sr *SubmitRequest, domain string, retry *pipeline.Retry) ([]pipeline.Request, string) {
	n := 1
	if sr.N != nil {
		n = *sr.N
	}
	gid := sr.GroupID
	if gid == "" {
		gid = pipeline.NewID("g-")
	}
	reqs := make([]pipeline.Request, n)
	for i := range reqs {
		rq := pipeline.Request{GroupID: gid, GroupSize: n, Index: i, Domain: domain, Task: sr.Task, Sampling: sr.Sampling, Metadata: sr.Metadata,
			Retry: retry, DropIncomplete: sr.IncompleteGroup == "drop", MaxStaleness: sr.MaxStaleness, StaleMode: sr.StaleMode}
		if sr.MaxTurns != nil {
			rq.MaxTurns = *sr.MaxTurns
		}
		if sr.Timeout != nil {
			rq.Timeout = time.Duration(*sr.Timeout)
		}
		if sr.ExpectedTokens != nil {
			rq.ExpectedTokens = *sr.ExpectedTokens
		}
		if sr.Priority != nil {
			rq.Priority = *sr.Priority
		}
		if sr.EarlyStopMinUsable != nil {
			rq.EarlyStopMin = *sr.EarlyStopMinUsable
		}
		if hr := sr.Harness; hr != nil {
			rq.Agent, rq.SessionKey = pipeline.AgentGateway, newKey()
			rq.Harness, rq.Instruction, rq.Workdir, rq.HarnessImage = hr.Name, hr.Instruction, hr.Workdir, hr.Image
		}
		// Each sample of a seeded group gets its own seed, so a group is not n copies.
		if sr.Sampling.Seed != nil {
			seed := *sr.Sampling.Seed + int64(i)
			rq.Sampling.Seed = &seed
		}
		reqs[i] = rq
	}
	return reqs, gid
}

// perRolloutBytes is what a rollout costs the host besides its task,
// metadata and instruction (its records, ids, sampling), as counted
// against server.max_submission_bytes.
const perRolloutBytes = 1 << 10

// footprint is what reqs make the host hold and write, as
// server.max_submission_bytes counts it: a task shared by a group is
// stored once but rendered into each sample's prompt and result.
func footprint(reqs []pipeline.Request) int64 {
	var n int64
	for i := range reqs {
		n += int64(len(reqs[i].Task)+len(reqs[i].Metadata)+len(reqs[i].Instruction)) + perRolloutBytes
	}
	return n
}

// enqueue submits reqs, and key with them if it is not nil. field names
// what to shrink when the submission is over server.max_submission_bytes.
func (s *Server) Enqueue(reqs []pipeline.Request, key *store.Keyed, field string) ([]*pipeline.Rollout, *Error) {
	if fp, limit := footprint(reqs), s.Cfg.Server.MaxSubmissionBytes; fp > limit {
		return nil, Errf(http.StatusRequestEntityTooLarge, "submission_too_large", field,
			"%d rollouts of these tasks would make the host hold and write %d bytes (each rollout's task, metadata and instruction, plus %d); server.max_submission_bytes is %d: submit fewer samples or smaller tasks",
			len(reqs), fp, perRolloutBytes, limit)
	}
	if s.closing.Load() {
		return nil, Errf(http.StatusServiceUnavailable, "shutting_down", "", "the host is shutting down")
	}
	if s.Admission != nil {
		if err := s.Admission(); err != nil {
			return nil, Errf(http.StatusServiceUnavailable, "no_capacity", "", "%v", err)
		}
	}
	rs, err := s.Pipeline.Submit(reqs, key)
	switch {
	case errors.Is(err, store.ErrKeyExists):
		return nil, Errf(http.StatusConflict, "idempotency_conflict", "idempotency_key", "%v; nothing was submitted", err)
	case errors.Is(err, pipeline.ErrQueueFull):
		return nil, Errf(http.StatusTooManyRequests, "queue_full", "", "%v; retry later", err)
	case errors.Is(err, pipeline.ErrShuttingDown):
		return nil, Errf(http.StatusServiceUnavailable, "shutting_down", "", "%v", err)
	case errors.Is(err, pipeline.ErrStore):
		return nil, Errf(http.StatusServiceUnavailable, "store_unavailable", "", "%v; nothing was submitted", err)
	case err != nil:
		return nil, Errf(http.StatusInternalServerError, "internal", "", "%v", err)
	}
	return rs, nil
}

func ids(rs []*pipeline.Rollout) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	var sr SubmitRequest
	if e := Decode(w, r, s.Cfg.Server.MaxBodyBytes, &sr); e != nil {
		WriteError(w, e)
		return
	}
	var bodySum string
	if sr.IdempotencyKey != "" {
		// The request as decoded (so spacing and key order do not matter).
		b, _ := json.Marshal(sr)
		sum := sha256.Sum256(b)
		bodySum = hex.EncodeToString(sum[:])
		// Serialised so two concurrent retries cannot both submit.
		s.idemMu.Lock()
		defer s.idemMu.Unlock()
		if prev, ok := s.Store.Idempotent(sr.IdempotencyKey); ok {
			if prev.BodySHA256 != "" && prev.BodySHA256 != bodySum {
				WriteError(w, Errf(http.StatusConflict, "idempotency_conflict", "idempotency_key", "this idempotency_key was used with a different request (group %s); use a new key for a new request", prev.GroupID))
				return
			}
			WriteJSON(w, http.StatusOK, SubmitResponse{GroupID: prev.GroupID, RolloutIDs: prev.RolloutIDs})
			return
		}
	}
	reqs, gid, e := s.requests(&sr, "")
	if e != nil {
		WriteError(w, e)
		return
	}
	var key *store.Keyed
	if sr.IdempotencyKey != "" {
		// Recorded with the rollouts: a host stopped right after cannot
		// leave them without their key, and a retry then find none.
		key = &store.Keyed{Key: sr.IdempotencyKey, Sub: store.Submission{GroupID: gid, BodySHA256: bodySum}}
	}
	rs, e := s.Enqueue(reqs, key, "n")
	if e != nil {
		WriteError(w, e)
		return
	}
	resp := SubmitResponse{GroupID: gid, RolloutIDs: ids(rs)}
	WriteJSON(w, http.StatusAccepted, resp)
}

func (s *Server) submitBatch(w http.ResponseWriter, r *http.Request) {
	var br BatchRequest
	if e := Decode(w, r, s.Cfg.Server.MaxBodyBytes, &br); e != nil {
		WriteError(w, e)
		return
	}
	if len(br.Requests) == 0 || len(br.Requests) > s.Cfg.Server.MaxBatch {
		WriteError(w, Invalid("requests", "must hold between 1 and %d requests, got %d", s.Cfg.Server.MaxBatch, len(br.Requests)))
		return
	}
	dynamic := ""
	if k := br.InformativeGroups; k != nil {
		if *k < 1 || *k > len(br.Requests) {
			WriteError(w, Invalid("informative_groups", "between 1 and the number of requests (%d), got %d", len(br.Requests), *k))
			return
		}
		dynamic = pipeline.NewID("d-")
	}
	// Each group's requests, joined once their total is known: appending
	// them one group at a time copied the batch's requests over and over.
	parts := make([][]pipeline.Request, 0, len(br.Requests))
	total := 0
	var groups []SubmitResponse
	for i := range br.Requests {
		if br.Requests[i].IdempotencyKey != "" {
			WriteError(w, Invalid(fmt.Sprintf("requests[%d].idempotency_key", i), "not supported inside a batch; submit singly"))
			return
		}
		reqs, gid, e := s.requests(&br.Requests[i], fmt.Sprintf("requests[%d].", i))
		if e != nil {
			WriteError(w, e)
			return
		}
		if dynamic != "" {
			if len(reqs) < 2 {
				WriteError(w, Invalid(fmt.Sprintf("requests[%d].n", i), "dynamic sampling (informative_groups) needs groups of at least 2: one sample has no reward variance"))
				return
			}
			for j := range reqs {
				reqs[j].Dynamic, reqs[j].DynamicK = dynamic, *br.InformativeGroups
			}
		}
		parts = append(parts, reqs)
		total += len(reqs)
		groups = append(groups, SubmitResponse{GroupID: gid, RolloutIDs: make([]string, len(reqs))})
	}
	all := make([]pipeline.Request, 0, total)
	for _, reqs := range parts {
		all = append(all, reqs...)
	}
	rs, e := s.Enqueue(all, nil, "requests")
	if e != nil {
		WriteError(w, e)
		return
	}
	k := 0
	for gi := range groups {
		for j := range groups[gi].RolloutIDs {
			groups[gi].RolloutIDs[j] = rs[k].ID
			k++
		}
	}
	out := map[string]any{"groups": groups}
	if dynamic != "" {
		out["dynamic_id"] = dynamic
	}
	WriteJSON(w, http.StatusAccepted, out)
}

func parseWait(q url.Values, max time.Duration) (time.Duration, *Error) {
	v := q.Get("wait")
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		secs, err2 := strconv.ParseFloat(v, 64)
		if err2 != nil {
			return 0, Errf(http.StatusBadRequest, "invalid_field", "wait", "bad duration %q", v)
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d < 0 {
		return 0, Errf(http.StatusBadRequest, "invalid_field", "wait", "must not be negative")
	}
	return min(d, max), nil
}

func (s *Server) getRollout(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	wait, e := parseWait(r.URL.Query(), s.Cfg.Server.MaxWait.Duration)
	if e != nil {
		WriteError(w, e)
		return
	}
	if res, ok := s.Store.Get(id); ok {
		writeResult(w, res)
		return
	}
	ro, ok := s.Pipeline.Lookup(id)
	if !ok {
		// It may have finished between the two look-ups.
		if res, ok := s.Store.Get(id); ok {
			writeResult(w, res)
			return
		}
		WriteError(w, Errf(http.StatusNotFound, "not_found", "id", "no rollout %q (unknown, or acknowledged)", id))
		return
	}
	if wait > 0 {
		ctx, cancel := s.waitCtx(r)
		res := s.awaitResult(ctx, ro, wait)
		cancel()
		if res != nil {
			writeResult(w, res)
			return
		}
		if r.Context().Err() != nil {
			return
		}
	}
	WriteJSON(w, http.StatusOK, s.Pipeline.Snapshot(ro))
}

// awaitResult waits up to wait (or until ctx ends) for a live rollout's
// stored result; nil if it has none by then.
func (s *Server) awaitResult(ctx context.Context, ro *pipeline.Rollout, wait time.Duration) *trajectory.Result {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ro.Done():
		if res, ok := s.Store.Get(ro.ID); ok {
			return res
		}
	case <-t.C:
	case <-ctx.Done():
	}
	return nil
}

func (s *Server) listRollouts(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	status, stage := q.Get("status"), q.Get("stage")
	if status != "" && status != "queued" && status != "running" {
		WriteError(w, Errf(http.StatusBadRequest, "invalid_field", "status", "must be queued or running"))
		return
	}
	var older time.Duration
	if v := q.Get("older_than"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			WriteError(w, Errf(http.StatusBadRequest, "invalid_field", "older_than", "bad duration %q", v))
			return
		}
		older = d
	}
	out := []pipeline.Summary{}
	for _, sm := range s.Pipeline.Active() {
		if status != "" && sm.Status != status || stage != "" && sm.Stage != stage || older > 0 && sm.AgeSeconds < older.Seconds() {
			continue
		}
		out = append(out, sm)
	}
	WriteJSON(w, http.StatusOK, map[string]any{"rollouts": out})
}

func (s *Server) filter(w http.ResponseWriter, q url.Values) (store.Filter, bool) {
	f := store.Filter{GroupID: q.Get("group_id"), Limit: 1000}
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			WriteError(w, Errf(http.StatusBadRequest, "invalid_field", "since", "must be a sequence number"))
			return f, false
		}
		f.Since = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			WriteError(w, Errf(http.StatusBadRequest, "invalid_field", "limit", "must be between 1 and 10000"))
			return f, false
		}
		f.Limit = n
	}
	return f, true
}

func (s *Server) results(w http.ResponseWriter, r *http.Request) {
	f, ok := s.filter(w, r.URL.Query())
	if !ok {
		return
	}
	wait, e := parseWait(r.URL.Query(), s.Cfg.Server.MaxWait.Duration)
	if e != nil {
		WriteError(w, e)
		return
	}
	var rs []*trajectory.Result
	var next uint64
	if wait > 0 {
		wctx, wcancel := s.waitCtx(r)
		ctx, cancel := context.WithTimeout(wctx, wait)
		rs, next = store.Wait(ctx, s.Store, f)
		cancel()
		wcancel()
	} else {
		rs, next = s.Store.Finished(f)
	}
	writeResults(w, rs, next, s.Cfg.Server.MaxPageBytes)
}

func writeResult(w http.ResponseWriter, r *trajectory.Result) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(encoded(r), '\n'))
}

// encoded is a result's JSON, reusing what the store already encoded.
func encoded(r *trajectory.Result) []byte {
	if len(r.Encoded) > 0 {
		return r.Encoded
	}
	b, err := trajectory.MarshalResult(r)
	if err != nil {
		return []byte("null")
	}
	return b
}

// writeResults streams a page result by result: a page can hold thousands of
// trajectories, and one buffer for all of them costs more than encoding them.
// The page ends where its results' JSON would pass maxBytes (one result
// at least): results take about 21 bytes a token, so a thousand
// trajectories of 32k tokens are 0.7 GB for a client to hold and parse
// at once. next_since is then
// the last result sent, and the rest come with the next page.
func writeResults(w http.ResponseWriter, rs []*trajectory.Result, next uint64, maxBytes int64) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.WriteString(`{"results":[`)
	var n int64
	for i, r := range rs {
		b := encoded(r)
		if n += int64(len(b)); n > maxBytes && i > 0 {
			next = rs[i-1].Seq
			break
		}
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.Write(b)
	}
	fmt.Fprintf(bw, "],\"next_since\":%d}\n", next)
	_ = bw.Flush()
}

// resultsStream writes finished results as NDJSON (or SSE when asked) until
// the client goes away.
func (s *Server) resultsStream(w http.ResponseWriter, r *http.Request) {
	f, ok := s.filter(w, r.URL.Query())
	if !ok {
		return
	}
	// An SSE client that lost its connection reconnects to the same URL
	// with the last event's id (the result's seq): it resumes after it
	// instead of receiving again what it had.
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			WriteError(w, Errf(http.StatusBadRequest, "invalid_field", "Last-Event-ID", "must be a result's sequence number (an event's id), got %q", v))
			return
		}
		f.Since = max(f.Since, n)
	}
	sse := strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	if sse {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/x-ndjson")
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if sse {
		// Reconnect a second after a lost connection (a restarting host),
		// not the client's default of several.
		fmt.Fprint(w, "retry: 1000\n\n")
	}
	fl, _ := w.(http.Flusher)
	if fl != nil {
		fl.Flush()
	}
	ctx, cancel := s.waitCtx(r)
	defer cancel()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		ch := s.Store.Changed()
		rs, next := s.Store.Finished(f)
		for _, res := range rs {
			b := encoded(res)
			if sse {
				fmt.Fprintf(w, "id: %d\nevent: result\ndata: %s\n\n", res.Seq, b)
			} else {
				_, _ = w.Write(append(b, '\n'))
			}
		}
		f.Since = next
		if fl != nil && len(rs) > 0 {
			fl.Flush()
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-keep.C:
			if sse {
				fmt.Fprint(w, ": keepalive\n\n")
				if fl != nil {
					fl.Flush()
				}
			}
		}
	}
}

func (s *Server) ack(w http.ResponseWriter, r *http.Request) {
	var req AckRequest
	if e := Decode(w, r, s.Cfg.Server.MaxBodyBytes, &req); e != nil {
		WriteError(w, e)
		return
	}
	if len(req.IDs) == 0 || len(req.IDs) > 100000 {
		WriteError(w, Invalid("ids", "give between 1 and 100000 rollout ids"))
		return
	}
	n, err := s.Store.Ack(req.IDs)
	if err != nil {
		WriteError(w, Errf(http.StatusServiceUnavailable, "store_unavailable", "", "%v; nothing was acknowledged, retry later", err))
		return
	}
	WriteJSON(w, http.StatusOK, map[string]int{"acked": n})
}

func (s *Server) cancelRollout(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	if s.Pipeline.Cancel(id, "cancelled by request") {
		WriteJSON(w, http.StatusOK, map[string]any{"cancelled": 1})
		return
	}
	if res, ok := s.Store.Get(id); ok {
		WriteError(w, Errf(http.StatusConflict, "already_finished", "id", "rollout %s already ended with status %s", id, res.Status))
		return
	}
	WriteError(w, Errf(http.StatusNotFound, "not_found", "id", "no rollout %q", id))
}

func (s *Server) cancelMany(w http.ResponseWriter, r *http.Request) {
	var req CancelManyRequest
	if e := Decode(w, r, s.Cfg.Server.MaxBodyBytes, &req); e != nil {
		WriteError(w, e)
		return
	}
	set := 0
	if req.GroupID != "" {
		set++
	}
	if req.DynamicID != "" {
		set++
	}
	if req.BeforePolicyVersion != nil {
		set++
	}
	if req.All {
		set++
	}
	if set != 1 {
		WriteError(w, Invalid("", "give exactly one of group_id, dynamic_id, before_policy_version, all"))
		return
	}
	// Only a group or a batch is the caller's own; a policy version or
	// "all" reaches every caller's rollouts.
	if req.GroupID == "" && req.DynamicID == "" {
		if _, isAdmin := s.caller(r); !s.authOpen() && !isAdmin {
			field := "all"
			if req.BeforePolicyVersion != nil {
				field = "before_policy_version"
			}
			WriteError(w, Errf(http.StatusForbidden, "forbidden", field, "cancelling by %s reaches every caller's rollouts and needs the admin token", field))
			return
		}
	}
	var n int
	switch {
	case req.GroupID != "":
		n = s.Pipeline.CancelWhere(func(ro *pipeline.Rollout) bool { return ro.Req.GroupID == req.GroupID }, "group cancelled")
	case req.DynamicID != "":
		n = s.Pipeline.CancelWhere(func(ro *pipeline.Rollout) bool { return ro.Req.Dynamic == req.DynamicID }, "batch cancelled")
	case req.BeforePolicyVersion != nil:
		v := *req.BeforePolicyVersion
		n = s.Pipeline.CancelWhere(func(ro *pipeline.Rollout) bool { return ro.PolicyAt() < v }, fmt.Sprintf("stale: started before policy version %d", v))
	default:
		n = s.Pipeline.CancelWhere(func(*pipeline.Rollout) bool { return true }, "all cancelled")
	}
	WriteJSON(w, http.StatusOK, map[string]int{"cancelled": n})
}

// BackendRequest is POST /v1/backends.
type BackendRequest struct {
	URL            string `json:"url"`
	Protocol       string `json:"protocol"`
	Model          string `json:"model"`
	MaxConcurrency int    `json:"max_concurrency"`
	// Slots is the server's batch size (vLLM's --max-num-seqs): requests
	// beyond it wait in the host for a free slot on any backend. 0: no limit.
	Slots int `json:"slots"`
	// CacheTokens is the server's KV cache in tokens: rollouts start on it
	// only while their contexts fit. 0: no limit.
	CacheTokens int `json:"cache_tokens"`
	// Weight is the backend's capacity relative to the others (default 1).
	Weight float64 `json:"weight"`
}

func (s *Server) addBackendReq(ctx context.Context, req BackendRequest, field string) (backend.Status, int, *Error) {
	srv, err := baseurl.Parse(req.URL)
	if err != nil {
		return backend.Status{}, 0, Invalid(field+"url", "%v", err)
	}
	base := srv.Base
	if req.Protocol == "" {
		req.Protocol = "vllm"
	}
	known := false
	for _, p := range config.Protocols {
		known = known || p == req.Protocol
	}
	if !known {
		return backend.Status{}, 0, Invalid(field+"protocol", "unknown protocol %q (known: %s)", req.Protocol, strings.Join(config.Protocols, ", "))
	}
	if config.NeedsLocalTokenizer(req.Protocol) && s.Cfg.Tokenizer.ModelDir == "" {
		return backend.Status{}, 0, Invalid(field+"protocol", "%s has no chat tokenizer: the host needs tokenizer.model_dir", req.Protocol)
	}
	if req.MaxConcurrency < 0 {
		return backend.Status{}, 0, Invalid(field+"max_concurrency", "must not be negative")
	}
	if req.Weight < 0 {
		return backend.Status{}, 0, Invalid(field+"weight", "must not be negative")
	}
	if req.Slots < 0 {
		return backend.Status{}, 0, Invalid(field+"slots", "must not be negative")
	}
	if req.CacheTokens < 0 {
		return backend.Status{}, 0, Invalid(field+"cache_tokens", "must not be negative")
	}
	if s.Cluster != nil {
		return s.addNodeBackend(ctx, req, field)
	}
	if req.Model == "" {
		req.Model = engine.Discover(ctx, base)
	}
	c, err := engine.NewClient(req.Protocol, base, req.Model)
	if err != nil {
		return backend.Status{}, 0, Invalid(field+"protocol", "%v", err)
	}
	b, err := s.Pool.Add(&backend.Backend{URL: srv.Display, Protocol: req.Protocol, Model: req.Model, MaxConcurrency: req.MaxConcurrency, Slots: req.Slots, CacheTokens: req.CacheTokens, Weight: req.Weight, Client: c})
	for _, st := range s.Pool.List() {
		if st.ID == b.ID {
			if errors.Is(err, backend.ErrDuplicate) {
				return st, http.StatusOK, nil
			}
			s.Log.Info("backend added", "backend", b.ID, "url", srv.Display, "protocol", req.Protocol, "model", req.Model)
			return st, http.StatusCreated, nil
		}
	}
	return backend.Status{}, 0, Errf(http.StatusInternalServerError, "internal", "", "backend vanished")
}

func (s *Server) addBackend(w http.ResponseWriter, r *http.Request) {
	var req BackendRequest
	if e := Decode(w, r, 1<<20, &req); e != nil {
		WriteError(w, e)
		return
	}
	st, code, e := s.addBackendReq(r.Context(), req, "")
	if e != nil {
		WriteError(w, e)
		return
	}
	WriteJSON(w, code, st)
}

func (s *Server) listBackends(w http.ResponseWriter, _ *http.Request) {
	WriteJSON(w, http.StatusOK, map[string]any{"backends": s.Pool.List()})
}

func (s *Server) removeBackend(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	if !s.Pool.Remove(id) {
		WriteError(w, Errf(http.StatusNotFound, "not_found", "id", "no backend %q", id))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) setPolicy(w http.ResponseWriter, r *http.Request) {
	var req PolicyRequest
	if e := Decode(w, r, 1<<16, &req); e != nil {
		WriteError(w, e)
		return
	}
	if e := s.checkVersion(req.Version, true); e != nil {
		WriteError(w, e)
		return
	}
	s.Pipeline.SetPolicy(*req.Version)
	if s.Cluster != nil {
		WriteJSON(w, http.StatusOK, map[string]any{"version": *req.Version, "nodes": s.Cluster.Broadcast(r.Context(), http.MethodPut, "/v1/policy", req)})
		return
	}
	WriteJSON(w, http.StatusOK, map[string]int64{"version": *req.Version})
}

// checkVersion validates a new policy version against the current one.
func (s *Server) checkVersion(v *int64, required bool) *Error {
	if v == nil {
		if required {
			return Invalid("version", "required, an integer from 0 to %d", int64(maxPolicyVersion))
		}
		return nil
	}
	if *v < 0 || *v > maxPolicyVersion {
		return Invalid("version", "an integer from 0 to %d", int64(maxPolicyVersion))
	}
	cur := s.Pipeline.Policy()
	if *v < cur {
		return Errf(http.StatusConflict, "policy_regression", "version", "version %d is older than the current %d", *v, cur)
	}
	// A training run steps its policy by one at a time (or a few): a jump
	// this large is a mistake that would make every real version after it
	// a regression.
	if *v-cur > maxPolicyJump {
		return Invalid("version", "version %d jumps more than %d past the current %d", *v, int64(maxPolicyJump), cur)
	}
	return nil
}

// pausePolicy stops generation for a weight update: drain waits for the
// requests in flight, abort ends them keeping their tokens (see
// Pipeline.Pause). It answers once no generation is in flight; past
// timeout_s it answers 504 and generation stays paused.
func (s *Server) pausePolicy(w http.ResponseWriter, r *http.Request) {
	var req PauseRequest
	if e := Decode(w, r, 1<<16, &req); e != nil {
		WriteError(w, e)
		return
	}
	if req.Mode != "drain" && req.Mode != "abort" {
		WriteError(w, Invalid("mode", "required: drain (wait for generation in flight) or abort (end it, keeping its tokens)"))
		return
	}
	timeout := 300 * time.Second
	if req.TimeoutS != nil {
		if *req.TimeoutS <= 0 || *req.TimeoutS > 3600 {
			WriteError(w, Invalid("timeout_s", "seconds, more than 0 and at most 3600"))
			return
		}
		timeout = time.Duration(*req.TimeoutS * float64(time.Second))
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	if s.Cluster != nil {
		// The nodes generate: each pauses its own backends.
		nodes := s.Cluster.Broadcast(ctx, http.MethodPost, "/v1/policy:pause", req)
		_, _ = s.Pipeline.Pause(ctx, false)
		WriteJSON(w, clusterStatus(nodes), map[string]any{"nodes": nodes})
		return
	}
	rep, err := s.Pipeline.Pause(ctx, req.Mode == "abort")
	if err != nil {
		if r.Context().Err() != nil {
			return // the caller left; generation stays paused
		}
		WriteJSON(w, http.StatusGatewayTimeout, map[string]any{"error": map[string]any{"code": "timeout", "field": "timeout_s",
			"message": fmt.Sprintf("%d generation requests still in flight after %v; generation stays paused: pause again (mode abort ends them) or resume", rep.Left, timeout)},
			"pause": rep})
		return
	}
	WriteJSON(w, http.StatusOK, rep)
}

// resumePolicy lets generation continue under a new policy version
// (validated as PUT /v1/policy; absent: the current one).
func (s *Server) resumePolicy(w http.ResponseWriter, r *http.Request) {
	var req PolicyRequest
	if e := Decode(w, r, 1<<16, &req); e != nil {
		WriteError(w, e)
		return
	}
	if e := s.checkVersion(req.Version, false); e != nil {
		WriteError(w, e)
		return
	}
	v := s.Pipeline.Policy()
	if req.Version != nil {
		v = *req.Version
	}
	rep := s.Pipeline.Resume(r.Context(), v)
	if s.Cluster != nil {
		nodes := s.Cluster.Broadcast(r.Context(), http.MethodPost, "/v1/policy:resume", map[string]int64{"version": v})
		WriteJSON(w, clusterStatus(nodes), map[string]any{"version": v, "nodes": nodes})
		return
	}
	WriteJSON(w, http.StatusOK, rep)
}

// clusterStatus is 200 when every node took a broadcast request, else 502
// (the body says which did not).
func clusterStatus(nodes map[string]coord.NodeReply) int {
	for _, n := range nodes {
		if n.Status != http.StatusOK {
			return http.StatusBadGateway
		}
	}
	return http.StatusOK
}

// Policy versions are integers JSON carries exactly (2^53-1), stepped by
// at most a million at a time.
const (
	maxPolicyVersion = 1<<53 - 1
	maxPolicyJump    = 1_000_000
)

func (s *Server) getPolicy(w http.ResponseWriter, _ *http.Request) {
	WriteJSON(w, http.StatusOK, s.Pipeline.PolicyState())
}

func (s *Server) domains(w http.ResponseWriter, _ *http.Request) {
	WriteJSON(w, http.StatusOK, map[string]any{"domains": s.Plugins.Statuses()})
}

func (s *Server) evaluate(w http.ResponseWriter, r *http.Request) {
	var req EvaluateRequest
	if e := Decode(w, r, s.Cfg.Server.MaxBodyBytes, &req); e != nil {
		WriteError(w, e)
		return
	}
	h, e := readTask(req.Task, "task")
	if e != nil {
		WriteError(w, e)
		return
	}
	if req.Response == nil {
		WriteError(w, Invalid("response", "required: the final response to score"))
		return
	}
	var plug *pluginhost.Plugin
	if req.Domain != "" {
		p, ok := s.Plugins.Get(req.Domain)
		if !ok {
			WriteError(w, Invalid("domain", "unknown domain %q; enabled domains: %s", req.Domain, strings.Join(s.Plugins.Names(), ", ")))
			return
		}
		plug = p
	} else {
		p, e := s.resolveDomain(h, "task")
		if e != nil {
			WriteError(w, e)
			return
		}
		plug = p
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.Cfg.Server.EvaluateTimeout.Duration)
	defer cancel()
	res, err := s.Pipeline.Evaluate(ctx, plug.Name, req.Task, *req.Response)
	// Past the deadline whatever came back is the deadline's doing (the
	// domain may report its cut-off sandbox call as its own failure).
	if ctx.Err() == context.DeadlineExceeded {
		WriteError(w, Errf(http.StatusGatewayTimeout, "timeout", "", "the %s domain did not score within server.evaluate_timeout (%v)", plug.Name, s.Cfg.Server.EvaluateTimeout.Duration))
		return
	}
	if errors.Is(err, pipeline.ErrEvalBusy) {
		w.Header().Set("Retry-After", "1")
		WriteError(w, Errf(http.StatusTooManyRequests, "busy", "", "%v; retry later", err))
		return
	}
	if err != nil {
		WriteError(w, Errf(http.StatusBadGateway, "plugin_error", "", "%v", err))
		return
	}
	if len(res.Diagnostics) > 0 {
		d := res.Diagnostics[0]
		code := http.StatusUnprocessableEntity
		// An internal fault of the domain (a panic, nothing returned) is
		// no field's doing: it names none.
		fieldName := "task"
		switch d.Code {
		case "internal":
			code, fieldName = http.StatusInternalServerError, ""
		case "eval_failed":
			// The domain's evaluation produced nothing to grade.
			code, fieldName = http.StatusBadGateway, ""
		}
		if d.Field != "" {
			fieldName = "task." + d.Field
		}
		WriteError(w, Errf(code, d.Code, fieldName, "%s", d.Message))
		return
	}
	info := json.RawMessage(res.Info)
	if len(info) == 0 {
		info = json.RawMessage("{}")
	}
	WriteJSON(w, http.StatusOK, map[string]any{"domain": plug.Name, "reward": res.Reward, "resolved": res.Resolved, "metrics": res.Metrics, "info": info})
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	problems := []string{} // [] when ready, not null: a list to whoever parses it
	if s.closing.Load() {
		problems = append(problems, "shutting down")
	}
	if err := s.Store.Healthy(); err != nil {
		problems = append(problems, err.Error())
	}
	for _, p := range s.Plugins.Statuses() {
		if !p.Healthy {
			problems = append(problems, fmt.Sprintf("domain %s is %s", p.Name, p.State))
		}
	}
	healthy := 0
	for _, b := range s.Pool.List() {
		if b.Healthy {
			healthy++
		}
	}
	body := map[string]any{"ready": len(problems) == 0, "problems": problems, "backends_healthy": healthy}
	if len(problems) > 0 {
		WriteJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	WriteJSON(w, http.StatusOK, body)
}
