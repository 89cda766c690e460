package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// hostCPU is a process's user and system CPU time so far.
func hostCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command's closing parenthesis: utime is the 12th, stime the 13th.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100) // USER_HZ
}

// TestGatewayUnmetered: the gateway's token counting answered after a
// session's turn budget was spent and without any bound on how many at
// once (32 concurrent 7.8 MB count_tokens cost the host 7.3 s of CPU and
// 1.86 GB of memory, reachable by model-written code through the session
// key in its environment). Every gateway endpoint now counts against the
// session's budgets and a per-session concurrency cap, answered as the
// provider answers.
func TestGatewayUnmetered(t *testing.T) {
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "1"}, staticBackend: true})
	e.startHost()
	open := func(turns int) (base, key string) {
		t.Helper()
		var s struct {
			Key  string `json:"api_key"`
			Base string `json:"anthropic_base_url"`
		}
		r := e.do("POST", "/v1/sessions", map[string]any{"max_turns": turns})
		if r.code != http.StatusCreated && r.code != http.StatusOK {
			t.Fatalf("open session: %d %s", r.code, r.body)
		}
		r.json(t, &s)
		return s.Base, s.Key
	}
	call := func(method, url, key string, body []byte) (int, http.Header, string) {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, _ := http.NewRequest(method, url, rd)
		req.Header.Set("x-api-key", key)
		req.Header.Set("anthropic-version", "2023-06-01")
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err.Error()
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header, string(b)
	}
	message := func(text string) []byte {
		b, _ := json.Marshal(map[string]any{"model": "policy", "max_tokens": 64, "messages": []map[string]any{{"role": "user", "content": text}}})
		return b
	}

	// The attack as filed: 32 count_tokens at once, 7.8 MB each.
	base, key := open(2)
	big := message(strings.Repeat("lorem ipsum ", 650_000))
	pid := e.hostP.cmd.Process.Pid
	cpu0 := hostCPU(t, pid)
	_, rss0 := hostMemory(t, pid)
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, h, body := call("POST", base+"/v1/messages/count_tokens", key, big)
			mu.Lock()
			defer mu.Unlock()
			codes[code]++
			if code == http.StatusTooManyRequests && (h.Get("Retry-After") == "" || !strings.Contains(body, `"rate_limit_error"`)) {
				t.Errorf("429 not in Anthropic's shape: %v %s", h, body)
			}
		}()
	}
	wg.Wait()
	peak, _ := hostMemory(t, pid)
	t.Logf("32 concurrent 7.8 MB count_tokens: %v; host CPU %v, peak RSS %d MiB (%d before)", codes, hostCPU(t, pid)-cpu0, peak>>10, rss0>>10)
	if codes[http.StatusOK] > 16 || codes[http.StatusTooManyRequests] < 16 {
		t.Fatalf("concurrent counts: %v; want at most the session's cap (8, a few more as others finish) served", codes)
	}

	// The turn budget spent, counting is over too: Anthropic's billing
	// error, which clients do not retry.
	for i := range 2 {
		if code, _, body := call("POST", base+"/v1/messages", key, message("What is 17 + 25?")); code != http.StatusOK {
			t.Fatalf("turn %d: %d %s", i, code, body)
		}
	}
	if code, _, body := call("POST", base+"/v1/messages/count_tokens", key, message("and now?")); code != http.StatusPaymentRequired || !strings.Contains(body, `"billing_error"`) {
		t.Fatalf("count after the turn budget: %d %s", code, body)
	}

	// Calls that generate nothing have a budget of their own (32 + 4 a
	// turn), answered in OpenAI's shape on OpenAI's paths.
	base, key = open(1)
	last, n := 0, 0
	for n = 1; n <= 40; n++ {
		req, _ := http.NewRequest("GET", strings.TrimSuffix(base, "/")+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if last = res.StatusCode; last != http.StatusOK {
			if last != http.StatusTooManyRequests || !strings.Contains(string(b), `"insufficient_quota"`) {
				t.Fatalf("request %d: %d %s", n, last, b)
			}
			break
		}
	}
	if last != http.StatusTooManyRequests || n != 37 {
		t.Fatalf("model lists: the budget ended at request %d with %d; want 429 at the 37th", n, last)
	}
}
