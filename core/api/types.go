package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prorl/prorl/core/config"
	"github.com/prorl/prorl/core/groups"
	"github.com/prorl/prorl/core/pipeline"
	"github.com/prorl/prorl/core/trajectory"
)

// Timeout accepts "30s" or a number of seconds.
type Timeout time.Duration

// UnmarshalJSON implements json.Unmarshaler.
func (d *Timeout) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return &Error{Status: 422, Code: "invalid_field", Field: "timeout", Message: fmt.Sprintf("bad duration %q", s)}
		}
		*d = Timeout(v)
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return &Error{Status: 422, Code: "invalid_field", Field: "timeout", Message: "must be a string like \"30s\" or a number of seconds"}
	}
	*d = Timeout(f * float64(time.Second))
	return nil
}

// SubmitRequest is POST /v1/rollouts.
type SubmitRequest struct {
	Task           json.RawMessage     `json:"task"`
	Sampling       trajectory.Sampling `json:"sampling"`
	N              *int                `json:"n"`
	MaxTurns       *int                `json:"max_turns"`
	Timeout        *Timeout            `json:"timeout"`
	GroupID        string              `json:"group_id"`
	IdempotencyKey string              `json:"idempotency_key"`
	Metadata       json.RawMessage     `json:"metadata"`
	// Priority (0-100, default 0): queued rollouts of higher priority start
	// first; started ones are never preempted.
	Priority *int `json:"priority,omitempty"`
	// ExpectedTokens is what the trainer expects each rollout to generate
	// (e.g. from the task's earlier epochs): with [backends] routing =
	// "group-aware" the host balances it across backends.
	ExpectedTokens *int `json:"expected_tokens,omitempty"`
	// EarlyStopMinUsable cancels the group's unfinished rollouts once this
	// many finished usable (scored, with trainable tokens).
	EarlyStopMinUsable *int `json:"early_stop_min_usable,omitempty"`
	// Harness runs the rollouts with an agent harness through the gateway
	// instead of the host's agent loop.
	Harness *HarnessRequest `json:"harness,omitempty"`
	// RetryInfra runs a sample that an infrastructure failure ended again,
	// as a new attempt (default: [pipeline.retry] infra, on).
	RetryInfra *bool `json:"retry_infra,omitempty"`
	// RetryBudget overrides [pipeline.retry] budget per failure reason:
	// how many more attempts each may cost a sample.
	RetryBudget map[string]int `json:"retry_budget,omitempty"`
	// RetryDeadline bounds a sample's attempts from its first start
	// (default: [pipeline.retry] deadline, else 3 × timeout).
	RetryDeadline *Timeout `json:"retry_deadline,omitempty"`
	// IncompleteGroup is "return" (default: every sample's result comes
	// back, a failed one with its attempts) or "drop" (once a sample ends
	// with no trainable result, the group's unfinished samples are
	// cancelled with reason group_dropped).
	IncompleteGroup string `json:"incomplete_group,omitempty"`
	// MaxStaleness bounds, in policy versions, how far a sample's oldest
	// token may be behind the policy it is returned under; StaleMode is
	// what a sample past it gets: "restart" (default: run again as a new
	// attempt, within retry_deadline) or "mark" (returned with stale set).
	MaxStaleness *int64 `json:"max_staleness,omitempty"`
	StaleMode    string `json:"stale_mode,omitempty"`
}

// HarnessRequest names a configured harness ([harnesses.NAME]) and what
// it is told: the instruction (default: the domain's last user message)
// and the directory it starts in (default: the sandbox's work dir).
type HarnessRequest struct {
	Name        string `json:"name"`
	Instruction string `json:"instruction,omitempty"`
	Workdir     string `json:"workdir,omitempty"`
	// Image is the sandbox image (a name in the deployment's image_dir) for
	// a task whose domain takes the default image or none (math, STEM); a
	// domain with an image of its own (SWE: the instance's) decides it.
	Image string `json:"image,omitempty"`
}

// BatchRequest is POST /v1/rollouts:batch.
type BatchRequest struct {
	Requests []SubmitRequest `json:"requests"`
	// InformativeGroups asks for dynamic sampling (DAPO): the requests are
	// a pool of groups that start in order as workers free up; once this
	// many finished informative (at least two usable results with
	// different rewards), the rest are cancelled (status cancelled, reason
	// early_stopped).
	InformativeGroups *int `json:"informative_groups,omitempty"`
}

// SubmitResponse names a group and its rollouts.
type SubmitResponse struct {
	GroupID    string   `json:"group_id"`
	RolloutIDs []string `json:"rollout_ids"`
}

// taskHeader is the part of a task the host reads to route it.
type taskHeader struct {
	Domain     string `json:"domain"`
	DataSource string `json:"data_source"`
	ID         any    `json:"id"`
}

func readTask(raw json.RawMessage, field string) (taskHeader, *Error) {
	var h taskHeader
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return h, Invalid(field, "required: a JSON object with a domain")
	}
	if t[0] != '{' {
		return h, Invalid(field, "must be a JSON object")
	}
	if err := json.Unmarshal(t, &h); err != nil {
		return h, Invalid(field, "domain and data_source must be strings: %v", err)
	}
	return h, nil
}

// PolarKeyPrefix starts a Polar task's record in the store's key table,
// where it expires after [server] idempotency_ttl like any key; v1 keys
// may not start with it.
const PolarKeyPrefix = "polar-task:"

// MaxTimeout bounds a rollout's timeout.
const MaxTimeout = 24 * time.Hour

const (
	maxIDLen       = 128
	maxMetadata    = 64 << 10
	maxTurnsLimit  = 1000
	maxTokensLimit = 1 << 22
	maxPriority    = 100
)

func validID(s string) bool {
	if len(s) > maxIDLen {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_.:", c)) {
			return false
		}
	}
	return true
}

// maxStaleness bounds max_staleness: a policy version is a trainer's step.
const maxStaleness = 1_000_000

// validate checks a submit request; prefix names fields inside a batch.
func (s *SubmitRequest) validate(prefix string, maxSamples int) *Error {
	f := func(n string) string { return prefix + n }
	if s.N != nil && (*s.N < 1 || *s.N > maxSamples) {
		return Invalid(f("n"), "must be between 1 and %d, got %d", maxSamples, *s.N)
	}
	sp := s.Sampling
	if sp.Temperature != nil && (*sp.Temperature < 0 || *sp.Temperature > 100) {
		return Invalid(f("sampling.temperature"), "must be between 0 and 100, got %v", *sp.Temperature)
	}
	if sp.TopP != nil && (*sp.TopP <= 0 || *sp.TopP > 1) {
		return Invalid(f("sampling.top_p"), "must be in (0, 1], got %v", *sp.TopP)
	}
	if sp.TopK != nil && *sp.TopK < -1 {
		return Invalid(f("sampling.top_k"), "must be -1 (off) or positive, got %d", *sp.TopK)
	}
	if sp.MaxTokensPerTurn < 0 || sp.MaxTokensPerTurn > maxTokensLimit {
		return Invalid(f("sampling.max_tokens_per_turn"), "must be between 1 and %d", maxTokensLimit)
	}
	if sp.MaxTotalTokens < 0 || sp.MaxTotalTokens > maxTokensLimit {
		return Invalid(f("sampling.max_total_tokens"), "must be between 1 and %d", maxTokensLimit)
	}
	if len(sp.Stop) > 16 {
		return Invalid(f("sampling.stop"), "at most 16 stop strings")
	}
	if s.MaxTurns != nil && (*s.MaxTurns < 1 || *s.MaxTurns > maxTurnsLimit) {
		return Invalid(f("max_turns"), "must be between 1 and %d", maxTurnsLimit)
	}
	if s.Timeout != nil && (*s.Timeout <= 0 || time.Duration(*s.Timeout) > MaxTimeout) {
		return Invalid(f("timeout"), "must be positive and at most %s", MaxTimeout)
	}
	if !validID(s.GroupID) {
		return Invalid(f("group_id"), "at most %d characters of [A-Za-z0-9-_.:]", maxIDLen)
	}
	if len(s.IdempotencyKey) > 256 {
		return Invalid(f("idempotency_key"), "at most 256 characters")
	}
	// Polar's task ids (polarKey) and the host's tallies share the key table.
	for _, reserved := range []string{PolarKeyPrefix, groups.DynamicKeyPrefix, groups.EarlyKeyPrefix} {
		if strings.HasPrefix(s.IdempotencyKey, reserved) {
			return Invalid(f("idempotency_key"), "the prefix %q is reserved", reserved)
		}
	}
	if len(s.Metadata) > maxMetadata {
		return Invalid(f("metadata"), "at most %d bytes", maxMetadata)
	}
	if s.ExpectedTokens != nil && *s.ExpectedTokens < 0 {
		return Invalid(f("expected_tokens"), "must not be negative, got %d", *s.ExpectedTokens)
	}
	if s.Priority != nil && (*s.Priority < 0 || *s.Priority > maxPriority) {
		return Invalid(f("priority"), "must be between 0 and %d, got %d", maxPriority, *s.Priority)
	}
	for _, reason := range slices.Sorted(maps.Keys(s.RetryBudget)) {
		if msg := config.CheckRetryBudget(reason, s.RetryBudget[reason]); msg != "" {
			return Invalid(f("retry_budget."+reason), "%s", msg)
		}
	}
	if s.RetryDeadline != nil && (*s.RetryDeadline <= 0 || time.Duration(*s.RetryDeadline) > MaxTimeout*(config.MaxRetryBudget+1)) {
		return Invalid(f("retry_deadline"), "must be positive and at most %s", MaxTimeout*(config.MaxRetryBudget+1))
	}
	if s.MaxStaleness != nil && (*s.MaxStaleness < 0 || *s.MaxStaleness > maxStaleness) {
		return Invalid(f("max_staleness"), "must be between 0 and %d, got %d", maxStaleness, *s.MaxStaleness)
	}
	if s.StaleMode != "" && !slices.Contains(pipeline.StaleModes, s.StaleMode) {
		return Invalid(f("stale_mode"), "must be one of %s, got %q", strings.Join(pipeline.StaleModes, ", "), s.StaleMode)
	}
	switch s.IncompleteGroup {
	case "", "return", "drop":
	default:
		return Invalid(f("incomplete_group"), `must be "return" or "drop", got %q`, s.IncompleteGroup)
	}
	if e := s.EarlyStopMinUsable; e != nil {
		n := 1
		if s.N != nil {
			n = *s.N
		}
		if *e < 1 || *e > n {
			return Invalid(f("early_stop_min_usable"), "must be between 1 and the number of samples (%d), got %d", n, *e)
		}
	}
	return nil
}

// AckRequest is POST /v1/results/ack.
type AckRequest struct {
	IDs []string `json:"ids"`
}

// CancelManyRequest is POST /v1/rollouts:cancel: one of a group, the
// rollouts of older policies, or all.
type CancelManyRequest struct {
	GroupID string `json:"group_id"`
	// DynamicID names a dynamic-sampling batch (rollouts:batch's answer).
	DynamicID           string `json:"dynamic_id"`
	BeforePolicyVersion *int64 `json:"before_policy_version"`
	All                 bool   `json:"all"`
}

// PolicyRequest is PUT /v1/policy and POST /v1/policy:resume.
type PolicyRequest struct {
	Version *int64 `json:"version"`
}

// PauseRequest is POST /v1/policy:pause.
type PauseRequest struct {
	Mode     string   `json:"mode"`
	TimeoutS *float64 `json:"timeout_s"`
}

// EvaluateRequest is POST /v1/evaluate: a response scored as the domain
// scores a rollout's.
type EvaluateRequest struct {
	Domain   string          `json:"domain"`
	Task     json.RawMessage `json:"task"`
	Response *string         `json:"response"`
}

// NodeRolloutsRequest is POST /v1/node/rollouts.
type NodeRolloutsRequest struct {
	Rollouts []pipeline.Assigned `json:"rollouts"`
}
