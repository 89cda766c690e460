// Package baseurl parses the addresses users give for inference servers,
// in the config and the API alike, and dials the servers that listen on a
// Unix socket.
//
// A server on this machine may listen on a Unix socket instead of a TCP
// port: vLLM with --uds PATH, llama.cpp's server with --host NAME.sock.
// The clients keep speaking plain HTTP to a base URL; the socket's base
// URL names a host no resolver knows (NAME-HASH.sock.unix), which Dial
// connects to the socket. Over loopback TCP the kernel runs both ends of
// the TCP stack in each send; a Unix socket skips it (bench
// Rollouts: the host's CPU per single-turn rollout, and the
// server's, are lower over one).
package baseurl

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Server is a parsed address.
type Server struct {
	// Base is what clients append their paths to: scheme://host[:port],
	// no trailing slash.
	Base string
	// Display is the address as it is shown and compared: Base for a TCP
	// server, unix://PATH for a socket.
	Display string
	// Socket is the Unix socket's path, or "".
	Socket string
}

// Parse reads an address as users write it:
//   - http://host:port or https://host:port, optionally with the path /v1
//     (an OpenAI-style base URL, as NeMo Gym and ProRL's scripts register
//     servers: the same server);
//   - unix:///abs/path or unix:/abs/path: a server listening on that Unix
//     socket, on this machine.
//
// The error says what is wrong, to be reported with the field's name.
func Parse(raw string) (Server, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Server{}, fmt.Errorf("must be a base URL like http://host:port or unix:///path/to/socket, got %q", raw)
	}
	if u.Scheme == "unix" {
		return parseUnix(u, raw)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/" && u.Path != "/v1" && u.Path != "/v1/") || u.RawQuery != "" || u.Fragment != "" {
		return Server{}, fmt.Errorf("must be an http(s) base URL like http://host:port (or http://host:port/v1), or unix:///path/to/socket, got %q", raw)
	}
	base := u.Scheme + "://" + u.Host
	return Server{Base: base, Display: base}, nil
}

func parseUnix(u *url.URL, raw string) (Server, error) {
	p := u.Path
	// The path is shown as unix://PATH and parsed again from there: no
	// escapes, no control characters (a NUL ends a socket path early).
	plain := utf8.ValidString(p) && !strings.ContainsAny(p, "%?#") && !strings.ContainsFunc(p, unicode.IsControl)
	clean := filepath.Clean(p)
	if u.Host != "" || u.Opaque != "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || !filepath.IsAbs(p) || strings.HasSuffix(p, "/") || !plain || clean == "/" {
		return Server{}, fmt.Errorf("a Unix socket is unix:///absolute/path/to/socket, got %q", raw)
	}
	p = clean
	if len(p) > maxSocketPath {
		return Server{}, fmt.Errorf("the socket path %q is %d bytes, longer than the %d a Unix socket's may be", p, len(p), maxSocketPath)
	}
	return Server{Base: "http://" + hostFor(p), Display: "unix://" + p, Socket: p}, nil
}

// maxSocketPath is the longest path a Unix socket address holds (Linux's
// sun_path is 108 bytes with the terminating NUL).
const maxSocketPath = 107

// sockets maps each socket's host name to its path.
var sockets sync.Map

// hostFor is the socket's host name, registered for Dial: the socket's
// file name (letters, digits and dashes) for readable logs, and a hash of
// its whole path so that two sockets never share one.
func hostFor(path string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(path))
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.TrimSuffix(filepath.Base(path), ".sock"))
	name = strings.Trim(name, "-")
	if len(name) > 40 {
		name = name[:40]
	}
	host := strings.ToLower(strings.TrimPrefix(fmt.Sprintf("%s-%08x.sock.unix", name, uint32(h.Sum64())), "-"))
	sockets.Store(host, path)
	return host
}

// Socket is the path of the Unix socket behind addr ("host:port", as
// dialers get it), if it names one.
func Socket(addr string) (string, bool) {
	p, _, ok := socketOf(hostOf(addr))
	return p, ok
}

// socketOf is the socket behind a host name (ok), and whether the name is
// a socket host name at all (known or not).
func socketOf(host string) (path string, socketHost, ok bool) {
	if !isSocketHost(host) {
		return "", false, false
	}
	p, ok := sockets.Load(host)
	if !ok {
		return "", true, false
	}
	return p.(string), true, true
}

// ErrUnknownSocket is a dial to a socket host name that Parse never gave.
var ErrUnknownSocket = errors.New("baseurl: unknown Unix socket host")

// Dialer dials TCP addresses as its net.Dialer does, and socket host
// names (from Parse) through their sockets.
type Dialer struct{ net.Dialer }

// NewDialer has the host's dial timeout and TCP keep-alive.
func NewDialer() *Dialer {
	return &Dialer{net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}}
}

// DialContext implements the dial function of net/http's Transport.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	switch p, socketHost, ok := socketOf(hostOf(addr)); {
	case ok:
		return d.Dialer.DialContext(ctx, "unix", p)
	case socketHost:
		// Never sent to a resolver: it would only fail later, and slower.
		return nil, fmt.Errorf("%w %q", ErrUnknownSocket, addr)
	}
	return d.Dialer.DialContext(ctx, network, addr)
}

// hostOf is addr's host name, lower case, without a final dot.
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		addr = h
	}
	return strings.TrimSuffix(strings.ToLower(addr), ".")
}

func isSocketHost(host string) bool { return strings.HasSuffix(host, ".sock.unix") }
