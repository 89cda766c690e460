package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prorl/prorl/core/backend"
	"github.com/prorl/prorl/core/trajectory"
)

// TestUnixSocketBackend: an inference server on a Unix socket (vLLM's
// --uds), registered through the API and through the config, serves
// rollouts whose tokens are exactly the server's; so does one configured
// by an OpenAI-style base URL.
func TestUnixSocketBackend(t *testing.T) {
	for _, tt := range []struct {
		name                 string
		socket, static       bool
		staticSuffix, prefix string
	}{
		{name: "api", socket: true, prefix: "unix:///"},
		{name: "config", socket: true, static: true, prefix: "unix:///"},
		// An OpenAI-style base URL in the config: the same server (it
		// once posted to /v1/v1/completions).
		{name: "config http /v1", static: true, staticSuffix: "/v1", prefix: "http://"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOpts{simSocket: tt.socket, staticBackend: tt.static, staticSuffix: tt.staticSuffix, simArgs: []string{"--correct-rate", "1", "--think-turns", "1"}})
			if !strings.HasPrefix(e.sim, tt.prefix) {
				t.Fatalf("simulator address %q", e.sim)
			}
			e.startHost()
			if !tt.static {
				e.addBackend()
			}
			var list struct{ Backends []backend.Status }
			if r := e.do("GET", "/v1/backends", nil); r.code != 200 {
				t.Fatalf("backends: %d %s", r.code, r.body)
			} else if r.json(t, &list); len(list.Backends) != 1 || list.Backends[0].URL != e.sim || list.Backends[0].Model != "prorl-sim" {
				t.Fatalf("backends %s: want %s, its model discovered over the socket", r.body, e.sim)
			}
			var sub struct {
				RolloutIDs []string `json:"rollout_ids"`
			}
			r := e.do("POST", "/v1/rollouts", map[string]any{"task": map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}, "n": 3})
			if r.code != http.StatusAccepted {
				t.Fatalf("submit: %d %s", r.code, r.body)
			}
			r.json(t, &sub)
			sim := e.simEntries
			for _, id := range sub.RolloutIDs {
				var res trajectory.Result
				e.do("GET", "/v1/rollouts/"+id+"?wait=60s", nil).json(t, &res)
				if res.Status != trajectory.StatusCompleted || res.Reward != 1 || len(res.Turns) != 2 {
					t.Fatalf("%s: %s reward %v turns %d %+v", id, res.Status, res.Reward, len(res.Turns), res.Failure)
				}
				checkTokens(t, &res, sim())
			}
		})
	}
}

// TestBackendURLErrors: an address the host cannot use is refused with the
// field named, through the API; a /v1 base URL names the same server.
func TestBackendURLErrors(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.startHost()
	for _, bad := range []string{"unix:sim.sock", "unix:///", "gpu-1:8000", "http://gpu-1:8000/other"} {
		r := e.do("POST", "/v1/backends", map[string]any{"url": bad})
		if r.code != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), `"field":"url"`) {
			t.Fatalf("%q: %d %s", bad, r.code, r.body)
		}
	}
	e.register(map[string]any{"url": e.sim + "/v1"})
	if r := e.do("POST", "/v1/backends", map[string]any{"url": e.sim}); r.code != http.StatusOK {
		t.Fatalf("the same server again: %d %s", r.code, r.body)
	}
}
