package api

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/prorl/prorl/core/config"
	"github.com/prorl/prorl/core/pipeline"
	"github.com/prorl/prorl/core/sessions"
	"github.com/prorl/prorl/core/trajectory"
)

// SessionRequest is POST /v1/sessions: a rollout whose agent runs outside
// the host and calls the gateway. With a task, the domain prepares it (the
// answer carries its messages and tools) and can score it at close.
type SessionRequest struct {
	Task     json.RawMessage     `json:"task"`
	Sampling trajectory.Sampling `json:"sampling"`
	// MaxTurns bounds the session's LLM calls.
	MaxTurns *int            `json:"max_turns"`
	Timeout  *Timeout        `json:"timeout"`
	GroupID  string          `json:"group_id"`
	Metadata json.RawMessage `json:"metadata"`
}

// SessionResponse tells the agent where to send its calls.
type SessionResponse struct {
	SessionID string `json:"session_id"`
	GroupID   string `json:"group_id"`
	// Status is running (calls are served) or starting (the domain is
	// still preparing the task; calls wait for it).
	Status string `json:"status"`
	APIKey string `json:"api_key"`
	// BaseURL is the session's root; OpenAI clients take OpenAIBaseURL
	// (…/v1), Anthropic clients AnthropicBaseURL.
	BaseURL          string               `json:"base_url"`
	OpenAIBaseURL    string               `json:"openai_base_url"`
	AnthropicBaseURL string               `json:"anthropic_base_url"`
	Messages         []trajectory.Message `json:"messages"`
	Tools            []trajectory.Tool    `json:"tools"`
}

// CloseRequest is POST /v1/sessions/{id}:close: exactly one of reward
// (the agent's own score) or evaluate (the task's domain scores it).
type CloseRequest struct {
	Reward        *float64           `json:"reward"`
	Resolved      bool               `json:"resolved"`
	Evaluate      bool               `json:"evaluate"`
	FinalResponse string             `json:"final_response"`
	Metrics       map[string]float64 `json:"metrics"`
}

func newKey() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return "prorl-" + hex.EncodeToString(b[:])
}

// sessionStartWait bounds how long opening a session waits for the domain
// to prepare its task.
const sessionStartWait = 60 * time.Second

func (s *Server) openSession(w http.ResponseWriter, r *http.Request) {
	var sr SessionRequest
	if e := Decode(w, r, s.Cfg.Server.MaxBodyBytes, &sr); e != nil {
		WriteError(w, e)
		return
	}
	sub := SubmitRequest{Task: sr.Task, Sampling: sr.Sampling, MaxTurns: sr.MaxTurns, Timeout: sr.Timeout, GroupID: sr.GroupID, Metadata: sr.Metadata}
	var reqs []pipeline.Request
	gid := sr.GroupID
	if t := bytes.TrimSpace(sr.Task); len(t) == 0 || string(t) == "null" {
		if e := sub.validate("", s.Cfg.Server.MaxSamples); e != nil {
			WriteError(w, e)
			return
		}
		if gid == "" {
			gid = pipeline.NewID("g-")
		}
		rq := pipeline.Request{GroupID: gid, Sampling: sr.Sampling, Metadata: sr.Metadata}
		if sr.MaxTurns != nil {
			rq.MaxTurns = *sr.MaxTurns
		}
		if sr.Timeout != nil {
			rq.Timeout = time.Duration(*sr.Timeout)
		}
		reqs = []pipeline.Request{rq}
	} else {
		var e *Error
		if reqs, gid, e = s.requests(&sub, ""); e != nil {
			WriteError(w, e)
			return
		}
	}
	key := newKey()
	reqs[0].Agent, reqs[0].SessionKey = pipeline.AgentGateway, key
	rs, e := s.Enqueue(reqs, nil, "n")
	if e != nil {
		WriteError(w, e)
		return
	}
	ro := rs[0]
	resp := SessionResponse{SessionID: ro.ID, GroupID: gid, Status: "starting", APIKey: key, Messages: []trajectory.Message{}, Tools: []trajectory.Tool{}}
	base := "http://" + r.Host + "/gateway/" + ro.ID
	resp.BaseURL, resp.OpenAIBaseURL, resp.AnthropicBaseURL = base, base+"/v1", base
	t := time.NewTimer(min(sessionStartWait, s.Cfg.Server.MaxWait.Duration))
	defer t.Stop()
	select {
	case <-ro.SessionLive():
		resp.Status = "running"
		if msgs, tools, ok := ro.Episode(); ok {
			resp.Messages, resp.Tools = orEmpty(msgs), orEmpty(tools)
		}
	case <-ro.Done():
		// The task could not be prepared: its failed result is in the
		// stream like any rollout's; the caller learns why here.
		if res, ok := s.Store.Get(ro.ID); ok && res.Failure != nil {
			WriteError(w, Errf(http.StatusUnprocessableEntity, res.Failure.Reason, "task", "the session ended before it started: %s", res.Failure.Message))
			return
		}
		WriteError(w, Errf(http.StatusUnprocessableEntity, "session_ended", "task", "the session ended before it started"))
		return
	case <-t.C:
	case <-r.Context().Done():
	}
	WriteJSON(w, http.StatusCreated, resp)
}

// checkHarness validates a request's harness against the configuration.
func (s *Server) checkHarness(hr *HarnessRequest, field string) *Error {
	if hr == nil {
		return nil
	}
	if _, ok := s.Cfg.Harnesses[hr.Name]; !ok {
		return Invalid(field+".name", "unknown harness %q (configured: %s)", hr.Name, strings.Join(harnessNames(s.Cfg.Harnesses), ", "))
	}
	if hr.Image != "" && !imageName.MatchString(hr.Image) {
		return Invalid(field+".image", "must be an image's name in the deployment's image directory ([A-Za-z0-9][A-Za-z0-9._-]*), not a path")
	}
	if hr.Workdir != "" && !path.IsAbs(hr.Workdir) {
		return Invalid(field+".workdir", "must be an absolute path inside the sandbox")
	}
	if len(hr.Instruction) > maxMetadata*4 {
		return Invalid(field+".instruction", "at most %d bytes", maxMetadata*4)
	}
	if d := s.Cfg.Sandbox.Driver; d == "disabled" || d == "none" {
		return Invalid(field, "a harness runs in a sandbox with the gateway as its only network; this host's [sandbox] driver is %q", d)
	}
	return nil
}

// imageName is an image a trainer may name: a directory of image_dir, never a path.
var imageName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func harnessNames(hs map[string]*config.Harness) []string {
	names := make([]string, 0, len(hs))
	for n := range hs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (s *Server) closeSession(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	var cr CloseRequest
	if e := Decode(w, r, s.Cfg.Server.MaxBodyBytes, &cr); e != nil {
		WriteError(w, e)
		return
	}
	wait, e := parseWait(r.URL.Query(), s.Cfg.Server.MaxWait.Duration)
	if e != nil {
		WriteError(w, e)
		return
	}
	if r.URL.Query().Get("wait") == "" {
		wait = min(sessionStartWait, s.Cfg.Server.MaxWait.Duration)
	}
	switch {
	case cr.Reward != nil && cr.Evaluate:
		WriteError(w, Invalid("evaluate", "give either reward or evaluate, not both"))
		return
	case cr.Reward == nil && !cr.Evaluate:
		WriteError(w, Invalid("reward", "required: the session's reward, or \"evaluate\": true to let its task's domain score it"))
		return
	}
	ro, ok := s.Pipeline.Lookup(id)
	if !ok {
		if _, done := s.Store.Get(id); done {
			WriteError(w, Errf(http.StatusConflict, "session_closed", "id", "session %s has already ended", id))
			return
		}
		WriteError(w, Errf(http.StatusNotFound, "not_found", "id", "no open session %q", id))
		return
	}
	if cr.Evaluate && ro.Req.Domain == "" {
		WriteError(w, Invalid("evaluate", "the session has no task, so no domain can score it: close it with a reward"))
		return
	}
	err := s.Pipeline.CloseSession(id, sessions.Close{Reward: cr.Reward, Resolved: cr.Resolved, FinalResponse: cr.FinalResponse, Metrics: cr.Metrics})
	switch {
	case errors.Is(err, pipeline.ErrSessionClosed):
		WriteError(w, Errf(http.StatusConflict, "session_closed", "id", "session %s is already closed", id))
		return
	case err != nil:
		WriteError(w, Errf(http.StatusNotFound, "not_found", "id", "no open session %q", id))
		return
	}
	if res := s.awaitResult(r.Context(), ro, wait); res != nil {
		writeResult(w, res)
		return
	}
	WriteJSON(w, http.StatusAccepted, map[string]string{"session_id": id, "status": "closing"})
}
