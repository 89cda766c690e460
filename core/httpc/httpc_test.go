package httpc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestAgainstNetHTTPServer: the answers Go's own server gives in each way
// it can frame a body, read as net/http's client reads them.
func TestAgainstNetHTTPServer(t *testing.T) {
	big := strings.Repeat("0123456789", 50_000)
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"method":%q,"path":%q,"type":%q,"body":%q}`, r.Method, r.URL.RequestURI(), r.Header.Get("Content-Type"), body)
	})
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
		for i := range 5 {
			fmt.Fprintf(w, "part%d;", i)
			w.(http.Flusher).Flush() // each write its own chunk
		}
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, big) })
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":"busy"}`)
	})
	mux.HandleFunc("/nocontent", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("/close", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "bye")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := New()
	defer c.CloseIdle()
	for _, tc := range []struct {
		path, body string
		status     int
	}{
		{"/echo", `{"prompt":[1,2,3]}`, 200},
		{"/echo?x=1&y=%20", "", 200},
		{"/chunked", "x", 200},
		{"/big", "x", 200},
		{"/status", "x", 503},
		{"/nocontent", "x", 204},
		{"/close", "x", 200},
		{"/missing", "x", 404},
	} {
		t.Run(tc.path, func(t *testing.T) {
			var got bytes.Buffer
			status, err := c.Post(context.Background(), srv.URL+tc.path, "application/json", []byte(tc.body), &got, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.Post(srv.URL+tc.path, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			want, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want = bytes.ReplaceAll(want, []byte(`"Go-http-client/1.1"`), []byte(`"prorl"`))
			if status != tc.status || status != resp.StatusCode || got.String() != string(want) {
				t.Fatalf("got %d %.200q, net/http %d %.200q", status, got.String(), resp.StatusCode, want)
			}
		})
	}
}

// TestReusesConnections: sequential calls share one connection; a server
// that closes idle connections costs a retry on a new one, not an error.
func TestReusesConnections(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := New()
	defer c.CloseIdle()
	post := func() {
		t.Helper()
		var out bytes.Buffer
		if status, err := c.Post(context.Background(), srv.URL+"/", "text/plain", []byte("hi"), &out, 100); err != nil || status != 200 || out.String() != "ok" {
			t.Fatalf("%d %q %v", status, out.String(), err)
		}
	}
	for range 50 {
		post()
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 50 sequential calls", n)
	}
	srv.CloseClientConnections() // the server drops its idle connections
	time.Sleep(50 * time.Millisecond)
	post()
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections after the server closed the idle one", n)
	}
}

// TestServerRestarted: a server restarted on the same address (a crashed
// inference server brought back) left every idle connection to it closed;
// the next call goes through, and so do the ones after it.
func TestServerRestarted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	first := &http.Server{Handler: ok}
	go func() { _ = first.Serve(ln) }()
	c := New()
	defer c.CloseIdle()
	idleConns(t, c, addr, "http://"+addr+"/", 8)
	if err := first.Close(); err != nil { // closes its idle connections too
		t.Fatal(err)
	}
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the address was taken meanwhile: %v", err)
	}
	second := &http.Server{Handler: ok}
	go func() { _ = second.Serve(ln2) }()
	defer second.Close()
	time.Sleep(50 * time.Millisecond) // the closes reach the client's sockets
	for i := range 3 {
		var out bytes.Buffer
		if status, err := c.Post(context.Background(), "http://"+addr+"/", "text/plain", []byte("hi"), &out, 100); err != nil || status != 200 || out.String() != "ok" {
			t.Fatalf("call %d after the restart: %d %q %v", i, status, out.String(), err)
		}
	}
}

// TestCancel: a cancelled call returns at once with the context's error,
// and its connection is not reused.
func TestCancel(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			w.Header().Set("Content-Length", "10")
			io.WriteString(w, "12345")
			w.(http.Flusher).Flush()
			<-release
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	defer close(release)
	c := New()
	defer c.CloseIdle()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	var out bytes.Buffer
	start := time.Now()
	_, err := c.Post(ctx, srv.URL+"/slow", "text/plain", nil, &out, 100)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("err %v after %s", err, time.Since(start))
	}
	if out.Len() != 0 {
		t.Fatalf("a failed call left %q in the output", out.String())
	}
	if _, err := c.Post(ctx, srv.URL+"/", "text/plain", nil, &out, 100); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a call on a done context: %v", err)
	}
	if status, err := c.Post(context.Background(), srv.URL+"/", "text/plain", nil, &out, 100); err != nil || status != 200 || out.String() != "ok" {
		t.Fatalf("after a cancel: %d %q %v", status, out.String(), err)
	}
}

// TestRefuses: what a server can get wrong fails the call with a reason,
// never a body the server did not send whole.
func TestRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, answer, want string
		limit              int64
	}{
		{"over the limit by length", "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world", "too large", 10},
		{"over the limit chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nhello \r\n5\r\nworld\r\n0\r\n\r\n", "too large", 10},
		{"over the limit to EOF", "HTTP/1.0 200 OK\r\n\r\nhello world", "too large", 10},
		{"short body", "HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\nhello", "unexpected EOF", 100},
		{"short chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nhello", "unexpected EOF", 100},
		{"bad chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size", 100},
		{"bad status line", "SPDY/3 200 OK\r\n\r\n", "malformed status line", 100},
		{"two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc", "bad Content-Length", 100},
		{"gzip encoding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "unsupported Transfer-Encoding", 100},
		{"header without colon", "HTTP/1.1 200 OK\r\nfoo\r\n\r\n", "malformed header", 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			_, _, err := readResponse(bufio.NewReader(strings.NewReader(tc.answer)), &out, tc.limit, 1<<10)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// TestFraming: bodies framed each way, 1xx answers skipped, and when a
// connection may be kept.
func TestFraming(t *testing.T) {
	for _, tc := range []struct {
		name, answer, body string
		status             int
		keep               bool
	}{
		{"length", "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello", "hello", 200, true},
		{"chunked with extension and trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nX-T: 1\r\n\r\n", "hello", 200, true},
		{"chunked wins over length", "HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n", "hi", 200, true},
		{"continue first", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok", "ok", 201, true},
		{"close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", "ok", 200, false},
		{"1.0 to EOF", "HTTP/1.0 200 OK\r\n\r\nall of it", "all of it", 200, false},
		{"1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", "ok", 200, true},
		{"no content", "HTTP/1.1 204 No Content\r\n\r\n", "", 204, true},
		{"reason phrase absent", "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", "", 200, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			status, keep, err := readResponse(bufio.NewReader(strings.NewReader(tc.answer)), &out, 100, 1<<10)
			if err != nil || status != tc.status || keep != tc.keep || out.String() != tc.body {
				t.Fatalf("got %d keep=%v %q %v", status, keep, out.String(), err)
			}
		})
	}
}

func TestSplit(t *testing.T) {
	for _, tc := range []struct{ url, host, target string }{
		{"http://127.0.0.1:8000/v1/completions", "127.0.0.1:8000", "/v1/completions"},
		{"http://h", "h", "/"},
		{"http://h?x=1", "h", "/?x=1"},
		{"http://[::1]:80/a#frag", "[::1]:80", "/a"},
	} {
		h, tg, ok := split(tc.url)
		if !ok || h != tc.host || tg != tc.target {
			t.Errorf("%s: %q %q %v", tc.url, h, tg, ok)
		}
	}
	c := New()
	for _, u := range []string{"https://h/", "http://", "http://u:p@h/", "http://h/a b", "ftp://h/"} {
		var out bytes.Buffer
		if _, err := c.Post(context.Background(), u, "text/plain", nil, &out, 10); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", u, err)
		}
	}
}

// FuzzReadResponse: any bytes from a server give an answer within the
// limit or an error, never a panic.
func FuzzReadResponse(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"))
	f.Add([]byte("HTTP/1.0 200 OK\r\n\r\nrest"))
	f.Add([]byte("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var out bytes.Buffer
		_, _, err := readResponse(bufio.NewReader(bytes.NewReader(data)), &out, 64, 256)
		if err == nil && out.Len() > 64 {
			t.Fatalf("%d bytes over a limit of 64", out.Len())
		}
	})
}
