package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestEvaluateBounded: POST /v1/evaluate started as many sandboxes as it
// had concurrent callers (with eval_workers = 4, 40 concurrent code
// evaluations of a 30 s sleep had 40 sandboxes alive). It now takes the
// eval stage's slots: past them it answers 429 with Retry-After at once.
func TestEvaluateBounded(t *testing.T) {
	plugin := filepath.Join(binDir, "plugins/prorl-code")
	image := codeImageTOML(t)
	if !strings.Contains(image, "[plugins.code.config]\n") {
		image = "[plugins.code.config]\n" + image
	}
	image = strings.Replace(image, "[plugins.code.config]\n", "[plugins.code.config]\ntime_limit = 20\n", 1)
	e := newEnv(t, envOpts{pipelineTOML: "eval_workers = 4\n",
		extraTOML: "[plugins.code]\nenabled = true\npath = \"" + plugin + "\"\n" + image})
	e.startHost()
	task := map[string]any{"question": "Print 4.", "tests": []map[string]string{{"input": "", "output": "4\n"}}}
	body := map[string]any{"domain": "code", "task": task, "response": "```python\nimport time\ntime.sleep(4)\nprint(4)\n```"}

	var most atomic.Int32
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() { // the sandboxes alive, as the dashboard counts them
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			r, err := e.request("GET", "/v1/ui/overview", nil)
			if err != nil {
				continue
			}
			var o struct {
				Sandboxes *struct{ Running, Starting int32 } `json:"sandboxes"`
			}
			if json.Unmarshal(r.body, &o) == nil && o.Sandboxes != nil {
				if n := o.Sandboxes.Running + o.Sandboxes.Starting; n > most.Load() {
					most.Store(n)
				}
			}
		}
	}()
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	t0 := time.Now()
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.request("POST", "/v1/evaluate", body)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
			codes[r.code]++
			switch r.code {
			case http.StatusOK:
				if !strings.Contains(string(r.body), `"reward":1`) {
					t.Errorf("an admitted evaluation: %s", r.body)
				}
			case http.StatusTooManyRequests:
				if !strings.Contains(string(r.body), "eval_workers") {
					t.Errorf("429 without the bound named: %s", r.body)
				}
			default:
				t.Errorf("%d %s", r.code, r.body)
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-watched
	t.Logf("40 concurrent evaluations with eval_workers = 4: %v in %v; at most %d sandboxes alive", codes, time.Since(t0).Round(time.Millisecond), most.Load())
	if codes[http.StatusOK] > 8 || codes[http.StatusTooManyRequests] < 32 {
		t.Fatalf("answers %v: want at most the 4 slots (a few more as they free) run", codes)
	}
	if most.Load() > 4 {
		t.Fatalf("%d sandboxes alive at once, over eval_workers = 4", most.Load())
	}
	// Retry-After is sent with the 429.
	var hdr http.Header
	for range 3 {
		var wg sync.WaitGroup
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b, _ := json.Marshal(body)
				res, err := http.Post(e.host+"/v1/evaluate", "application/json", strings.NewReader(string(b)))
				if err == nil {
					res.Body.Close()
					if res.StatusCode == http.StatusTooManyRequests {
						mu.Lock()
						hdr = res.Header
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		if hdr != nil {
			break
		}
	}
	if hdr == nil || hdr.Get("Retry-After") == "" {
		t.Fatalf("no 429 with Retry-After: %v", hdr)
	}
}
