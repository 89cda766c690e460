package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prorl/prorl/core/agent"
	"github.com/prorl/prorl/core/groups"
	"github.com/prorl/prorl/core/lengthhist"
	"github.com/prorl/prorl/core/pluginhost"
	"github.com/prorl/prorl/core/sandbox"
	"github.com/prorl/prorl/core/sessions"
	"github.com/prorl/prorl/core/trajectory"
)

// Request creates one rollout. It is persisted as JSON before the
// submission is acknowledged.
type Request struct {
	GroupID string `json:"group_id"`
	Index   int    `json:"index"`
	// GroupSize is how many rollouts the group was submitted with (for
	// routings that place a group together).
	GroupSize int `json:"group_size,omitempty"`
	// ExpectedTokens is the trainer's estimate of the tokens it generates.
	ExpectedTokens int `json:"expected_tokens,omitempty"`
	// LearnedTokens, without ExpectedTokens, is what the task's earlier
	// rollouts generated (lengthhist), filled in when it was submitted.
	LearnedTokens int                 `json:"learned_tokens,omitempty"`
	Domain        string              `json:"domain"`
	Task          json.RawMessage     `json:"task"`
	Sampling      trajectory.Sampling `json:"sampling"`
	MaxTurns      int                 `json:"max_turns,omitempty"`
	Timeout       time.Duration       `json:"timeout,omitempty"`
	Metadata      json.RawMessage     `json:"metadata,omitempty"`
	// MessageSpans asks for each initial message's own token span (ProRL compatibility).
	MessageSpans bool `json:"message_spans,omitempty"`
	// Priority orders the start of queued rollouts: higher first (0-100).
	Priority int `json:"priority,omitempty"`
	// EarlyStopMin cancels the rest of the group once this many of its
	// rollouts finished usable (0: off).
	EarlyStopMin int `json:"early_stop_min,omitempty"`
	// EarlyKey names the early-stop group's marks in the store: its first
	// rollout's id (set at submission).
	EarlyKey string `json:"early_key,omitempty"`
	// Dynamic names the dynamic-sampling batch the rollout's group belongs
	// to (DAPO): once DynamicK of its groups finished informative (their
	// usable rewards differ), the batch's unfinished rollouts are cancelled.
	Dynamic  string `json:"dynamic,omitempty"`
	DynamicK int    `json:"dynamic_k,omitempty"`
	// Agent is who runs the run stage: "" the host's agent loop, "gateway"
	// an agent outside the host that calls the gateway with SessionKey
	// until the session is closed.
	Agent      string `json:"agent,omitempty"`
	SessionKey string `json:"session_key,omitempty"`
	// Harness names the agent harness (config [harnesses.NAME]) that runs
	// the gateway session in the task's sandbox; Instruction is the task
	// as it is told (default: the domain's last user message), Workdir
	// where it starts.
	Harness     string `json:"harness,omitempty"`
	Instruction string `json:"instruction,omitempty"`
	Workdir     string `json:"workdir,omitempty"`
	// HarnessImage is the sandbox image when the domain has no sandbox.
	HarnessImage string `json:"harness_image,omitempty"`
	// Retry, when set, runs the sample again after an infrastructure
	// failure (nil: its first failure is its result).
	Retry *Retry `json:"retry,omitempty"`
	// DropIncomplete: once a sample of the group ends with no trainable
	// result, its group's unfinished samples are cancelled (group_dropped).
	DropIncomplete bool `json:"drop_incomplete,omitempty"`
	// MaxStaleness bounds how many policy versions a sample's oldest token
	// may be behind the policy (nil: unbounded). StaleMode says what a
	// sample past it gets: "restart" (the default: run again as a new
	// attempt while its retry deadline allows) or "mark" (returned with
	// stale set).
	MaxStaleness *int64 `json:"max_staleness,omitempty"`
	StaleMode    string `json:"stale_mode,omitempty"`
}

// Retry is a request's retry policy, fixed at submission.
type Retry struct {
	// Budget is how many more attempts each failure reason may cost.
	Budget map[string]int `json:"budget"`
	// Deadline: no attempt starts or runs later than the sample's first
	// start plus this.
	Deadline time.Duration `json:"deadline"`
}

// Expected is the tokens the rollout is expected to generate: the
// trainer's estimate, else the task's history; 0 if neither is known.
func (rq *Request) Expected() int {
	if rq.ExpectedTokens > 0 {
		return rq.ExpectedTokens
	}
	return rq.LearnedTokens
}

// expectedSource is whose figure Expected is, as an index of
// expectedSources: the trainer's, the history's, or none.
func (rq *Request) expectedSource() int {
	switch {
	case rq.ExpectedTokens > 0:
		return 0
	case rq.LearnedTokens > 0:
		return 1
	}
	return 2
}

// AgentGateway marks a rollout whose agent drives it through the gateway.
const AgentGateway = "gateway"

// NewID returns a new id with a prefix: a strictly increasing count (the
// wall clock's nanoseconds when it is ahead) then random bits. Ids made
// later sort later, so the durable store's pending records and index, keyed
// by id, take a batch's writes on a few B-tree pages at their right edge
// rather than one random page per rollout. Nothing relies on an id being
// secret: a gateway session has its own key.
func NewID(prefix string) string {
	var b [12]byte
	binary.BigEndian.PutUint64(b[:8], nextIDCount())
	_, _ = rand.Read(b[8:])
	return prefix + hex.EncodeToString(b[:])
}

var idCount atomic.Uint64

func nextIDCount() uint64 {
	for {
		last := idCount.Load()
		n := max(last+1, uint64(time.Now().UnixNano()))
		if idCount.CompareAndSwap(last, n) {
			return n
		}
	}
}

// Rollout is one rollout in flight.
type Rollout struct {
	ID      string
	Req     Request
	Attempt int

	submitted time.Time
	done      chan struct{}
	finalized atomic.Bool
	// cancelled is why the rollout was cancelled; nil while it was not.
	cancelled atomic.Pointer[trajectory.Failure]

	mu        sync.Mutex
	stage     string // current or last stage
	inStage   bool
	stageFrom time.Time
	cancel    context.CancelFunc
	remaining time.Duration
	timing    trajectory.Timing
	policy    int64
	backendID string

	// lenKey is the task's key in the pipeline's length history.
	lenKey lengthhist.Key

	// set by stages
	taskID string
	// finishTool is the domain's builtin finish tool (answered by the host).
	finishTool string
	epoch      uint64
	episode    *agent.Episode
	sandboxID  string
	reserved   *sandbox.Reserved
	// evalSandbox is the fresh sandbox Evaluate wants, if any.
	evalSandbox *pluginhost.SandboxSpec
	outcome     *agent.Outcome
	score       *score
	// remote is the result a node reported (coordinator mode).
	remote *trajectory.Result
	// session is a gateway rollout's session.
	session *sessions.Slot
	// attempts are the earlier attempts' ends; started is when this
	// attempt's first stage started (zero while it waits for it).
	attempts []trajectory.Attempt
	started  time.Time
	// oldest is the policy version of the attempt's first generation
	// (noToken before it); restart, when set, is why the attempt is being
	// run again (its tokens went stale).
	oldest  atomic.Int64
	restart atomic.Pointer[trajectory.Failure]
}

// noToken is Rollout.oldest before any generation.
const noToken = math.MinInt64

type score struct {
	reward   float64
	resolved bool
	metrics  map[string]float64
	info     json.RawMessage
}

// Summary is a live rollout as GET /v1/rollouts lists it.
type Summary struct {
	ID          string    `json:"id"`
	GroupID     string    `json:"group_id"`
	Domain      string    `json:"domain"`
	Status      string    `json:"status"`
	Stage       string    `json:"stage"`
	Turn        int       `json:"turn"`
	Backend     string    `json:"backend,omitempty"`
	SubmittedAt time.Time `json:"submitted_at"`
	StageSince  time.Time `json:"stage_since,omitzero"`
	AgeSeconds  float64   `json:"age_seconds"`
	// ExpectedTokens is the trainer's estimate; LearnedTokens, without
	// one, what the task's earlier rollouts generated (Request).
	ExpectedTokens int `json:"expected_tokens,omitempty"`
	LearnedTokens  int `json:"learned_tokens,omitempty"`
}

func (r *Rollout) summary() Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := "queued"
	if r.inStage {
		st = "running"
	}
	turns := 0
	if r.outcome != nil {
		turns = len(r.outcome.Turns)
	}
	return Summary{ID: r.ID, GroupID: r.Req.GroupID, Domain: r.Req.Domain, Status: st, Stage: r.stage, Turn: turns,
		Backend: r.backendID, SubmittedAt: r.submitted, StageSince: r.stageFrom, AgeSeconds: time.Since(r.submitted).Seconds(),
		ExpectedTokens: r.Req.ExpectedTokens, LearnedTokens: r.Req.LearnedTokens}
}

// Done is closed when the rollout's result is stored.
func (r *Rollout) Done() <-chan struct{} { return r.done }

// member is r as its group's rules know it.
func (r *Rollout) member() groups.Member { return r.Req.member(r.ID) }

// member is a rollout of the request, id, as its group's rules know it.
func (rq *Request) member(id string) groups.Member {
	return groups.Member{ID: id, Group: rq.GroupID, Size: rq.GroupSize, Batch: rq.Dynamic, K: rq.DynamicK, EarlyMin: rq.EarlyStopMin, EarlyKey: rq.EarlyKey}
}
