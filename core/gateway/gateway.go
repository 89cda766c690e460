// Package gateway lets an unmodified agent harness drive a rollout: it
// serves OpenAI Chat Completions, OpenAI Responses and Anthropic Messages
// bound to a session (package session keeps its exact tokens), in each
// provider's request, response, streaming and error shapes.
package gateway

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/mux"
	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/core/gateway/session"
	"github.com/prorl/prorl/core/reqbody"
)

// Gateway routes provider requests to their sessions. A session is named
// by its URL (/gateway/{session}/v1/...) or, on /gateway/v1/..., by its key
// alone; either way the request must carry the session's key, as the SDKs
// send it (Authorization: Bearer, or Anthropic's x-api-key).
type Gateway struct {
	log     hclog.Logger
	maxBody int64
	// readyWait bounds how long a call waits for a session still in init.
	readyWait time.Duration

	mu    sync.Mutex
	byID  map[string]*entry
	byKey map[string]*entry
}

type entry struct {
	id, key string
	ready   chan struct{}
	s       *session.Session
}

// New returns an empty gateway.
func New(log hclog.Logger, maxBody int64) *Gateway {
	if maxBody <= 0 {
		maxBody = 32 << 20
	}
	return &Gateway{log: log, maxBody: maxBody, readyWait: 2 * time.Minute, byID: map[string]*entry{}, byKey: map[string]*entry{}}
}

// Expect announces a session that will be attached once its rollout
// reaches the run stage; calls that arrive before wait for it.
func (g *Gateway) Expect(id, key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.byID[id]; ok {
		return
	}
	e := &entry{id: id, key: key, ready: make(chan struct{})}
	g.byID[id], g.byKey[key] = e, e
}

// Attach makes a session live.
func (g *Gateway) Attach(s *session.Session) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.byID[s.ID()]
	if !ok {
		e = &entry{id: s.ID(), key: s.Key(), ready: make(chan struct{})}
		g.byID[e.id], g.byKey[e.key] = e, e
	}
	if e.s == nil {
		e.s = s
		close(e.ready)
	}
}

// Remove forgets a session: its calls are 404 from now on.
func (g *Gateway) Remove(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e, ok := g.byID[id]; ok {
		delete(g.byID, id)
		delete(g.byKey, e.key)
	}
}

// Route is one of the gateway's endpoints, under each of Prefixes.
type Route struct {
	Path, Method, Name, Summary string
	p                           provider
	kind                        session.Kind
	h                           func(*Gateway, http.ResponseWriter, *http.Request, *session.Session, provider) *apiError
}

// API is the provider whose shapes the route speaks: openai, anthropic,
// or either (the anthropic-version header decides).
func (rt Route) API() string {
	switch rt.p {
	case openAI:
		return "openai"
	case anthropic:
		return "anthropic"
	}
	return "either"
}

// Prefixes are the roots of the gateway's routes: a session's own (its key
// in the path, for harnesses that cannot send headers) and the shared one
// (the key in the Authorization or x-api-key header).
var Prefixes = []string{"/gateway/{session:r-[0-9a-f]+}/v1", "/gateway/v1"}

// Routes lists the gateway's endpoints.
var Routes = []Route{
	{"/chat/completions", http.MethodPost, "gateway_chat_completions", "OpenAI Chat Completions", openAI, session.Generate, (*Gateway).chatCompletions},
	{"/responses", http.MethodPost, "gateway_responses", "OpenAI Responses", openAI, session.Generate, (*Gateway).responses},
	{"/responses/input_tokens", http.MethodPost, "gateway_responses_input_tokens", "OpenAI Responses: count input tokens", openAI, session.Count, (*Gateway).responsesInputTokens},
	{"/messages", http.MethodPost, "gateway_messages", "Anthropic Messages", anthropic, session.Generate, (*Gateway).messages},
	{"/messages/count_tokens", http.MethodPost, "gateway_count_tokens", "Anthropic Messages: count tokens", anthropic, session.Count, (*Gateway).countTokens},
	{"/models", http.MethodGet, "gateway_models", "The session's model (OpenAI or Anthropic list shape)", byHeader, session.Meta, (*Gateway).models},
	{"/models/{model}", http.MethodGet, "gateway_model", "One model (OpenAI or Anthropic shape)", byHeader, session.Meta, (*Gateway).model},
}

// Register adds the gateway's routes under /gateway; wrap (may be nil)
// instruments each with its route name.
func (g *Gateway) Register(r *mux.Router, wrap func(name string, h http.HandlerFunc) http.Handler) {
	if wrap == nil {
		wrap = func(_ string, h http.HandlerFunc) http.Handler { return h }
	}
	for _, prefix := range Prefixes {
		for _, rt := range Routes {
			h := func(w http.ResponseWriter, r *http.Request, s *session.Session, p provider) *apiError {
				return rt.h(g, w, r, s, p)
			}
			r.Handle(prefix+rt.Path, wrap(rt.Name, g.handle(rt.p, rt.kind, h))).Methods(rt.Method)
		}
	}
	r.PathPrefix("/gateway/").Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeErr(w, providerOf(byHeader, r), &apiError{status: http.StatusNotFound, kind: kindNotFound,
			msg: fmt.Sprintf("the gateway serves no %s %s", r.Method, r.URL.Path)})
	}))
}

type provider int

const (
	openAI provider = iota
	anthropic
	byHeader // /v1/models: Anthropic's shape when the client sends anthropic-version
)

func providerOf(p provider, r *http.Request) provider {
	if p != byHeader {
		return p
	}
	if r.Header.Get("anthropic-version") != "" {
		return anthropic
	}
	return openAI
}

// handler serves one provider call for a session.
type handler func(w http.ResponseWriter, r *http.Request, s *session.Session, p provider) *apiError

func (g *Gateway) handle(p provider, kind session.Kind, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p := providerOf(p, r)
		s, aerr := g.session(r)
		if aerr == nil {
			var release func()
			if release, aerr = admit(s, kind); aerr == nil {
				defer release()
				aerr = h(w, r, s, p)
			}
		}
		if aerr != nil {
			writeErr(w, p, aerr)
		}
	}
}

// admit takes a place for a call of s, or answers as the provider does
// when the session is over a bound (session.Session.Admit).
func admit(s *session.Session, kind session.Kind) (release func(), aerr *apiError) {
	release, no := s.Admit(kind)
	if no == nil {
		return release, nil
	}
	switch no.Reason {
	case session.RateLimited:
		return nil, &apiError{status: http.StatusTooManyRequests, kind: kindRateLimit, retryAfter: no.RetryAfter, msg: no.Msg}
	case session.OverQuota:
		return nil, &apiError{status: http.StatusTooManyRequests, kind: kindQuota, msg: no.Msg}
	}
	return nil, &apiError{status: http.StatusNotFound, kind: kindNotFound, msg: no.Msg}
}

// session finds the request's session by its URL or key and checks the key.
func (g *Gateway) session(r *http.Request) (*session.Session, *apiError) {
	key := r.Header.Get("x-api-key")
	if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		key = b
	}
	id := mux.Vars(r)["session"]
	g.mu.Lock()
	var e *entry
	if id != "" {
		e = g.byID[id]
	} else if key != "" {
		e = g.byKey[key]
	}
	g.mu.Unlock()
	if e == nil {
		if id == "" {
			return nil, &apiError{status: http.StatusNotFound, kind: kindNotFound, msg: "no open session has this API key"}
		}
		return nil, &apiError{status: http.StatusNotFound, kind: kindNotFound, msg: fmt.Sprintf("session %s is not open (unknown or finished)", id)}
	}
	if subtle.ConstantTimeCompare([]byte(key), []byte(e.key)) != 1 {
		return nil, &apiError{status: http.StatusUnauthorized, kind: kindAuth, msg: "the API key is not this session's"}
	}
	t := time.NewTimer(g.readyWait)
	defer t.Stop()
	select {
	case <-e.ready:
	case <-r.Context().Done():
		return nil, &apiError{status: http.StatusRequestTimeout, kind: kindInvalid, msg: "the request ended while its session was starting"}
	case <-t.C:
		return nil, &apiError{status: http.StatusServiceUnavailable, kind: kindOverloaded, msg: fmt.Sprintf("session %s did not start within %v", e.id, g.readyWait)}
	}
	return e.s, nil
}

// Error kinds, each written in the provider's vocabulary.
const (
	kindInvalid    = "invalid_request_error"
	kindAuth       = "authentication_error"
	kindNotFound   = "not_found_error"
	kindOverloaded = "overloaded_error"
	kindAPI        = "api_error"
	kindRateLimit  = "rate_limit_error"
	// kindQuota is a budget spent: OpenAI's 429 insufficient_quota and
	// Anthropic's 402 billing_error, which clients do not retry.
	kindQuota = "insufficient_quota"
)

type apiError struct {
	status int
	kind   string
	param  string
	msg    string
	// retryAfter, when positive, is sent as Retry-After (seconds).
	retryAfter int
}

func invalidf(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, kind: kindInvalid, param: param, msg: fmt.Sprintf(format, args...)}
}

// writeErr writes OpenAI's {"error":{message,type,param,code}} or
// Anthropic's {"type":"error","error":{type,message}}.
func writeErr(w http.ResponseWriter, p provider, e *apiError) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	if p == anthropic {
		msg := e.msg
		if e.param != "" {
			msg = e.param + ": " + msg
		}
		status, kind := e.status, e.kind
		if kind == kindQuota {
			status, kind = http.StatusPaymentRequired, "billing_error"
		}
		writeJSON(w, status, map[string]any{"type": "error", "error": map[string]string{"type": kind, "message": msg}})
		return
	}
	kind, code := e.kind, any(nil)
	switch e.kind {
	case kindAuth:
		kind, code = kindInvalid, "invalid_api_key"
	case kindNotFound:
		kind, code = kindInvalid, "not_found"
	case kindOverloaded:
		kind = "server_error"
	case kindAPI:
		kind = "server_error"
	case kindRateLimit:
		kind, code = "requests", "rate_limit_exceeded"
	case kindQuota:
		code = "insufficient_quota"
	}
	var param any
	if e.param != "" {
		param = e.param
	}
	writeJSON(w, e.status, map[string]any{"error": map[string]any{"message": e.msg, "type": kind, "param": param, "code": code}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"could not encode the response","type":"server_error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// bodyTimeout bounds reading one request body.
var bodyTimeout = 30 * time.Second

// decode reads a request body: size-limited, one JSON value. Unknown
// fields are ignored, not refused: SDKs and harnesses send fields past the
// documented API (cache hints, betas, client metadata), and a harness must
// run unmodified. Fields that would change what is generated and that the
// gateway cannot honour are refused by the handlers, by name.
func (g *Gateway) decode(w http.ResponseWriter, r *http.Request, v any) *apiError {
	body, err := reqbody.Read(w, r, g.maxBody, bodyTimeout)
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return &apiError{status: http.StatusRequestEntityTooLarge, kind: kindInvalid, msg: fmt.Sprintf("the request body exceeds %d bytes", mb.Limit)}
		}
		if errors.Is(err, reqbody.ErrTimeout) {
			return &apiError{status: http.StatusRequestTimeout, kind: kindInvalid, msg: fmt.Sprintf("the request body took longer than %v to arrive", bodyTimeout)}
		}
		return invalidf("", "read the body: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return invalidf(te.Field, "expected %s, got JSON %s", te.Type, te.Value)
		}
		var fe *fieldError
		if errors.As(err, &fe) {
			return invalidf(fe.field, "%s", fe.msg)
		}
		return invalidf("", "the body is not valid JSON: %v", err)
	}
	if dec.More() {
		return invalidf("", "the body has more than one JSON value")
	}
	return nil
}

// fieldError is a value of the right JSON type that is still wrong.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

// complete decodes a provider's request into q, converts it with call
// and answers it on the session.
func (g *Gateway) complete(w http.ResponseWriter, r *http.Request, s *session.Session, q any, call func() (session.Call, *apiError)) (*session.Reply, *apiError) {
	if aerr := g.decode(w, r, q); aerr != nil {
		return nil, aerr
	}
	c, aerr := call()
	if aerr != nil {
		return nil, aerr
	}
	rep, err := s.Complete(r.Context(), c)
	if err != nil {
		return nil, callError(err)
	}
	return rep, nil
}

// count is complete for the token-counting endpoints: it renders, generates nothing.
func (g *Gateway) count(w http.ResponseWriter, r *http.Request, s *session.Session, q any, call func() (session.Call, *apiError), field string) (int, *apiError) {
	if aerr := g.decode(w, r, q); aerr != nil {
		return 0, aerr
	}
	c, aerr := call()
	if aerr != nil {
		return 0, aerr
	}
	n, err := s.Count(r.Context(), c)
	if err != nil {
		return 0, invalidf(field, "render the chat template: %v", err)
	}
	return n, nil
}

// modelName is the model a reply names: the one the harness asked for (it
// checks), else the session's.
func modelName(asked string, s *session.Session) string {
	if asked == "" {
		return s.Model()
	}
	return asked
}

// callError maps a session's error to the provider's.
func callError(err error) *apiError {
	var re *session.RequestError
	var be *session.BackendError
	switch {
	case errors.Is(err, session.ErrClosed):
		return &apiError{status: http.StatusNotFound, kind: kindNotFound, msg: "the session has ended"}
	case errors.As(err, &re):
		return invalidf(re.Field, "%v", re.Err)
	case errors.As(err, &be):
		return &apiError{status: http.StatusServiceUnavailable, kind: kindOverloaded, msg: be.Error()}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &apiError{status: http.StatusRequestTimeout, kind: kindInvalid, msg: "the request was cancelled"}
	}
	return &apiError{status: http.StatusInternalServerError, kind: kindAPI, msg: err.Error()}
}

// sse writes server-sent events and flushes each.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

// event writes one event; an empty name writes a data-only event (OpenAI's).
func (s *sse) event(name string, v any) {
	b, _ := json.Marshal(v)
	if name != "" {
		fmt.Fprintf(s.w, "event: %s\n", name)
	}
	fmt.Fprintf(s.w, "data: %s\n\n", b)
	if s.f != nil {
		s.f.Flush()
	}
}

func (s *sse) raw(line string) {
	fmt.Fprintf(s.w, "data: %s\n\n", line)
	if s.f != nil {
		s.f.Flush()
	}
}

func (g *Gateway) models(w http.ResponseWriter, r *http.Request, s *session.Session, p provider) *apiError {
	if p == anthropic {
		writeJSON(w, http.StatusOK, map[string]any{"data": []any{anthropicModel(s.Model())}, "has_more": false, "first_id": s.Model(), "last_id": s.Model()})
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{openAIModel(s.Model())}})
	return nil
}

// model describes any name: harnesses ask for their own model names, and
// the session answers every one of them with its policy.
func (g *Gateway) model(w http.ResponseWriter, r *http.Request, s *session.Session, p provider) *apiError {
	name := mux.Vars(r)["model"]
	if p == anthropic {
		writeJSON(w, http.StatusOK, anthropicModel(name))
	} else {
		writeJSON(w, http.StatusOK, openAIModel(name))
	}
	return nil
}

func openAIModel(name string) map[string]any {
	return map[string]any{"id": name, "object": "model", "created": 0, "owned_by": "prorl"}
}

func anthropicModel(name string) map[string]any {
	return map[string]any{"type": "model", "id": name, "display_name": name, "created_at": "1970-01-01T00:00:00Z"}
}
