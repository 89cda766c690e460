package httpc

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prorl/prorl/core/baseurl"

	"github.com/prorl/prorl/sdk/sdktest"
)

// uvicornPython is the venv of the uvicorn reference (make uvicorn).
func uvicornPython(t *testing.T) string {
	py := os.Getenv("PRORL_UVICORN_PYTHON")
	if py == "" {
		home, _ := os.UserHomeDir()
		py = filepath.Join(home, ".cache", "prorl", "venv-uvicorn", "bin", "python")
	}
	if _, err := os.Stat(py); err != nil {
		sdktest.Missing(t, "uvicorn (make uvicorn)", err)
	}
	return py
}

// waitUvicorn waits until uvicorn accepts connections at addr.
func waitUvicorn(t *testing.T, network, addr string, stderr *bytes.Buffer) {
	t.Helper()
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		conn, err := net.Dial(network, addr)
		if err == nil {
			conn.Close()
			return
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("uvicorn did not start: %v\n%s", err, stderr.String())
		}
	}
}

// TestAgainstUvicorn: the server vLLM and SGLang answer through, with each
// of its HTTP/1.1 parsers (h11, httptools): answers sized by length and
// chunked, error statuses, bodies of megabytes, connections kept and
// reused, and the idle connections uvicorn closes after its keep-alive
// timeout (vLLM's is 5 s) sent again on a new one.
func TestAgainstUvicorn(t *testing.T) {
	py := uvicornPython(t)
	for _, impl := range []string{"h11", "httptools"} {
		t.Run(impl, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			f, _ := ln.(*net.TCPListener).File()
			ln.Close()
			cmd := exec.Command(py, "-m", "uvicorn", "--fd", "3", "--http", impl, "--timeout-keep-alive", "1",
				"--no-access-log", "--app-dir", "../../scripts/httpc", "app:app")
			cmd.ExtraFiles = []*os.File{f}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			f.Close()
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			base := "http://" + ln.Addr().String()
			c := New()
			defer c.CloseIdle()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			waitUvicorn(t, "tcp", ln.Addr().String(), &stderr)
			call := func(path, body string) (int, map[string]any, string) {
				t.Helper()
				var out bytes.Buffer
				status, err := c.Post(ctx, base+path, "application/json", []byte(body), &out, 16<<20)
				if err != nil {
					t.Fatalf("%s: %v\n%s", path, err, stderr.String())
				}
				text := out.String()
				if i := strings.LastIndex(text, "\n\n"); i >= 0 {
					text = text[i+2:] // the stream's last event is the echo
				}
				var echo map[string]any
				if err := json.Unmarshal([]byte(text), &echo); err != nil {
					t.Fatalf("%s: %v in %.200q", path, err, out.String())
				}
				return status, echo, out.String()
			}
			body := `{"prompt":[1,2,3],"max_tokens":8}`
			status, echo, _ := call("/json?x=1", body)
			if status != 200 || echo["method"] != "POST" || echo["path"] != "/json" || echo["query"] != "x=1" ||
				echo["content_type"] != "application/json" || echo["length"] != float64(len(body)) || echo["body"] != body {
				t.Fatalf("/json: %d %v", status, echo)
			}
			if status, _, raw := call("/stream", body); status != 200 || !strings.HasPrefix(raw, "data: 0\n\ndata: 1\n\n") {
				t.Fatalf("/stream: %d %.100q", status, raw)
			}
			if status, echo, _ := call("/status", ""); status != 400 || echo["length"] != float64(0) {
				t.Fatalf("/status: %d %v", status, echo)
			}
			big := strings.Repeat("7,", 500_000)
			if status, echo, _ := call("/big", big); status != 200 || echo["length"] != float64(len(big)) || len(echo["pad"].(string)) != 3_000_000 {
				t.Fatalf("/big: %d length %v", status, echo["length"])
			}
			c.mu.Lock()
			idle := len(c.idle[ln.Addr().String()])
			c.mu.Unlock()
			if idle != 1 {
				t.Fatalf("%d idle connections after sequential calls, want the one reused", idle)
			}
			time.Sleep(2500 * time.Millisecond) // past uvicorn's keep-alive timeout: it closed the connection
			if status, _, _ := call("/json", body); status != 200 {
				t.Fatalf("after the keep-alive timeout: %d", status)
			}
			// Many idle connections, as a thousand rollouts leave, all closed
			// by uvicorn during a tool call longer than its keep-alive: one
			// retry must not take another closed one.
			idleConns(t, c, ln.Addr().String(), base+"/json", 8)
			time.Sleep(2500 * time.Millisecond)
			if status, _, _ := call("/json", body); status != 200 {
				t.Fatalf("after the keep-alive timeout, 8 idle: %d", status)
			}
		})
	}
}

// TestAgainstUvicornUnixSocket: vLLM's --uds, as uvicorn serves it, reached
// by the base URL baseurl gives the socket, on connections kept and reused.
func TestAgainstUvicornUnixSocket(t *testing.T) {
	py := uvicornPython(t)
	dir, err := os.MkdirTemp("", "uds") // short: socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "vllm.sock")
	cmd := exec.Command(py, "-m", "uvicorn", "--uds", sock, "--no-access-log", "--app-dir", "../../scripts/httpc", "app:app")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitUvicorn(t, "unix", sock, &stderr)
	srv, err := baseurl.Parse("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	c := New()
	c.Dial = baseurl.NewDialer().DialContext
	defer c.CloseIdle()
	body := `{"prompt":[1,2,3],"max_tokens":8}`
	for i := 0; i < 3; i++ {
		var out bytes.Buffer
		status, err := c.Post(context.Background(), srv.Base+"/v1/completions", "application/json", []byte(body), &out, 1<<20)
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr.String())
		}
		var echo map[string]any
		if err := json.Unmarshal(out.Bytes(), &echo); err != nil || status != 200 || echo["path"] != "/v1/completions" || echo["body"] != body {
			t.Fatalf("%d %v %s", status, err, out.String())
		}
	}
	c.mu.Lock()
	idle := 0
	for _, cs := range c.idle {
		idle += len(cs)
	}
	c.mu.Unlock()
	if idle != 1 {
		t.Fatalf("%d idle connections after sequential calls, want the one reused", idle)
	}
}

// idleConns leaves n idle connections to addr in c's pool, each having
// carried one request to url.
func idleConns(t *testing.T, c *Client, addr, url string, n int) {
	t.Helper()
	ctx := context.Background()
	host, target, _ := split(url)
	var cs []*conn
	for range n {
		cn, err := c.dial(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		head := c.header(host, target, "application/json", 2)
		var out bytes.Buffer
		if status, keep, _, err := cn.roundTrip(ctx, *head, []byte("{}"), &out, 1<<20, c.MaxHeaderBytes); err != nil || !keep || status != 200 {
			t.Fatalf("priming a connection: %d %v %v", status, keep, err)
		}
		cs = append(cs, cn)
	}
	for _, cn := range cs {
		c.put(addr, cn)
	}
}
