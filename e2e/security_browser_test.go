package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/prorl/prorl/sdk/sdktest"
)

// TestWebPageRequests: with no token (the shipped local config), a web
// page the user opened could drive the API: POST /v1/backends sent as
// text/plain from Origin http://attacker.example with Host
// attacker.example registered a backend (201), POST /v1/policy:pause
// paused training, and a rebound name read GET /v1/backends. The API now
// checks Host and Origin and takes only JSON bodies; the dashboard's own
// requests (same origin) and clients outside a browser still work.
func TestWebPageRequests(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.startHost()
	send := func(method, path, body string, h map[string]string) (int, string) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, e.host+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range h {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	backend := `{"url":"` + e.sim + `","protocol":"vllm"}`
	for _, tc := range []struct {
		name, method, path, body string
		h                        map[string]string
		want                     int
		field                    string
	}{
		// The attacks as filed.
		{"CSRF add backend", "POST", "/v1/backends", backend,
			map[string]string{"Content-Type": "text/plain", "Origin": "http://attacker.example", "Host": "attacker.example"}, 403, "Host"},
		{"CSRF add backend, our Host", "POST", "/v1/backends", backend,
			map[string]string{"Content-Type": "text/plain", "Origin": "http://attacker.example"}, 403, "Origin"},
		{"CSRF pause", "POST", "/v1/policy:pause", `{"mode":"abort"}`,
			map[string]string{"Content-Type": "text/plain", "Origin": "http://attacker.example"}, 403, "Origin"},
		{"rebinding read", "GET", "/v1/backends", "", map[string]string{"Host": "attacker.example"}, 403, "Host"},
		{"rebinding read with port", "GET", "/v1/backends", "", map[string]string{"Host": "attacker.example:8006"}, 403, "Host"},
		{"no-cors GET from another site", "GET", "/v1/results", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, "Sec-Fetch-Site"},
		{"opaque origin", "POST", "/v1/policy:pause", `{"mode":"abort"}`, map[string]string{"Content-Type": "application/json", "Origin": "null"}, 403, "Origin"},
		{"text/plain without a browser", "POST", "/v1/backends", backend, map[string]string{"Content-Type": "text/plain"}, 415, "Content-Type"},
		{"form body", "POST", "/v1/rollouts", "task=x", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "Content-Type"},
		// What must keep working.
		{"client outside a browser", "POST", "/v1/backends", backend, map[string]string{"Content-Type": "application/json"}, 201, ""},
		{"dashboard, same origin", "GET", "/v1/backends", "", map[string]string{"Origin": e.host, "Sec-Fetch-Site": "same-origin"}, 200, ""},
		{"localhost name", "GET", "/v1/domains", "", map[string]string{"Host": "localhost:8006"}, 200, ""},
		{"JSON with charset", "POST", "/v1/policy:resume", `{}`, map[string]string{"Content-Type": "application/json; charset=utf-8"}, 200, ""},
		// No body, no type: past the guard, to the handler's own answer.
		{"POST without a body", "POST", "/v1/policy:resume", "", nil, 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := send(tc.method, tc.path, tc.body, tc.h)
			if code != tc.want || tc.field != "" && !strings.Contains(body, `"field":"`+tc.field+`"`) {
				t.Fatalf("%d %s; want %d naming %s", code, body, tc.want, tc.field)
			}
		})
	}
	// Nothing the refused requests asked for happened: one backend (the
	// client's), and the policy is not paused.
	_, body := send("GET", "/v1/backends", "", nil)
	if n := strings.Count(body, `"url":`); n != 1 {
		t.Fatalf("backends after the attacks: %s", body)
	}
	if _, body := send("GET", "/v1/policy", "", nil); strings.Contains(body, `"paused":true`) {
		t.Fatalf("policy after the attacks: %s", body)
	}
}

// TestWebPageAttacksInBrowser: the same attacks made by Chromium from a
// page of another origin: the requests a page can send without CORS
// reach nothing, and the API loaded under a rebound name answers 403.
func TestWebPageAttacksInBrowser(t *testing.T) {
	nodeModules := sdktest.Reference(t, "../scripts/ref.py", "playwright")
	e := newEnv(t, envOpts{})
	e.startHost()
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<!doctype html><title>a page the researcher opened</title>")
	}))
	defer attacker.Close()
	au, _ := url.Parse(attacker.URL)
	hu, _ := url.Parse(e.host)
	in, _ := json.Marshal(map[string]any{"base": e.host, "attacker": "http://attacker.example:" + au.Port() + "/", "apiPort": hu.Port()})
	out, err := browserScript(t, nodeModules, "attack.test.mjs", in).Output()
	var rep struct {
		Sent         []string `json:"sent"`
		RebindStatus int      `json:"rebindStatus"`
		RebindBody   string   `json:"rebindBody"`
		Error        string   `json:"error"`
	}
	if jerr := json.Unmarshal(out, &rep); jerr != nil || err != nil || rep.Error != "" {
		t.Fatalf("browser: %v %v %s", err, rep.Error, out)
	}
	t.Logf("the page's requests: %v; the rebound name: %d %.120s", rep.Sent, rep.RebindStatus, rep.RebindBody)
	if rep.RebindStatus != http.StatusForbidden {
		t.Fatalf("the API under the attacker's name answered %d: %s", rep.RebindStatus, rep.RebindBody)
	}
	if r := e.do("GET", "/v1/backends", nil); strings.Contains(string(r.body), "127.0.0.1:9") {
		t.Fatalf("the page registered a backend: %s", r.body)
	}
	if r := e.do("GET", "/v1/policy", nil); strings.Contains(string(r.body), `"paused":true`) {
		t.Fatalf("the page paused the policy: %s", r.body)
	}
}
