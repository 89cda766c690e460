package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorilla/mux"
	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/core/gateway/session"
	"github.com/prorl/prorl/core/trajectory"
)

// parse runs a provider's decoding and conversion, as its handler does.
func parse(kind, body string) (session.Call, *apiError) {
	g := New(hclog.NewNullLogger(), 1<<20)
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	w := httptest.NewRecorder()
	switch kind {
	case "chat":
		var q chatRequest
		if e := g.decode(w, r, &q); e != nil {
			return session.Call{}, e
		}
		return q.call()
	case "messages":
		var q messagesRequest
		if e := g.decode(w, r, &q); e != nil {
			return session.Call{}, e
		}
		return q.call()
	default:
		var q responsesRequest
		if e := g.decode(w, r, &q); e != nil {
			return session.Call{}, e
		}
		c, _, e := q.call()
		return c, e
	}
}

// brief is a conversation in one line: role:content, calls as name(args).
func brief(msgs []trajectory.Message) string {
	var parts []string
	for _, m := range msgs {
		s := m.Role + ":" + m.Content
		for _, c := range m.ToolCalls {
			s += "+" + c.Function.Name + c.Function.Arguments
		}
		if m.ToolCallID != "" {
			s += "@" + m.ToolCallID
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " | ")
}

func TestRequests(t *testing.T) {
	cases := []struct {
		name, kind, body string
		want             string // brief of the messages, or the error's param after "!"
		tools            int
	}{
		{"chat text", "chat", `{"model":"m","messages":[{"role":"developer","content":"sys"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`,
			"system:sys | user:a\nb", 0},
		{"chat tool round", "chat", `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},{"role":"tool","tool_call_id":"c1","content":"r"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`,
			`user:q | assistant:+f{"x":1} | tool:r@c1`, 1},
		{"chat tool_choice none hides the tools", "chat", `{"messages":[{"role":"user","content":"q"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`, "user:q", 0},
		{"chat n", "chat", `{"messages":[{"role":"user","content":"q"}],"n":3}`, "!n", 0},
		{"chat image", "chat", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, "!messages[0].content[0].type", 0},
		{"chat bad role", "chat", `{"messages":[{"role":"robot","content":"q"}]}`, "!messages[0].role", 0},
		{"chat prefill", "chat", `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a"}]}`, "!messages[1].role", 0},
		{"chat wrong type", "chat", `{"messages":"q"}`, "!messages", 0},
		{"chat json_schema", "chat", `{"messages":[{"role":"user","content":"q"}],"response_format":{"type":"json_schema"}}`, "!response_format", 0},
		{"chat custom tool", "chat", `{"messages":[{"role":"user","content":"q"}],"tools":[{"type":"custom","custom":{"name":"x"}}]}`, "!tools[0].type", 0},
		{"chat unknown fields pass", "chat", `{"messages":[{"role":"user","content":"q"}],"store":false,"metadata":{"a":"b"},"prompt_cache_key":"k"}`, "user:q", 0},
		{"messages system and tool result", "messages", `{"max_tokens":10,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"x"},{"type":"text","text":"a"},{"type":"tool_use","id":"t1","name":"f","input":{"x":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"r"}]},{"type":"text","text":"more"}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}]}`,
			`system:s | user:q | assistant:a+f{"x":1} | tool:r@t1 | user:more`, 1},
		{"messages without max_tokens", "messages", `{"messages":[{"role":"user","content":"q"}]}`, "!max_tokens", 0},
		{"messages image", "messages", `{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`, "!messages[0].content[0].type", 0},
		{"messages server tool left out", "messages", `{"max_tokens":1,"messages":[{"role":"user","content":"q"}],"tools":[{"type":"web_search_20250305","name":"web_search"},{"name":"f","input_schema":{}}]}`, "user:q", 1},
		{"messages prefill", "messages", `{"max_tokens":1,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"{"}]}`, "!messages[1].role", 0},
		{"responses string input", "responses", `{"input":"q","instructions":"s"}`, "system:s | user:q", 0},
		{"responses items", "responses", `{"input":[{"role":"user","content":"q"},{"type":"reasoning","id":"rs","summary":[{"type":"summary_text","text":"t"}]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a"}]},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"r"}],"tools":[{"type":"function","name":"f","parameters":{}}]}`,
			`user:q | assistant:a+f{} | tool:r@c1`, 1},
		{"responses namespace flattened, hosted tools left out", "responses", `{"input":"q","tools":[{"type":"web_search","external_web_access":true},{"type":"namespace","name":"ns","tools":[{"type":"function","name":"a"},{"type":"function","name":"b"}]}]}`, "user:q", 2},
		{"responses custom tool", "responses", `{"input":"q","tools":[{"type":"custom","name":"apply_patch"}]}`, "!tools[0].type", 0},
		{"responses previous id", "responses", `{"input":"q","previous_response_id":"resp_1"}`, "!previous_response_id", 0},
		{"responses unknown item", "responses", `{"input":[{"type":"local_shell_call"}]}`, "!input[0].type", 0},
		{"responses ends in a call", "responses", `{"input":[{"role":"user","content":"q"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]}`, "!input[1]", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, e := parse(tc.kind, tc.body)
			if want, ok := strings.CutPrefix(tc.want, "!"); ok {
				if e == nil || e.param != want || e.status != http.StatusBadRequest {
					t.Fatalf("want a 400 naming %q, got %+v", want, e)
				}
				return
			}
			if e != nil {
				t.Fatalf("refused: %+v", e)
			}
			if got := brief(c.Messages); got != tc.want {
				t.Fatalf("messages\n got %s\nwant %s", got, tc.want)
			}
			if len(c.Tools) != tc.tools {
				t.Fatalf("%d tools", len(c.Tools))
			}
		})
	}
}

// Unknown or finished sessions and wrong keys are refused in the shape of
// the API called, before anything reaches a backend.
func TestSessionLookup(t *testing.T) {
	g := New(hclog.NewNullLogger(), 1<<20)
	r := mux.NewRouter()
	g.Register(r, nil)
	srv := httptest.NewServer(r)
	defer srv.Close()
	g.Attach(session.NewSession(session.Config{ID: "r-ab", Key: "secret", Model: "m"}))
	cases := []struct {
		path, key, anthropic string
		status               int
		errType              string
	}{
		{"/gateway/r-00/v1/chat/completions", "secret", "", 404, "invalid_request_error"},
		{"/gateway/r-00/v1/messages", "secret", "2023-06-01", 404, "not_found_error"},
		{"/gateway/r-ab/v1/chat/completions", "wrong", "", 401, "invalid_request_error"},
		{"/gateway/r-ab/v1/messages", "wrong", "2023-06-01", 401, "authentication_error"},
		{"/gateway/v1/chat/completions", "nobody", "", 404, "invalid_request_error"},
		{"/gateway/r-ab/v1/embeddings", "secret", "", 404, "invalid_request_error"},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+tc.path, strings.NewReader(`{}`))
		if tc.anthropic != "" {
			req.Header.Set("x-api-key", tc.key)
			req.Header.Set("anthropic-version", tc.anthropic)
		} else {
			req.Header.Set("Authorization", "Bearer "+tc.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Fatalf("%s: status %d", tc.path, resp.StatusCode)
		}
		e, _ := body["error"].(map[string]any)
		if e["type"] != tc.errType || (tc.anthropic != "" && body["type"] != "error") || (tc.anthropic == "" && e["message"] == nil) {
			t.Fatalf("%s: body %v", tc.path, body)
		}
	}
	// The session by its key alone.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/gateway/v1/models", nil)
	req.Header.Set("Authorization", "Bearer secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", err, resp.Status)
	}
	resp.Body.Close()
	g.Remove("r-ab")
	resp, _ = http.DefaultClient.Do(req)
	if resp.StatusCode != 404 {
		t.Fatalf("a removed session: %d", resp.StatusCode)
	}
	resp.Body.Close()
}

// FuzzRequests: no request body makes a provider's decoding panic, and
// every refusal names a 4xx.
func FuzzRequests(f *testing.F) {
	for _, s := range []string{`{"messages":[{"role":"user","content":"q"}]}`, `{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","content":[]}]}]}`,
		`{"input":[{"type":"function_call_output","output":[{"type":"input_text","text":"x"}]}]}`, `{"messages":[{"role":"assistant","tool_calls":[{}]}]}`} {
		for _, k := range []string{"chat", "messages", "responses"} {
			f.Add(k, s)
		}
	}
	f.Fuzz(func(t *testing.T, kind, body string) {
		_, e := parse(kind, body)
		if e != nil && (e.status < 400 || e.status >= 500) {
			t.Fatalf("status %d", e.status)
		}
	})
}
