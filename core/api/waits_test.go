package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/core/store"
	"github.com/prorl/prorl/internal/apitest"
)

// TestEndWaits: at shutdown, long polls answer what they have and streams
// end cleanly (a whole chunked body, so a client knows it was not cut),
// whether they began before EndWaits or after; before it, they waited out
// the server's grace period and were then cut mid-body.
func TestEndWaits(t *testing.T) {
	// A dialect's stream waits on WaitCtx (as Polar's /events does).
	stream := func(svc api.Service) []api.Route {
		return []api.Route{{Path: "/dialect/stream", Method: http.MethodGet, Name: "dialect_stream", Level: api.PublicLevel, Handler: func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := svc.WaitCtx(r)
			defer cancel()
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-ctx.Done()
		}}}
	}
	s, h := apitest.NewServer(t, store.NewMemory(10), stream)
	ts := httptest.NewServer(h)
	defer ts.Close()
	defer ts.CloseClientConnections() // first: a failed test's waits would hold Close
	get := func(path, accept string) (int, []byte, error) {
		req, err := http.NewRequest("GET", ts.URL+path, nil)
		if err != nil {
			return 0, nil, err
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res.StatusCode, b, err
	}
	waits := []struct{ name, path, accept string }{
		{"results long poll", "/v1/results?wait=10m", ""},
		{"results stream, SSE", "/v1/results/stream", "text/event-stream"},
		{"results stream, NDJSON", "/v1/results/stream", ""},
		{"a dialect's stream", "/dialect/stream", ""},
	}
	type outcome struct {
		code int
		body []byte
		err  error
	}
	run := func() []chan outcome {
		var chs []chan outcome
		for _, w := range waits {
			ch := make(chan outcome, 1)
			go func() {
				code, b, err := get(w.path, w.accept)
				ch <- outcome{code, b, err}
			}()
			chs = append(chs, ch)
		}
		return chs
	}
	check := func(when string, chs []chan outcome) {
		for i, ch := range chs {
			select {
			case o := <-ch:
				if o.err != nil || o.code != http.StatusOK {
					t.Errorf("%s, %s: %d %v (%q)", when, waits[i].name, o.code, o.err, o.body)
				}
				if i == 0 {
					var page struct {
						Results []json.RawMessage `json:"results"`
					}
					if err := json.Unmarshal(o.body, &page); err != nil {
						t.Errorf("%s, long poll: %v (%q)", when, err, o.body)
					}
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("%s, %s: still waiting", when, waits[i].name)
			}
		}
	}
	before := run()
	time.Sleep(200 * time.Millisecond) // most are waiting by now; any that is not begins after EndWaits, also checked
	s.EndWaits()
	check("begun before EndWaits", before)
	check("begun after EndWaits", run())
}
