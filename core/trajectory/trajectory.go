// Package trajectory defines what a trainer gets back: a rollout's status,
// reward, turns and its exact token sequence with loss mask and logprobs.
package trajectory

import (
	"encoding/json"
	"time"
)

// Status of a rollout.
type Status string

const (
	StatusQueued    Status = "queued"
	StatusRunning   Status = "running"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
	StatusTimeout   Status = "timeout"
	StatusTruncated Status = "truncated"
)

// Finished reports whether the status is final.
func (s Status) Finished() bool { return s != StatusQueued && s != StatusRunning }

// Stages of the pipeline.
const (
	StageInit = "init"
	StageRun  = "run"
	StageEval = "eval"
)

// The fixed failure vocabulary.
const (
	ReasonBackendUnavailable = "backend_unavailable"
	ReasonPluginCrashed      = "plugin_crashed"
	ReasonSandboxFailed      = "sandbox_failed"
	ReasonContextOverflow    = "context_overflow"
	ReasonMaxTurns           = "max_turns"
	ReasonTimeout            = "timeout"
	ReasonCancelled          = "cancelled"
	// ReasonEarlyStopped: cancelled because its group already had the
	// usable results it asked for.
	ReasonEarlyStopped = "early_stopped"
	// ReasonGroupDropped: cancelled because another sample of its group
	// ended with no trainable result and the group asked to be dropped
	// whole (drop_incomplete).
	ReasonGroupDropped = "group_dropped"
	ReasonToolError    = "tool_error"
	ReasonInvalidTask  = "invalid_task"
	ReasonInternal     = "internal"
	ReasonEvalFailed   = "eval_failed"
	// ReasonInterrupted: the host stopped (crashed) before the rollout ended
	// and the deployment reports such rollouts rather than re-running them.
	ReasonInterrupted = "interrupted"
)

// Reasons lists the vocabulary, for metrics and validation.
var Reasons = []string{ReasonBackendUnavailable, ReasonPluginCrashed, ReasonSandboxFailed, ReasonContextOverflow,
	ReasonMaxTurns, ReasonTimeout, ReasonCancelled, ReasonEarlyStopped, ReasonGroupDropped, ReasonToolError, ReasonInvalidTask, ReasonInternal, ReasonInterrupted, ReasonEvalFailed}

// What a result is to a trainer (Result.Sample): a trainable sample, the
// policy's own doing, whose reward is as scored and whose loss mask is
// intact; or no sample at all, never a reward: an infrastructure failure
// (retry it), a cancel the trainer or a group rule asked for, or a task
// the domain refused.
const (
	SampleTrainable      = "trainable"
	SampleInfrastructure = "infrastructure"
	SampleCancelled      = "cancelled"
	SampleInvalidTask    = "invalid_task"
)

// SampleOf classifies a finished rollout by its status and failure:
// completed and truncated ones (context_overflow, max_turns, a loop) are
// trainable; a timeout and every failure but invalid_task are the
// infrastructure's (backend_unavailable, sandbox_failed, plugin_crashed,
// interrupted, eval_failed, tool_error: a domain's tool that broke, not a
// malformed call, which the model reads as an observation; internal).
func SampleOf(st Status, f *Failure) string {
	switch st {
	case StatusCompleted, StatusTruncated:
		return SampleTrainable
	case StatusCancelled:
		return SampleCancelled
	case StatusFailed:
		if f != nil && f.Reason == ReasonInvalidTask {
			return SampleInvalidTask
		}
	}
	return SampleInfrastructure
}

// Sampling are the generation parameters of a request.
type Sampling struct {
	Temperature      *float64 `json:"temperature,omitempty"`
	TopP             *float64 `json:"top_p,omitempty"`
	TopK             *int     `json:"top_k,omitempty"`
	MaxTokensPerTurn int      `json:"max_tokens_per_turn,omitempty"`
	MaxTotalTokens   int      `json:"max_total_tokens,omitempty"`
	Seed             *int64   `json:"seed,omitempty"`
	Stop             []string `json:"stop,omitempty"`
	// StrictLoopDetector ends a rollout whose model repeats one tool call
	// with the same arguments (ProRL's sampling flag); loops are detected
	// and counted either way.
	StrictLoopDetector bool `json:"strict_loop_detector,omitempty"`
}

// Failure says why a rollout did not complete.
type Failure struct {
	Stage   string `json:"stage"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

// Tokens is the flattened sequence: LossMask is 1 exactly on generated tokens.
// The mask is int8, not uint8, so JSON carries numbers rather than base64.
type Tokens struct {
	IDs       []int     `json:"ids"`
	LossMask  []int8    `json:"loss_mask"`
	Logprobs  []float64 `json:"logprobs"`
	PromptLen int       `json:"prompt_len"`
}

// Turn is one LLM call of the loop.
type Turn struct {
	Index int `json:"index"`
	// Trace is the index in Result.Traces of the trace this call belongs
	// to (gateway sessions only).
	Trace int `json:"trace,omitempty"`
	// PromptDeltaIDs are the tokens appended before this turn's generation
	// (the whole prompt for turn 0).
	PromptDeltaIDs []int     `json:"prompt_delta_ids"`
	ResponseIDs    []int     `json:"response_ids"`
	Logprobs       []float64 `json:"logprobs"`
	FinishReason   string    `json:"finish_reason"`
	Backend        string    `json:"backend"`
	// Backends lists every backend that served this turn, when it moved
	// from a failing one to another.
	Backends      []string `json:"backends,omitempty"`
	PolicyVersion int64    `json:"policy_version"`
	// PolicySpans, for a generation paused for a weight update and
	// continued, are its spans of ResponseIDs with the version of each.
	PolicySpans []PolicySpan `json:"policy_spans,omitempty"`
	ToolCalls   int          `json:"tool_calls"`
	// Latencies in milliseconds: waiting on the backend, on tools, and the host's own work.
	GenerateMS float64 `json:"generate_ms"`
	ToolsMS    float64 `json:"tools_ms"`
	OverheadMS float64 `json:"overhead_ms"`
}

// PolicySpan is [Start, End) of a turn's response ids, generated by policy Version.
type PolicySpan struct {
	Start   int   `json:"start"`
	End     int   `json:"end"`
	Version int64 `json:"version"`
}

// ToolCall is a call in OpenAI chat format.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall holds the name and the JSON-encoded arguments.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Message is a chat message in OpenAI format.
type Message struct {
	Role             string     `json:"role"`
	Content          string     `json:"content"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string     `json:"tool_call_id,omitempty"`
	Name             string     `json:"name,omitempty"`
	// Span is this message's [start, end) in Tokens.IDs, when known.
	Span *[2]int `json:"token_span,omitempty"`
}

// Tool is a tool definition in OpenAI format.
type Tool struct {
	Type     string       `json:"type"`
	Function ToolFunction `json:"function"`
}

// ToolFunction describes a function tool.
type ToolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Trace is one exact token sequence of a gateway session: the prompt of its
// first call, then every generation (loss mask 1) and every spliced
// observation (mask 0) of the calls merged into it.
type Trace struct {
	PromptIDs        []int     `json:"prompt_ids"`
	ResponseIDs      []int     `json:"response_ids"`
	LossMask         []int8    `json:"loss_mask"`
	ResponseLogprobs []float64 `json:"response_logprobs"`
	PromptMessages   []Message `json:"prompt_messages"`
	ResponseMessages []Message `json:"response_messages"`
	Tools            []Tool    `json:"tools"`
	FinishReason     string    `json:"finish_reason"`
	// Calls is how many gateway calls made this trace.
	Calls int `json:"calls"`
}

// Timing in milliseconds; Queued is time waiting between stages.
type Timing struct {
	QueuedMS float64 `json:"queued"`
	InitMS   float64 `json:"init"`
	RunMS    float64 `json:"run"`
	EvalMS   float64 `json:"eval"`
	TotalMS  float64 `json:"total"`
}

// Result is a rollout as the trainer sees it.
type Result struct {
	ID          string `json:"id"`
	GroupID     string `json:"group_id"`
	SampleIndex int    `json:"sample_index"`
	Attempt     int    `json:"attempt"`
	Domain      string `json:"domain"`
	TaskID      string `json:"task_id,omitempty"`
	Status      Status `json:"status"`
	// Sample is what the result is to a trainer (SampleOf): only a
	// "trainable" one carries a reward to learn from.
	Sample string `json:"sample,omitempty"`
	// MaskSample: the tokens and logprobs do not line up (a backend that
	// gave no logprobs for a generation): train on none of it rather than
	// on guessed numbers.
	MaskSample bool `json:"mask_sample,omitempty"`
	// Attempts are the sample's earlier attempts, each ended by an
	// infrastructure failure and run again (same id and sample index);
	// none of their tokens is in this result.
	Attempts      []Attempt          `json:"attempts,omitempty"`
	Stage         string             `json:"stage,omitempty"`
	Failure       *Failure           `json:"failure,omitempty"`
	Reward        float64            `json:"reward"`
	Resolved      bool               `json:"resolved"`
	Metrics       map[string]float64 `json:"metrics,omitempty"`
	Info          json.RawMessage    `json:"info,omitempty"`
	FinalResponse string             `json:"final_response,omitempty"`
	EndReason     string             `json:"end_reason,omitempty"`
	PolicyVersion int64              `json:"policy_version"`
	// Staleness is how far the policy moved while the sample waited and
	// while it ran; none before any token was generated.
	Staleness *Staleness `json:"staleness,omitempty"`
	// Stale: the sample's oldest token is more than its request's
	// max_staleness versions behind the policy it finished under.
	Stale    bool      `json:"stale,omitempty"`
	Turns    []Turn    `json:"turns"`
	Tokens   Tokens    `json:"tokens"`
	Messages []Message `json:"messages"`
	Tools    []Tool    `json:"tools"`
	// Traces are a gateway session's token sequences, one per conversation
	// the harness kept (Polar's trace fields); Tokens is then the last one.
	Traces      []Trace         `json:"traces,omitempty"`
	Timing      Timing          `json:"timing"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
	SubmittedAt time.Time       `json:"submitted_at"`
	FinishedAt  *time.Time      `json:"finished_at,omitempty"`
	// Seq orders finished results for ?since= paging.
	Seq uint64 `json:"seq,omitempty"`
	// Encoded is this result's JSON when a store already made it (to write
	// it to disk): the API sends those bytes instead of encoding again.
	Encoded []byte `json:"-"`
	// Marks are the host's small records about this result (what it counts
	// for in a dynamic-sampling batch or an early-stop group) that a
	// durable store writes in the result's own transaction: after a crash
	// both are on disk or neither is.
	Marks []Mark `json:"-"`
}

// Staleness counts policy versions: InQueue from the version the sample
// was submitted (or its attempt started) under to its first token's;
// InFlight from its first token's to the version it finished under.
type Staleness struct {
	InQueue  int64 `json:"in_queue"`
	InFlight int64 `json:"in_flight"`
}

// Attempt is one earlier attempt of a sample: what ended it, when, and
// under which policy version it ran.
type Attempt struct {
	Attempt       int       `json:"attempt"`
	Stage         string    `json:"stage"`
	Reason        string    `json:"reason"`
	Message       string    `json:"message,omitempty"`
	PolicyVersion int64     `json:"policy_version"`
	StartedAt     time.Time `json:"started_at"`
	EndedAt       time.Time `json:"ended_at"`
	// GeneratedTokens is what the policy generated in it: the cost of the
	// retry, never part of the result.
	GeneratedTokens int `json:"generated_tokens"`
}

// Mark is one record written with a result: Value (JSON) under Key, kept
// until keys expire, after the result itself is acknowledged.
type Mark struct {
	Key   string
	Value json.RawMessage
}

// GeneratedTokens is how many tokens the policy generated over the turns.
func (r *Result) GeneratedTokens() int {
	n := 0
	for _, t := range r.Turns {
		n += len(t.ResponseIDs)
	}
	return n
}
