package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/prorl/prorl/sdk/schema"
)

// Env is a task domain written from typed parts: C is its config (the
// [plugins.NAME.config] table, decoded over the defaults in Config; its
// JSON Schema, generated from C, is what the host checks the table
// against), T a task (decoded from each task row) and S the state one
// rollout keeps (a fresh S per rollout, dropped when the host releases it).
//
// Sessions live in the plugin process: the host sends every call of a
// rollout to the process that prepared it and fails the rollout if that
// process restarts, so S needs no persistence. Calls of one rollout never
// overlap (the agent runs tools one at a time), so S needs no lock. With
// S = struct{} there is no state: each call rebuilds the rollout from the
// task it carries, the domain declares no per-rollout state, and its
// rollouts survive a plugin restart.
//
// An *Env is a Domain: pass it to Serve.
type Env[C, T, S any] struct {
	Name        string
	Version     string
	Description string
	// DataSources are the ProRL data_source names routed here; a trailing *
	// matches a prefix.
	DataSources []string
	// Config holds the defaults the host's table is decoded over.
	Config C
	// Tools the domain offers (NewTool, RolloutTool, or package tools).
	Tools []Tool
	// Check validates a decoded config beyond its schema (optional).
	Check func(c *C) error
	// ParseTask decodes a task row (optional). By default json.Unmarshal,
	// which allows the extra fields datasets carry, then T's Check method
	// if it has one. An error that is not an *Error is invalid_task.
	ParseTask func(raw json.RawMessage) (T, error)
	// Episode turns a rollout's task into its episode (required).
	Episode func(ctx context.Context, r *Rollout[C, T, S]) (*Episode, error)
	// EpisodeByTask declares that Episode reads the task and the config
	// only (it is then called with an empty rollout ID), so the host may
	// prepare a group's task once for all its rollouts (CapTaskPrepare).
	// Only for S = struct{}: state of its own would need its own Prepare.
	EpisodeByTask bool
	// SetupSandbox runs in the sandbox before the agent starts (optional).
	SetupSandbox func(ctx context.Context, r *Rollout[C, T, S]) error
	// Score rewards a finished episode (required).
	Score func(ctx context.Context, r *Rollout[C, T, S], req EvaluateRequest) (*Score, error)
	// Commands are admin subcommands of the plugin binary (optional).
	Commands []Command

	mu       sync.Mutex
	cfg      *C
	sessions map[string]*Rollout[C, T, S]
}

// CommandList implements Commander.
func (e *Env[C, T, S]) CommandList() []Command { return e.Commands }

// Rollout is one rollout of an Env: its config, task and state.
type Rollout[C, T, S any] struct {
	ID     string
	Config *C
	Task   T
	// State is this rollout's own: a zero S at Prepare.
	State S
	// SandboxID is the rollout's sandbox once one runs ("" before).
	SandboxID string
	Sandboxes Sandboxes
	done      *string
}

// Finish ends the episode after the current tool call, with answer as the
// final response Score sees.
func (r *Rollout[C, T, S]) Finish(answer string) { r.done = &answer }

// Chat is the usual opening of an episode: a system and a user message.
func Chat(system, user string) []Message {
	return []Message{{Role: "system", Content: system}, {Role: "user", Content: user}}
}

func (e *Env[C, T, S]) Info() Info {
	in := Info{Name: e.Name, Version: e.Version, Description: e.Description, DataSources: e.DataSources, Tools: e.Tools}
	s, err := schema.For[C](schema.Config)
	if err != nil {
		panic(fmt.Sprintf("%s: config type: %v", e.Name, err))
	}
	in.ConfigSchema = s.Raw()
	return in
}

func (e *Env[C, T, S]) Configure(_ context.Context, raw json.RawMessage, _ Sandboxes) error {
	// The host checks the table against the schema at start; so does the
	// domain, for a harness or host that does not.
	if s, err := schema.For[C](schema.Config); err == nil && len(bytes.TrimSpace(raw)) > 0 {
		if err := schema.Validate(s.Raw(), raw); err != nil {
			var se *schema.Error
			if errors.As(err, &se) {
				return &Error{Code: CodeInvalidConfig, Field: se.Path, Message: e.Name + " config: " + err.Error()}
			}
			return Errorf(CodeInvalidConfig, "%s config: %v", e.Name, err)
		}
	}
	cfg := e.Config
	if err := DecodeConfig(e.Name, raw, &cfg); err != nil {
		return err
	}
	if e.Check != nil {
		if err := e.Check(&cfg); err != nil {
			var se *Error
			if errors.As(err, &se) {
				return err
			}
			return Errorf(CodeInvalidConfig, "%s config: %v", e.Name, err)
		}
	}
	e.mu.Lock()
	e.cfg = &cfg
	e.mu.Unlock()
	return nil
}

func (e *Env[C, T, S]) config() *C {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cfg == nil { // never configured: the defaults
		c := e.Config
		e.cfg = &c
	}
	return e.cfg
}

func (e *Env[C, T, S]) Prepare(ctx context.Context, req PrepareRequest) (*Episode, error) {
	id := req.RolloutID
	if e.taskPrepare() {
		id = "" // what the host may reuse for other rollouts cannot name this one
	}
	r, err := e.newRollout(id, req.Task)
	if err != nil {
		return nil, err
	}
	ep, err := e.Episode(ctx, r)
	if err != nil {
		return nil, err
	}
	if !e.stateless() {
		e.mu.Lock()
		if e.sessions == nil {
			e.sessions = map[string]*Rollout[C, T, S]{}
		}
		e.sessions[req.RolloutID] = r
		e.mu.Unlock()
	}
	return ep, nil
}

func (e *Env[C, T, S]) newRollout(id string, raw json.RawMessage) (*Rollout[C, T, S], error) {
	var t T
	var err error
	if e.ParseTask != nil {
		t, err = e.ParseTask(raw)
	} else if err = json.Unmarshal(raw, &t); err == nil {
		if c, ok := any(t).(interface{ Check() error }); ok {
			err = c.Check()
		}
	}
	if err != nil {
		var se *Error
		if errors.As(err, &se) {
			return nil, err
		}
		return nil, InvalidTask("task", "%v", err)
	}
	return &Rollout[C, T, S]{ID: id, Config: e.config(), Task: t, Sandboxes: noSandboxes{}}, nil
}

// taskPrepare: Prepare depends on the task alone (CapTaskPrepare).
func (e *Env[C, T, S]) taskPrepare() bool { return e.EpisodeByTask && e.stateless() }

// stateless: S holds nothing (struct{}), so a rollout is its config and
// task alone and each call rebuilds it from the task it carries. Nothing
// is kept between calls, the domain declares no per-rollout state, and
// the host lets its rollouts survive a plugin restart.
func (e *Env[C, T, S]) stateless() bool { return reflect.TypeFor[S]().Size() == 0 }

// session finds a prepared rollout and gives it the call's sandbox and
// host; a call for one this process did not prepare fails rather than
// running on a blank state. A stateless Env rebuilds it from the task.
func (e *Env[C, T, S]) session(id string, task json.RawMessage, sandboxID string, h Sandboxes) (*Rollout[C, T, S], error) {
	if e.stateless() {
		r, err := e.newRollout(id, task)
		if err != nil {
			return nil, err
		}
		r.SandboxID, r.Sandboxes = sandboxID, h
		return r, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.sessions[id]
	if !ok {
		return nil, Errorf(CodeInternal, "no session for rollout %s in this plugin process (not prepared here, or already released)", id)
	}
	r.SandboxID, r.Sandboxes = sandboxID, h
	return r, nil
}

func (e *Env[C, T, S]) Setup(ctx context.Context, req SetupRequest) error {
	r, err := e.session(req.RolloutID, req.Task, req.SandboxID, req.Sandboxes)
	if err != nil {
		return err
	}
	if e.SetupSandbox == nil {
		return nil
	}
	return e.SetupSandbox(ctx, r)
}

func (e *Env[C, T, S]) Evaluate(ctx context.Context, req EvaluateRequest) (*Score, error) {
	r, err := e.session(req.RolloutID, req.Task, req.SandboxID, req.Sandboxes)
	if err != nil {
		return nil, err
	}
	return e.Score(ctx, r, req)
}

func (e *Env[C, T, S]) Release(_ context.Context, id string) {
	e.mu.Lock()
	delete(e.sessions, id)
	e.mu.Unlock()
}

// Sessions is how many rollouts hold state now (for tests and metrics).
func (e *Env[C, T, S]) Sessions() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.sessions)
}

// toolSession gives a RolloutTool its rollout (the server calls it before
// every tool call). A stateful Env's is a map lookup, done at once so a
// call for a rollout this process never prepared fails; a stateless Env's
// means parsing the task, so it is left to the tools that use it (a
// RolloutTool), and the standard tools never pay for it.
func (e *Env[C, T, S]) toolSession(tc ToolContext) (any, error) {
	if e.stateless() {
		return func() (*Rollout[C, T, S], error) {
			return e.session(tc.RolloutID, tc.Task, tc.SandboxID, tc.Sandboxes)
		}, nil
	}
	return e.session(tc.RolloutID, tc.Task, tc.SandboxID, tc.Sandboxes)
}

func (e *Env[C, T, S]) capabilities() (setup, release, taskPrepare bool) {
	return e.SetupSandbox != nil, !e.stateless(), e.taskPrepare()
}

// sessionDomain is implemented by Env: tools find their rollout through it.
type sessionDomain interface {
	toolSession(tc ToolContext) (any, error)
	capabilities() (setup, release, taskPrepare bool)
}

// NewTool makes a tool of a function of typed arguments. The parameters'
// JSON Schema is generated from A (see package schema for the tags), and a
// call's arguments are decoded strictly into A, so an invented or
// misspelt argument is reported to the model. It panics if A has no
// schema, as regexp.MustCompile does: a programming error found at start.
func NewTool[A any](name, description string, f func(ctx context.Context, tc ToolContext, args A) (ToolResult, error)) Tool {
	s, err := schema.For[A](schema.Args)
	if err != nil {
		panic(fmt.Sprintf("tool %s: %v", name, err))
	}
	return FuncTool{
		S: ToolSpec{Name: name, Description: description, Parameters: s.Raw()},
		F: func(ctx context.Context, tc ToolContext, raw json.RawMessage) (ToolResult, error) {
			var a A
			if err := DecodeArgs(raw, &a); err != nil {
				return ToolResult{}, err
			}
			return f(ctx, tc, a)
		},
	}
}

// RolloutTool makes a tool of an Env that works on its rollout (config,
// task and state); its output is shown to the model, an error as an error
// observation (see Tool), and r.Finish ends the episode.
func RolloutTool[C, T, S, A any](name, description string, f func(ctx context.Context, r *Rollout[C, T, S], args A) (string, error)) Tool {
	return NewTool(name, description, func(ctx context.Context, tc ToolContext, a A) (ToolResult, error) {
		var r *Rollout[C, T, S]
		switch s := tc.session.(type) {
		case *Rollout[C, T, S]:
			r = s
		case func() (*Rollout[C, T, S], error): // a stateless Env's, built on demand
			var err error
			if r, err = s(); err != nil {
				return ToolResult{}, err
			}
		default:
			return ToolResult{}, Errorf(CodeInternal, "tool %s belongs to an Env of other types, or to no Env", name)
		}
		out, err := f(ctx, r, a)
		if err != nil {
			return ToolResult{}, err
		}
		res := ToolResult{Output: out}
		if r.done != nil {
			res.Done, res.FinalResponse, r.done = true, *r.done, nil
		}
		return res, nil
	})
}
