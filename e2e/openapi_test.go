package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
)

// TestOpenAPILive: the host's /openapi.json is a valid OpenAPI 3.1
// document by pb33f's validator, its example requests are accepted by the
// host, and the live requests and answers of every dialect (v1, dashboard,
// ProRL, Polar, errors included) validate against it.
func TestOpenAPILive(t *testing.T) {
	e := newEnv(t, envOpts{staticBackend: true, serverTOML: "token = \"u\"\nadmin_token = \"a\"\n"})
	e.startHost()
	spec := e.do("GET", "/openapi.json", nil) // public, as the health checks
	if spec.code != 200 {
		t.Fatalf("/openapi.json: %d %s", spec.code, spec.body)
	}
	doc, err := libopenapi.NewDocument(spec.body)
	if err != nil {
		t.Fatal(err)
	}
	if v := doc.GetVersion(); v != "3.1.0" {
		t.Fatalf("version %q", v)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, ve := range verrs {
			t.Errorf("document: %s", ve.Error())
		}
		t.FailNow()
	}
	var d struct {
		Paths map[string]map[string]struct {
			RequestBody struct {
				Content map[string]struct {
					Example json.RawMessage `json:"example"`
				} `json:"content"`
			} `json:"requestBody"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(spec.body, &d); err != nil {
		t.Fatal(err)
	}
	example := func(path, method string) json.RawMessage {
		ex := d.Paths[path][method].RequestBody.Content["application/json"].Example
		if len(ex) == 0 {
			t.Fatalf("%s %s has no example", method, path)
		}
		return ex
	}

	// call sends one request and validates it and its answer.
	call := func(method, path string, body any, wantCode int) []byte {
		t.Helper()
		var raw []byte
		switch b := body.(type) {
		case nil:
		case json.RawMessage:
			raw = b
		case string:
			raw = []byte(b)
		default:
			raw, _ = json.Marshal(b)
		}
		req, err := http.NewRequest(method, e.host+path, bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Authorization", "Bearer a")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != wantCode {
			t.Fatalf("%s %s: %d, want %d: %s", method, path, res.StatusCode, wantCode, got)
		}
		// The validator reads both bodies: give it fresh readers.
		vreq, _ := http.NewRequest(method, "http://prorl"+path, bytes.NewReader(raw))
		vreq.Header = req.Header.Clone()
		res.Body = io.NopCloser(bytes.NewReader(got))
		res.Request = vreq
		// A request made to be refused is checked for its answer only.
		ok, verrs := v.ValidateHttpRequestResponse(vreq, res)
		if wantCode >= 400 {
			ok, verrs = v.ValidateHttpResponse(vreq, res)
		}
		if !ok {
			for _, ve := range verrs {
				msg := ve.Error()
				for _, f := range ve.SchemaValidationErrors {
					msg += fmt.Sprintf("\n\t%s: %s", f.FieldPath, f.Reason)
				}
				t.Errorf("%s %s (%d): %s\n\tbody: %.400s", method, path, res.StatusCode, msg, got)
			}
		}
		return got
	}

	// v1: submit the document's own example, wait, read, ack.
	var sub struct {
		GroupID    string   `json:"group_id"`
		RolloutIDs []string `json:"rollout_ids"`
	}
	mustDecode(t, call("POST", "/v1/rollouts", example("/v1/rollouts", "post"), 202), &sub)
	call("GET", "/v1/rollouts", nil, 200)
	call("GET", "/v1/rollouts?status=running", nil, 200)
	for _, id := range sub.RolloutIDs {
		call("GET", "/v1/rollouts/"+id+"?wait=60s", nil, 200)
	}
	call("GET", "/v1/results?group_id="+sub.GroupID+"&wait=5s", nil, 200)
	call("GET", "/v1/ui/rollouts/"+sub.RolloutIDs[0]+"/tokens", nil, 200)
	call("POST", "/v1/results/ack", map[string]any{"ids": sub.RolloutIDs}, 200)
	task := map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}
	var batch struct {
		Groups []struct {
			GroupID    string   `json:"group_id"`
			RolloutIDs []string `json:"rollout_ids"`
		} `json:"groups"`
	}
	mustDecode(t, call("POST", "/v1/rollouts:batch", map[string]any{"requests": []any{map[string]any{"task": task, "n": 2}, map[string]any{"task": task, "n": 2}}}, 202), &batch)
	call("DELETE", "/v1/rollouts/"+batch.Groups[0].RolloutIDs[0], nil, 200)
	call("POST", "/v1/rollouts:cancel", map[string]any{"group_id": batch.Groups[1].GroupID}, 200)
	call("POST", "/v1/evaluate", example("/v1/evaluate", "post"), 200)
	call("GET", "/v1/domains", nil, 200)
	call("GET", "/v1/backends", nil, 200)
	call("GET", "/v1/policy", nil, 200)
	call("PUT", "/v1/policy", map[string]any{"version": 3}, 200)
	call("POST", "/v1/policy:pause", map[string]any{"mode": "drain", "timeout_s": 30}, 200)
	call("POST", "/v1/policy:resume", map[string]any{"version": 4}, 200)
	var sess struct {
		SessionID string `json:"session_id"`
		APIKey    string `json:"api_key"`
	}
	mustDecode(t, call("POST", "/v1/sessions", map[string]any{"task": task}, 201), &sess)
	call("POST", "/v1/sessions/"+sess.SessionID+":close?wait=30s", map[string]any{"reward": 1}, 200)
	call("GET", "/v1/ui/overview", nil, 200)
	call("GET", "/v1/ui/rollouts?limit=5", nil, 200)
	call("POST", "/v1/ui/cancel", map[string]any{"group_id": sub.GroupID}, 200)
	call("GET", "/healthz", nil, 200)
	call("GET", "/readyz", nil, 200)
	call("GET", "/v1/nodes", nil, 404) // a plain host has no registry

	// v1 errors: each in the document's error shape.
	call("POST", "/v1/rollouts", map[string]any{"task": map[string]any{"domain": "math"}, "n": 0}, 422)
	call("POST", "/v1/rollouts", `{"task": {"domain": "math"}, "bogus": 1}`, 400)
	call("GET", "/v1/rollouts/nosuch", nil, 404)
	call("GET", "/v1/results?limit=0", nil, 400)

	// ProRL.
	call("POST", "/start", nil, 200)
	call("GET", "/status", nil, 200)
	call("POST", "/process", map[string]any{
		"instance":        map[string]any{"data_source": "deepscaler", "instance_id": "i-7", "trajectory_id": 3, "prompt": []any{map[string]string{"role": "user", "content": "What is 17 + 25?"}}, "reward_model": map[string]any{"ground_truth": "42"}},
		"sampling_params": map[string]any{"temperature": 1.0, "max_iterations": 4},
	}, 200)
	call("POST", "/process", map[string]any{"instance": map[string]any{"data_source": "nosuch"}, "sampling_params": map[string]any{}}, 400)
	call("POST", "/cancel", map[string]any{"job_id": "nope"}, 200)
	call("POST", "/stop", nil, 200)

	// Polar: the document's example task, then its status and sessions.
	call("POST", "/rollout/task/submit", example("/rollout/task/submit", "post"), 200)
	deadline := time.Now().Add(60 * time.Second)
	for {
		var st struct {
			Status string `json:"status"`
		}
		mustDecode(t, call("GET", "/rollout/task/t-1", nil, 200), &st)
		if st.Status != "running" || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	call("GET", "/rollout/status", nil, 200)
	call("GET", "/tasks", nil, 200)
	call("GET", "/tasks/t-1/sessions", nil, 200)
	call("GET", "/health", nil, 200)
	call("DELETE", "/rollout/task/t-1", nil, 200)
	call("POST", "/rollout/task/submit", map[string]any{"task_id": "t-2", "num_samples": 0}, 422)
	call("GET", "/rollout/task/nosuch", nil, 404)

	// The gateway's model list, with a session's key.
	mustDecode(t, call("POST", "/v1/sessions", map[string]any{"task": task}, 201), &sess)
	req, _ := http.NewRequest("GET", e.host+"/gateway/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+sess.APIKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(body), `"data"`) {
		t.Errorf("gateway models: %d %s", res.StatusCode, body)
	}
}

func mustDecode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}
