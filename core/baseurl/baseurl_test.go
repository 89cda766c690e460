package baseurl

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in            string
		base, display string
		socket        string
		err           string
	}{
		{in: "http://127.0.0.1:8000", base: "http://127.0.0.1:8000", display: "http://127.0.0.1:8000"},
		{in: "http://gpu-1:8000/", base: "http://gpu-1:8000", display: "http://gpu-1:8000"},
		{in: "http://gpu-1:8000/v1", base: "http://gpu-1:8000", display: "http://gpu-1:8000"},
		{in: "https://gpu-1/v1/", base: "https://gpu-1", display: "https://gpu-1"},
		{in: "http://[::1]:8000", base: "http://[::1]:8000", display: "http://[::1]:8000"},
		{in: "unix:///run/vllm/engine-0.sock", display: "unix:///run/vllm/engine-0.sock", socket: "/run/vllm/engine-0.sock"},
		{in: "unix:/run/vllm/engine-0.sock", display: "unix:///run/vllm/engine-0.sock", socket: "/run/vllm/engine-0.sock"},
		{in: "unix:///tmp/a/../b.sock", display: "unix:///tmp/b.sock", socket: "/tmp/b.sock"},
		{in: "gpu-1:8000", err: "http(s) base URL"},
		{in: "ftp://gpu-1", err: "http(s) base URL"},
		{in: "http://gpu-1:8000/v2", err: "http(s) base URL"},
		{in: "http://gpu-1:8000?x=1", err: "http(s) base URL"},
		{in: "http://user:pw@gpu-1:8000", err: "http(s) base URL"},
		{in: "http://", err: "http(s) base URL"},
		{in: "unix://run/vllm.sock", err: "unix:///absolute/path"}, // "run" would be a host
		{in: "unix:relative.sock", err: "unix:///absolute/path"},
		{in: "unix:///run/dir/", err: "unix:///absolute/path"},
		{in: "unix:///run/vllm.sock?x=1", err: "unix:///absolute/path"},
		{in: "unix:///" + strings.Repeat("d", 106), display: "unix:///" + strings.Repeat("d", 106), socket: "/" + strings.Repeat("d", 106)},
		{in: "unix:///" + strings.Repeat("d", 107), err: "108 bytes, longer than the 107"},
		{in: "", err: "http(s) base URL"},
		{in: "http://%zz", err: "base URL like"},
	}
	for _, tt := range tests {
		t.Run(tt.in[:min(len(tt.in), 40)], func(t *testing.T) {
			s, err := Parse(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Parse(%q) = %+v, %v; want an error with %q", tt.in, s, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Display != tt.display || s.Socket != tt.socket {
				t.Fatalf("Parse(%q) = %+v", tt.in, s)
			}
			if tt.socket == "" {
				if s.Base != tt.base {
					t.Fatalf("base %q, want %q", s.Base, tt.base)
				}
				return
			}
			host := strings.TrimPrefix(s.Base, "http://")
			if p, ok := Socket(host + ":80"); !ok || p != tt.socket {
				t.Fatalf("Socket(%q) = %q, %v", host, p, ok)
			}
		})
	}
}

func TestSocketHostsDistinct(t *testing.T) {
	// Same file name in two directories: two hosts, each its own socket.
	a, _ := Parse("unix:///run/a/engine.sock")
	b, _ := Parse("unix:///run/b/engine.sock")
	if a.Base == b.Base {
		t.Fatalf("both %s", a.Base)
	}
	if !strings.HasPrefix(a.Base, "http://engine-") {
		t.Fatalf("base %s does not name the socket", a.Base)
	}
	// Parsing again gives the same host (a restart, a re-registration).
	if a2, _ := Parse("unix:///run/a/engine.sock"); a2.Base != a.Base {
		t.Fatalf("%s then %s", a.Base, a2.Base)
	}
	for _, addr := range []string{"engine-00000000.sock.unix:80", "example.com:80", "10.0.0.1:8000"} {
		if p, ok := Socket(addr); ok {
			t.Fatalf("Socket(%q) = %q", addr, p)
		}
	}
}

// TestDialThroughSocket serves HTTP on a Unix socket and reaches it with
// net/http through the Dialer, by the base URL Parse gave.
func TestDialThroughSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "bu") // short: socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "srv.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Method+" "+r.URL.Path)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })

	s, err := Parse("unix://" + path)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{DialContext: NewDialer().DialContext}}
	resp, err := c.Get(s.Base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "GET /v1/models" {
		t.Fatalf("body %q", body)
	}
	// A socket host name Parse never gave fails at once, without a resolver.
	_, err = NewDialer().DialContext(context.Background(), "tcp", "nope-12345678.sock.unix:80")
	if !errors.Is(err, ErrUnknownSocket) {
		t.Fatalf("err = %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"http://h:1", "http://h:1/v1", "unix:///a/b.sock", "unix:/a", "unix://h/a", "https://[::1]:8/", "http://%41"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := Parse(in)
		if err != nil {
			return
		}
		// What Parse accepts is a base a client can append paths to, and
		// parses again to itself.
		if strings.HasSuffix(s.Base, "/") || !strings.HasPrefix(s.Base, "http") {
			t.Fatalf("Parse(%q).Base = %q", in, s.Base)
		}
		again, err := Parse(s.Display)
		if err != nil || again != s {
			t.Fatalf("Parse(%q) = %+v, then Parse(%q) = %+v, %v", in, s, s.Display, again, err)
		}
		if s.Socket != "" {
			if p, ok := Socket(strings.TrimPrefix(s.Base, "http://") + ":80"); !ok || p != s.Socket {
				t.Fatalf("socket of %+v: %q %v", s, p, ok)
			}
		}
	})
}
