package sdktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sync"
	"testing"

	"github.com/prorl/prorl/sdk"
	pb "github.com/prorl/prorl/sdk/proto"
	"github.com/prorl/prorl/sdk/schema"
	"google.golang.org/protobuf/proto"
)

// Case is one sample task with a final response that must earn reward 1 and
// one that must not. A domain whose reward comes from what its tools saw
// (per-rollout state) gives the tool calls to play before each: the right
// and the wrong answer are then each scored in a rollout of their own.
type Case struct {
	Name  string
	Task  json.RawMessage
	Right string
	Wrong string
	// RightCalls and WrongCalls are played (Play) before Right and Wrong.
	RightCalls, WrongCalls []Call
}

// Suite is what a domain gives the conformance suite.
type Suite struct {
	// Domain is served in-process; or Command, a plugin in any language
	// (its argv), is started as its own process the way the host starts it.
	Domain  sdk.Domain
	Command []string
	// Config is the [plugins.NAME.config] table as JSON; nil means {}.
	Config json.RawMessage
	Cases  []Case
	// BadTasks must be refused by Prepare with an invalid_task diagnostic.
	BadTasks []json.RawMessage
	// Host serves the plugin's host services; nil attaches a FakeHost,
	// which runs commands unisolated in a temporary directory.
	Host pb.HostServicesServer
}

// Conformance runs the checks every domain must pass, over real gRPC.
func Conformance(t *testing.T, s Suite) {
	t.Helper()
	if len(s.Cases) == 0 {
		t.Fatal("conformance needs at least one case")
	}
	hs := s.Host
	if hs == nil {
		hs = NewFakeHost(t)
	}
	var h *Harness
	if len(s.Command) > 0 {
		h = StartCommand(t, s.Command, hs)
	} else {
		h = StartWithHost(t, s.Domain, hs)
	}
	ctx := context.Background()
	cfg := s.Config
	if cfg == nil {
		cfg = json.RawMessage("{}")
	}
	var info *pb.DomainInfo

	t.Run("info", func(t *testing.T) { info = checkInfo(ctx, t, h, s) })
	if info == nil {
		t.FailNow()
	}

	t.Run("configure", func(t *testing.T) {
		r, err := h.Configure(ctx, cfg)
		if err != nil || len(r.Diagnostics) > 0 {
			t.Fatalf("Configure: %v %v", err, r.GetDiagnostics())
		}
	})

	for i, c := range s.Cases {
		name := c.Name
		if name == "" {
			name = fmt.Sprintf("case%d", i)
		}
		t.Run(name, func(t *testing.T) { checkCase(ctx, t, h, info, fmt.Sprintf("conf-%d", i), c) })
	}

	t.Run("batches", func(t *testing.T) { checkBatches(ctx, t, h, s) })

	t.Run("bad tasks", func(t *testing.T) { checkBadTasks(ctx, t, h, s) })
}

func containsU32(xs []uint32, v uint32) bool {
	for _, x := range xs {
		if x == v {
			return true
		}
	}
	return false
}

func hasTool(info *pb.DomainInfo, name string) bool {
	for _, t := range info.Tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// checkDescribe runs "BINARY describe", which admins use to inspect a plugin
// without a host, and compares it with what the plugin serves.
func checkDescribe(t *testing.T, argv []string, info *pb.DomainInfo) {
	out, err := exec.Command(argv[0], append(argv[1:], "describe")...).Output()
	if err != nil {
		t.Errorf("%v describe: %v", argv, err)
		return
	}
	var d struct {
		Name        string   `json:"name"`
		APIVersions []uint32 `json:"api_versions"`
		Tools       []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(out, &d); err != nil {
		t.Errorf("describe: not JSON: %v\n%s", err, out)
		return
	}
	if d.Name != info.Name || len(d.Tools) != len(info.Tools) || !containsU32(d.APIVersions, sdk.APIVersion) {
		t.Errorf("describe says %s with %d tools, api %v; the plugin serves %s with %d tools", d.Name, len(d.Tools), d.APIVersions, info.Name, len(info.Tools))
	}
}

// checkBatches: PrepareBatch and EvaluateBatch answer each request once, by
// its index, exactly as the unary call answers the same request (the
// reference here is the plugin's own unary path). The tasks differ, so an
// answer given to the wrong index shows.
func checkBatches(ctx context.Context, t *testing.T, h *Harness, s Suite) {
	var preps []*pb.PrepareRequest
	var evals []*pb.EvaluateRequest
	for i, c := range s.Cases {
		preps = append(preps, &pb.PrepareRequest{RolloutId: fmt.Sprintf("batch-%d", i), TaskJson: c.Task})
	}
	for i, b := range append([]json.RawMessage{json.RawMessage(`{}`), json.RawMessage("{not json")}, s.BadTasks...) {
		preps = append(preps, &pb.PrepareRequest{RolloutId: fmt.Sprintf("batch-bad-%d", i), TaskJson: b})
	}
	want := make([]*pb.PrepareResponse, len(preps))
	for i, r := range preps {
		var err error
		if want[i], err = h.Client.Prepare(ctx, r); err != nil {
			t.Fatalf("Prepare: %v", err)
		}
	}
	got := make([]*pb.PrepareResponse, len(preps))
	st, err := h.Client.PrepareBatch(ctx, &pb.PrepareBatchRequest{Requests: preps})
	if err != nil {
		t.Fatalf("PrepareBatch: %v", err)
	}
	recvAll(t, "PrepareBatch", len(preps), func() (uint32, error) {
		it, err := st.Recv()
		if err == nil && int(it.Index) < len(got) {
			got[it.Index] = it.Response
		}
		return it.GetIndex(), err
	})
	for i := range preps {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("PrepareBatch item %d (task %s) = %v; the unary Prepare = %v", i, preps[i].TaskJson, got[i], want[i])
		}
	}
	for i, c := range s.Cases {
		if len(want[i].GetDiagnostics()) > 0 || c.RightCalls != nil || c.WrongCalls != nil {
			continue // scored from what tools saw: Play covers it
		}
		for k, resp := range []string{c.Right, c.Wrong, ""} {
			r := &pb.EvaluateRequest{RolloutId: preps[i].RolloutId, TaskJson: c.Task, FinalResponse: resp, EndReason: "finish"}
			if want[i].EvalSandbox != nil {
				r.EvalSandboxId = fmt.Sprintf("%s-batch-eval-%d", r.RolloutId, k)
			}
			evals = append(evals, r)
		}
	}
	wantE := make([]*pb.EvaluateResponse, len(evals))
	for i, r := range evals {
		u := proto.Clone(r).(*pb.EvaluateRequest)
		if u.EvalSandboxId != "" {
			u.EvalSandboxId += "-unary"
		}
		if wantE[i], err = h.Client.Evaluate(ctx, u); err != nil {
			t.Fatalf("Evaluate: %v", err)
		}
	}
	gotE := make([]*pb.EvaluateResponse, len(evals))
	es, err := h.Client.EvaluateBatch(ctx, &pb.EvaluateBatchRequest{Requests: evals})
	if err != nil {
		t.Fatalf("EvaluateBatch: %v", err)
	}
	recvAll(t, "EvaluateBatch", len(evals), func() (uint32, error) {
		it, err := es.Recv()
		if err == nil && int(it.Index) < len(gotE) {
			gotE[it.Index] = it.Response
		}
		return it.GetIndex(), err
	})
	for i := range evals {
		if !proto.Equal(gotE[i], wantE[i]) {
			t.Errorf("EvaluateBatch item %d (%q) = %v; the unary Evaluate = %v", i, evals[i].FinalResponse, gotE[i], wantE[i])
		}
	}
	for _, r := range preps {
		_, _ = h.Client.Release(ctx, &pb.ReleaseRequest{RolloutId: r.RolloutId})
	}
}

// recvAll reads a batch's stream to its end: every index in [0, n) once.
func recvAll(t *testing.T, op string, n int, recv func() (uint32, error)) {
	seen := make([]bool, n)
	for {
		i, err := recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		if int(i) >= n || seen[i] {
			t.Fatalf("%s answered index %d (of %d) twice or out of range", op, i, n)
		}
		seen[i] = true
	}
	for i, ok := range seen {
		if !ok {
			t.Errorf("%s left out index %d", op, i)
		}
	}
}

// checkInfo checks what the domain says of itself.
func checkInfo(ctx context.Context, t *testing.T, h *Harness, s Suite) *pb.DomainInfo {
	info, err := h.Client.GetInfo(ctx, &pb.GetInfoRequest{})
	if err != nil {
		t.Fatalf("GetInfo: %v", err)
	}
	if info.Name == "" || info.Version == "" {
		t.Errorf("name %q and version %q must be set", info.Name, info.Version)
	}
	if !containsU32(info.ApiVersions, sdk.APIVersion) {
		t.Errorf("api_versions %v lack %d", info.ApiVersions, sdk.APIVersion)
	}
	seen := map[string]bool{}
	for _, tool := range info.Tools {
		if tool.Name == "" || seen[tool.Name] {
			t.Errorf("tool name %q empty or repeated", tool.Name)
		}
		seen[tool.Name] = true
		var schema struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(tool.ParametersJson, &schema); err != nil || schema.Type != "object" {
			t.Errorf("tool %s: parameters must be a JSON Schema object: %s", tool.Name, tool.ParametersJson)
		}
		if tool.Description == "" {
			t.Errorf("tool %s has no description", tool.Name)
		}
	}
	if len(s.Command) > 0 {
		checkDescribe(t, s.Command, info)
	}
	return info
}

// checkCase plays one case: its episode, every tool with valid and
// malformed arguments, finish, and the scores of right, wrong and empty
// answers (or the case's plays).
func checkCase(ctx context.Context, t *testing.T, h *Harness, info *pb.DomainInfo, rid string, c Case) {
	p, err := h.Client.Prepare(ctx, &pb.PrepareRequest{RolloutId: rid, TaskJson: c.Task})
	if err != nil || len(p.Diagnostics) > 0 {
		t.Fatalf("Prepare: %v %v", err, p.GetDiagnostics())
	}
	if len(p.Messages) == 0 || p.Messages[len(p.Messages)-1].Role != "user" {
		t.Errorf("episode must end with a user message: %v", p.Messages)
	}
	// Setup, then every tool with arguments its schema accepts: the
	// domain may answer with an error observation (the values are
	// arbitrary) but must not fail the rollout as internal.
	sandbox := ""
	if p.Sandbox != nil {
		sandbox = rid
	}
	if su, err := h.Client.Setup(ctx, &pb.SetupRequest{RolloutId: rid, TaskJson: c.Task, SandboxId: sandbox}); err != nil || len(su.Diagnostics) > 0 {
		t.Errorf("Setup: %v %v", err, su.GetDiagnostics())
	}
	for _, tool := range info.Tools {
		if tool.Name == "finish" {
			continue
		}
		args := schema.Example(tool.ParametersJson)
		r, err := h.Client.CallTool(ctx, &pb.CallToolRequest{RolloutId: rid, TaskJson: c.Task, SandboxId: sandbox, Call: &pb.ToolCall{Name: tool.Name, ArgumentsJson: args}})
		if err != nil || slices.ContainsFunc(r.GetDiagnostics(), func(d *pb.Diagnostic) bool { return d.Code == sdk.CodeInternal }) {
			t.Errorf("tool %s(%s) with valid arguments: %v %v", tool.Name, args, err, r.GetDiagnostics())
		}
	}
	r, err := h.Client.CallTool(ctx, &pb.CallToolRequest{RolloutId: rid, TaskJson: c.Task, Call: &pb.ToolCall{Name: "no_such_tool", ArgumentsJson: []byte("{}")}})
	if err != nil || !r.IsError || len(r.Diagnostics) > 0 {
		t.Errorf("unknown tool must be an error observation: %v %v", err, r)
	}
	for _, tool := range info.Tools {
		r, err := h.Client.CallTool(ctx, &pb.CallToolRequest{RolloutId: rid, TaskJson: c.Task, Call: &pb.ToolCall{Name: tool.Name, ArgumentsJson: []byte(`{"definitely_not_an_argument": 1`)}})
		if err != nil || !r.IsError {
			t.Errorf("tool %s: malformed arguments must be an error observation: %v %v", tool.Name, err, r)
		}
	}
	if hasTool(info, "finish") {
		args, _ := json.Marshal(map[string]string{"message": c.Right})
		r, err := h.Client.CallTool(ctx, &pb.CallToolRequest{RolloutId: rid, TaskJson: c.Task, Call: &pb.ToolCall{Name: "finish", ArgumentsJson: args}})
		if err != nil || !r.Done || r.FinalResponse != c.Right {
			t.Errorf("finish must end the episode with its message: %v %+v", err, r)
		}
	}
	evals := 0
	// A fresh evaluation sandbox per call, when the episode asks for one.
	evalSandbox := func() string {
		if p.EvalSandbox == nil {
			return ""
		}
		evals++
		return fmt.Sprintf("%s-eval-%d", rid, evals)
	}
	eval := func(resp string) *pb.EvaluateResponse {
		e, err := h.Client.Evaluate(ctx, &pb.EvaluateRequest{RolloutId: rid, TaskJson: c.Task, FinalResponse: resp, EndReason: "finish", EvalSandboxId: evalSandbox()})
		if err != nil || len(e.Diagnostics) > 0 {
			t.Fatalf("Evaluate: %v %v", err, e.GetDiagnostics())
		}
		return e
	}
	if c.RightCalls != nil || c.WrongCalls != nil {
		for _, k := range []struct {
			calls []Call
			final string
			right bool
		}{{c.RightCalls, c.Right, true}, {c.WrongCalls, c.Wrong, false}, {nil, "", false}} {
			p, err := Play(ctx, h, fmt.Sprintf("%s-%v-%d", rid, k.right, len(k.calls)), c.Task, k.calls, k.final)
			switch {
			case err != nil:
				t.Errorf("play: %v", err)
			case k.right && p.Score.Reward != 1:
				t.Errorf("right play %v scored %v", k.calls, p.Score.Reward)
			case !k.right && p.Score.Reward >= 1:
				t.Errorf("wrong play %v scored %v", k.calls, p.Score.Reward)
			}
		}
		_, _ = h.Client.Release(ctx, &pb.ReleaseRequest{RolloutId: rid})
		return
	}
	if e := eval(c.Right); e.Reward != 1 {
		t.Errorf("right answer %q scored %v", c.Right, e.Reward)
	}
	if e := eval(c.Wrong); e.Reward >= 1 {
		t.Errorf("wrong answer %q scored %v", c.Wrong, e.Reward)
	}
	if e := eval(""); e.Reward != 0 {
		t.Errorf("empty answer scored %v", e.Reward)
	}
	// Scoring must be safe to call concurrently and deterministic.
	var wg sync.WaitGroup
	sandboxes := make([]string, 8)
	for k := range sandboxes {
		sandboxes[k] = evalSandbox()
	}
	for k := 0; k < 8; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := h.Client.Evaluate(ctx, &pb.EvaluateRequest{RolloutId: rid, TaskJson: c.Task, FinalResponse: c.Right, EvalSandboxId: sandboxes[k]})
			if err != nil || e.Reward != 1 {
				t.Errorf("concurrent Evaluate: %v %v", err, e)
			}
		}()
	}
	wg.Wait()
	for k := 0; k < 2; k++ {
		if _, err := h.Client.Release(ctx, &pb.ReleaseRequest{RolloutId: rid}); err != nil {
			t.Errorf("Release must be idempotent: %v", err)
		}
	}
}

// checkBadTasks: tasks that are not tasks are invalid_task diagnostics.
func checkBadTasks(ctx context.Context, t *testing.T, h *Harness, s Suite) {
	bad := append([]json.RawMessage{json.RawMessage(`{}`), json.RawMessage(`[1,2]`), json.RawMessage(`"x"`)}, s.BadTasks...)
	for _, b := range bad {
		p, err := h.Client.Prepare(ctx, &pb.PrepareRequest{RolloutId: "bad", TaskJson: b})
		if err != nil {
			t.Errorf("Prepare(%s): transport error %v; domain errors travel as diagnostics", b, err)
			continue
		}
		if len(p.Diagnostics) == 0 || p.Diagnostics[0].Code != sdk.CodeInvalidTask {
			t.Errorf("Prepare(%s) = %v; want an invalid_task diagnostic", b, p.Diagnostics)
		}
	}
	p, err := h.Client.Prepare(ctx, &pb.PrepareRequest{RolloutId: "bad", TaskJson: []byte("{not json")})
	if err != nil || len(p.Diagnostics) == 0 {
		t.Errorf("invalid JSON must be an invalid_task diagnostic: %v %v", err, p)
	}
}
