package session

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prorl/prorl/core/engine"
	"github.com/prorl/prorl/core/tokenizer"
	"github.com/prorl/prorl/core/toolcall"
	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/internal/simllm"
)

// syncBuf is the simulator's request log.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }

// generations reads the simulator's log: prompt ids -> generated ids.
func (s *syncBuf) generations(t *testing.T) map[string][]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]int{}
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var e struct {
			Path    string `json:"path"`
			Request struct {
				Prompt []int `json:"prompt"`
			} `json:"request"`
			Response struct {
				Choices []struct {
					Logprobs struct {
						Tokens []string `json:"tokens"`
					} `json:"logprobs"`
				} `json:"choices"`
			} `json:"response"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		if e.Path != "/v1/completions" || len(e.Response.Choices) == 0 {
			continue
		}
		var ids []int
		for _, tok := range e.Response.Choices[0].Logprobs.Tokens {
			id, err := strconv.Atoi(strings.TrimPrefix(tok, "token_id:"))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		out[key(e.Request.Prompt)] = ids
	}
	return out
}

func key(ids []int) string { b, _ := json.Marshal(ids); return string(b) }

type fixture struct {
	log *syncBuf
	cfg Config
}

func newFixture(t *testing.T, scripts ...simllm.Script) *fixture {
	t.Helper()
	log := &syncBuf{}
	srv := httptest.NewServer(simllm.New(simllm.Options{Scripts: scripts, CorrectRate: 1, Log: log}))
	t.Cleanup(srv.Close)
	c, err := engine.NewClient("vllm", srv.URL, "prorl-sim")
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{log: log, cfg: Config{ID: "r-1", Key: "k", Model: "prorl-sim", Gen: c, BackendID: "b1", Tok: c, Splicer: tokenizer.NewSplicer(),
		Parser: toolcall.Hermes{}, MaxTokensPerCall: 256, MaxTotalTokens: 4096, Temperature: 1, TopP: 1}}
}

// exact checks every trace against the backend's log: each loss-masked span
// is what the backend generated for exactly the tokens before it.
func (f *fixture) exact(t *testing.T, o *Outcome) {
	t.Helper()
	gens := f.log.generations(t)
	n := 0
	for ti, tr := range o.Traces {
		ids := append(slices.Clone(tr.PromptIDs), tr.ResponseIDs...)
		mask := append(make([]int8, len(tr.PromptIDs)), tr.LossMask...)
		for i := 0; i < len(ids); {
			if mask[i] != 1 {
				i++
				continue
			}
			j := i
			for j < len(ids) && mask[j] == 1 {
				j++
			}
			got, ok := gens[key(ids[:i])]
			if !ok || !slices.Equal(got, ids[i:j]) {
				t.Fatalf("trace %d: the span at %d is not what the backend generated for the tokens before it", ti, i)
			}
			n++
			i = j
		}
	}
	if n != len(o.Turns) {
		t.Fatalf("%d generated spans, %d calls", n, len(o.Turns))
	}
}

var calcTool = []trajectory.Tool{{Type: "function", Function: trajectory.ToolFunction{Name: "calc", Description: "compute",
	Parameters: json.RawMessage(`{"type":"object","properties":{"expr":{"type":"string"}},"required":["expr"]}`)}}}

func user(s string) trajectory.Message { return trajectory.Message{Role: "user", Content: s} }

// The harness's echo of a reply, as harnesses really change it.
type echo func(trajectory.Message) trajectory.Message

func unchanged(m trajectory.Message) trajectory.Message { return m }

func TestMerging(t *testing.T) {
	cases := []struct {
		name   string
		echo   echo
		tools2 []trajectory.Tool
		traces int
	}{
		{"sent back unchanged", unchanged, calcTool, 1},
		{"reasoning dropped, ids renumbered, arguments re-serialised", func(m trajectory.Message) trajectory.Message {
			m.ReasoningContent = ""
			for i := range m.ToolCalls {
				m.ToolCalls[i].ID = "toolu_" + strconv.Itoa(i)
				var v any
				_ = json.Unmarshal([]byte(m.ToolCalls[i].Function.Arguments), &v)
				b, _ := json.MarshalIndent(v, "", "    ")
				m.ToolCalls[i].Function.Arguments = string(b)
			}
			return m
		}, calcTool, 1},
		{"text edited", func(m trajectory.Message) trajectory.Message { m.Content += " "; return m }, calcTool, 2},
		{"a call dropped", func(m trajectory.Message) trajectory.Message { m.ToolCalls = nil; return m }, calcTool, 2},
		{"arguments changed", func(m trajectory.Message) trajectory.Message {
			m.ToolCalls[0].Function.Arguments = `{"expr":"other"}`
			return m
		}, calcTool, 2},
		{"tools changed", unchanged, nil, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			s := NewSession(f.cfg)
			ctx := context.Background()
			first := []trajectory.Message{{Role: "system", Content: "You are helpful."}, user("Unscripted question")}
			r1, err := s.Complete(ctx, Call{Messages: first, Tools: calcTool})
			if err != nil {
				t.Fatal(err)
			}
			if len(r1.Message.ToolCalls) != 1 || r1.FinishReason != "tool_calls" {
				t.Fatalf("the simulator explores the offered tool first: %+v", r1)
			}
			second := append(slices.Clone(first), tc.echo(r1.Message),
				trajectory.Message{Role: "tool", ToolCallID: r1.Message.ToolCalls[0].ID, Content: "4"})
			r2, err := s.Complete(ctx, Call{Messages: second, Tools: tc.tools2})
			if err != nil {
				t.Fatal(err)
			}
			if r2.Merged != (tc.traces == 1) {
				t.Fatalf("merged %v, want %v", r2.Merged, tc.traces == 1)
			}
			s.Close()
			o := s.Outcome()
			if len(o.Traces) != tc.traces || len(o.Turns) != 2 {
				t.Fatalf("%d traces, %d turns", len(o.Traces), len(o.Turns))
			}
			f.exact(t, o)
			if tc.traces == 1 && o.Metrics["gateway_merge_rate"] != 1 {
				t.Fatalf("merge rate %v", o.Metrics["gateway_merge_rate"])
			}
			last := o.Traces[len(o.Traces)-1]
			want := len(first)
			if tc.traces == 2 {
				want = len(second)
			}
			if len(last.PromptMessages) != want {
				t.Fatalf("prompt messages %d", len(last.PromptMessages))
			}
		})
	}
}

// A retried call whose history is older than the trace's (the harness lost
// a reply) cannot extend it: it starts its own trace.
func TestRetryOfAnOlderPrefix(t *testing.T) {
	f := newFixture(t)
	s := NewSession(f.cfg)
	ctx := context.Background()
	first := []trajectory.Message{user("Unscripted question")}
	r1, _ := s.Complete(ctx, Call{Messages: first, Tools: calcTool})
	second := append(slices.Clone(first), r1.Message, trajectory.Message{Role: "tool", ToolCallID: "x", Content: "4"})
	if r, err := s.Complete(ctx, Call{Messages: second, Tools: calcTool}); err != nil || !r.Merged {
		t.Fatalf("%v %+v", err, r)
	}
	if r, err := s.Complete(ctx, Call{Messages: second, Tools: calcTool}); err != nil || r.Merged {
		t.Fatalf("a retry of the same call merged into the trace it already extended: %v %+v", err, r)
	}
	s.Close()
	o := s.Outcome()
	if len(o.Traces) != 2 {
		t.Fatalf("%d traces", len(o.Traces))
	}
	f.exact(t, o)
}

func TestBudgets(t *testing.T) {
	f := newFixture(t)
	cfg := f.cfg
	cfg.MaxCalls = 1
	s := NewSession(cfg)
	ctx := context.Background()
	msgs := []trajectory.Message{user("Unscripted question")}
	if r, err := s.Complete(ctx, Call{Messages: msgs}); err != nil || r.FinishReason != "stop" {
		t.Fatalf("%v %+v", err, r)
	}
	before := len(f.log.generations(t))
	r, err := s.Complete(ctx, Call{Messages: msgs})
	if err != nil || r.FinishReason != "length" || r.CompletionTokens != 0 {
		t.Fatalf("past the turn budget: %v %+v", err, r)
	}
	if len(f.log.generations(t)) != before {
		t.Fatal("a call past the budget reached the backend")
	}
	// A trace that is full: no room left for a single token.
	cfg = f.cfg
	cfg.MaxTotalTokens = 10
	s2 := NewSession(cfg)
	if r, err := s2.Complete(ctx, Call{Messages: msgs}); err != nil || r.FinishReason != "length" || r.PromptTokens < 10 {
		t.Fatalf("past the token budget: %v %+v", err, r)
	}
	s.Close()
	s2.Close()
	if o := s.Outcome(); o.Metrics["gateway_budget_stops"] != 1 || len(o.Traces) != 1 {
		t.Fatalf("%v", o.Metrics)
	}
	if _, err := s.Complete(ctx, Call{Messages: msgs}); !errors.Is(err, ErrClosed) {
		t.Fatalf("a call after close: %v", err)
	}
}

// Calls in parallel (a harness's sub-agents) each get their own trace or
// merge, never a torn one.
func TestParallelCalls(t *testing.T) {
	f := newFixture(t)
	s := NewSession(f.cfg)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msgs := []trajectory.Message{user("Unscripted question " + strconv.Itoa(i%2))}
			r, err := s.Complete(context.Background(), Call{Messages: msgs, Tools: calcTool})
			if err != nil {
				t.Error(err)
				return
			}
			msgs = append(msgs, r.Message, trajectory.Message{Role: "tool", Content: "4", ToolCallID: "c"})
			if _, err := s.Complete(context.Background(), Call{Messages: msgs, Tools: calcTool}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	s.Close()
	o := s.Outcome()
	if len(o.Turns) != 16 {
		t.Fatalf("%d turns", len(o.Turns))
	}
	f.exact(t, o)
}

// Closing a session cancels a call in flight: it gets ErrClosed and leaves
// nothing half-recorded; Close returns once it is gone.
func TestCloseCancelsInFlight(t *testing.T) {
	log := &syncBuf{}
	srv := httptest.NewServer(simllm.New(simllm.Options{TokenLatency: 50 * time.Millisecond, Log: log}))
	defer srv.Close()
	c, err := engine.NewClient("vllm", srv.URL, "prorl-sim")
	if err != nil {
		t.Fatal(err)
	}
	s := NewSession(Config{ID: "r-1", Key: "k", Gen: c, Tok: c, Splicer: tokenizer.NewSplicer(), Parser: toolcall.Hermes{},
		MaxTokensPerCall: 256, MaxTotalTokens: 4096, Temperature: 1, TopP: 1})
	errc := make(chan error, 1)
	go func() {
		_, err := s.Complete(context.Background(), Call{Messages: []trajectory.Message{user("Unscripted question")}})
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond) // generating: 50 ms a token
	s.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("the call in flight: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close returned, the call did not")
	}
	if o := s.Outcome(); len(o.Turns) != 0 || len(o.Traces) != 0 || o.Metrics["gateway_calls"] != 0 {
		t.Fatalf("a cancelled call was recorded: %+v", o.Metrics)
	}
}
