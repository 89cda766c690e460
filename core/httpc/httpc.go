// Package httpc is a lean HTTP/1.1 client for the one call the host makes
// thousands of times a second: a JSON POST to an inference server over a
// plain-http keep-alive connection. net/http's Transport spends about 70 µs
// of CPU per such request here (a request object and header maps, a
// connection pool behind a wants-queue, and two goroutines per connection
// that every request and answer is handed through); this writes the
// request with one writev and reads the answer in the calling goroutine.
//
// It speaks only what inference servers answer: a status line, headers,
// and a body sized by Content-Length, sent chunked, or ended by closing
// the connection. HTTPS and anything else stay with net/http.
package httpc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prorl/prorl/core/baseurl"
)

// Client keeps idle keep-alive connections per host. Its zero value is not
// usable: use New.
type Client struct {
	// MaxIdlePerHost bounds the idle connections kept for one host.
	MaxIdlePerHost int
	// IdleTimeout closes connections unused for that long.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds an answer's status line and headers.
	MaxHeaderBytes int
	// UserAgent is sent with every request.
	UserAgent string
	// Dial opens connections ("tcp", "host:port").
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	mu    sync.Mutex
	idle  map[string][]*conn
	swept time.Time
}

// New returns a client with the host's defaults (baseurl's dialer: its
// timeouts, and servers on Unix sockets).
func New() *Client {
	return &Client{MaxIdlePerHost: 2048, IdleTimeout: 90 * time.Second, MaxHeaderBytes: 64 << 10, UserAgent: "prorl",
		Dial: baseurl.NewDialer().DialContext, idle: map[string][]*conn{}}
}

// ErrTooLarge is returned when an answer's body exceeds the caller's limit.
var ErrTooLarge = errors.New("httpc: response body too large")

// ErrUnsupported is returned, before anything is sent, for a URL Post does
// not serve (anything but plain http): the caller sends it another way.
var ErrUnsupported = errors.New("httpc: unsupported URL")

// split cuts "http://host[:port]/path?query" into the address to dial and
// the request target.
func split(url string) (host, target string, ok bool) {
	rest, found := strings.CutPrefix(url, "http://")
	if !found {
		return "", "", false
	}
	host, target = rest, "/"
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		host, target = rest[:i], rest[i:]
		if target[0] == '?' {
			target = "/" + target
		}
		if j := strings.IndexByte(target, '#'); j >= 0 {
			target = target[:j]
		}
		if target == "" {
			target = "/"
		}
	}
	if host == "" || strings.ContainsAny(host, "@ \t\r\n") || strings.ContainsAny(target, " \t\r\n") {
		return "", "", false
	}
	return host, target, true
}

// Post sends body to url with contentType and appends the answer's body to
// out (at most limit bytes). It returns the status; a non-2xx status is not
// an error. A request that fails on a reused connection before any answer
// came is sent once more on a new one: the server closed it while idle
// (and the other idle ones to it are dropped).
func (c *Client) Post(ctx context.Context, url, contentType string, body []byte, out *bytes.Buffer, limit int64) (int, error) {
	host, target, ok := split(url)
	if !ok {
		return 0, fmt.Errorf("%w %q", ErrUnsupported, url)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	addr := host
	if _, _, err := net.SplitHostPort(host); err != nil {
		addr = net.JoinHostPort(strings.Trim(host, "[]"), "80")
	}
	head := c.header(host, target, contentType, len(body))
	defer putHead(head)
	for attempt := 0; ; attempt++ {
		var cn *conn
		var reused bool
		var err error
		if attempt == 0 {
			cn, reused, err = c.get(ctx, addr)
		} else {
			cn, err = c.dial(ctx, addr)
		}
		if err != nil {
			return 0, err
		}
		mark := out.Len()
		status, keep, started, err := cn.roundTrip(ctx, *head, body, out, limit, c.MaxHeaderBytes)
		if err == nil {
			if keep {
				c.put(addr, cn)
			} else {
				cn.nc.Close()
			}
			return status, nil
		}
		cn.nc.Close()
		out.Truncate(mark)
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if !reused || started || attempt > 0 {
			return 0, err
		}
		// The server closed it while idle (its keep-alive timeout, or a
		// restart), so it closed those idle longer too: the pool keeps the
		// most recently used on top. Sent again on a new connection.
		c.dropIdle(addr)
	}
}

// dropIdle closes the idle connections to addr.
func (c *Client) dropIdle(addr string) {
	c.mu.Lock()
	cs := c.idle[addr]
	delete(c.idle, addr)
	c.mu.Unlock()
	for _, cn := range cs {
		cn.nc.Close()
	}
}

var heads = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

func putHead(b *[]byte) { heads.Put(b) }

func (c *Client) header(host, target, contentType string, n int) *[]byte {
	p := heads.Get().(*[]byte)
	b := append((*p)[:0], "POST "...)
	b = append(b, target...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\nUser-Agent: "...)
	b = append(b, c.UserAgent...)
	b = append(b, "\r\nContent-Type: "...)
	b = append(b, contentType...)
	b = append(b, "\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, "\r\n\r\n"...)
	*p = b
	return p
}

type conn struct {
	nc   net.Conn
	br   *bufio.Reader
	used time.Time
}

// get is an idle connection to addr (the most recently used: the likeliest
// still open), or a new one.
func (c *Client) get(ctx context.Context, addr string) (*conn, bool, error) {
	now := time.Now()
	c.mu.Lock()
	for cs := c.idle[addr]; len(cs) > 0; cs = c.idle[addr] {
		cn := cs[len(cs)-1]
		c.idle[addr] = cs[:len(cs)-1]
		if now.Sub(cn.used) < c.IdleTimeout {
			c.mu.Unlock()
			return cn, true, nil
		}
		cn.nc.Close()
	}
	c.mu.Unlock()
	cn, err := c.dial(ctx, addr)
	return cn, false, err
}

// dial opens a new connection to addr.
func (c *Client) dial(ctx context.Context, addr string) (*conn, error) {
	nc, err := c.Dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &conn{nc: nc, br: bufio.NewReaderSize(nc, 16<<10)}, nil
}

// put keeps cn for reuse; now and then it closes what has idled too long.
func (c *Client) put(addr string, cn *conn) {
	now := time.Now()
	cn.used = now
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Sub(c.swept) > c.IdleTimeout/2 {
		c.swept = now
		c.sweepLocked(now)
	}
	if len(c.idle[addr]) >= c.MaxIdlePerHost {
		cn.nc.Close()
		return
	}
	c.idle[addr] = append(c.idle[addr], cn)
}

func (c *Client) sweepLocked(now time.Time) {
	for addr, cs := range c.idle {
		kept := cs[:0]
		for _, cn := range cs {
			if now.Sub(cn.used) < c.IdleTimeout {
				kept = append(kept, cn)
			} else {
				cn.nc.Close()
			}
		}
		clear(cs[len(kept):])
		if len(kept) == 0 {
			delete(c.idle, addr)
		} else {
			c.idle[addr] = kept
		}
	}
}

// CloseIdle closes every idle connection.
func (c *Client) CloseIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for addr, cs := range c.idle {
		for _, cn := range cs {
			cn.nc.Close()
		}
		delete(c.idle, addr)
	}
}

var past = time.Unix(1, 0)

// roundTrip writes the request and reads the answer. started reports
// whether any of the answer arrived (then it must not be sent again).
func (cn *conn) roundTrip(ctx context.Context, head, body []byte, out *bytes.Buffer, limit int64, maxHeader int) (status int, keep, started bool, err error) {
	// A cancelled context unblocks the reads and writes; no goroutine waits.
	stop := context.AfterFunc(ctx, func() { _ = cn.nc.SetDeadline(past) })
	defer func() {
		if !stop() {
			keep = false // the deadline may be set: the connection is spent
		}
	}()
	bufs := net.Buffers{head, body} // one writev
	if _, err = bufs.WriteTo(cn.nc); err != nil {
		return 0, false, false, err
	}
	if _, err = cn.br.Peek(1); err != nil {
		return 0, false, false, err
	}
	status, keep, err = readResponse(cn.br, out, limit, maxHeader)
	return status, keep, true, err
}

// readResponse reads one answer from br (skipping 1xx ones), appends its
// body to out and reports whether the connection may be reused.
func readResponse(br *bufio.Reader, out *bytes.Buffer, limit int64, maxHeader int) (status int, keep bool, err error) {
	for {
		var h header
		if h, err = readHeader(br, maxHeader); err != nil {
			return 0, false, err
		}
		if h.status >= 100 && h.status < 200 && h.status != 101 {
			continue
		}
		if h.status == 101 {
			return 0, false, errors.New("httpc: unexpected protocol switch")
		}
		keep = h.keepAlive
		switch {
		case h.status == 204 || h.status == 304:
			// no body
		case h.chunked:
			err = readChunked(br, out, limit)
		case h.length >= 0:
			if h.length > limit {
				return 0, false, ErrTooLarge
			}
			out.Grow(int(min(h.length, 4<<20))) // a claimed length is not yet a body
			var n int64
			n, err = io.CopyN(out, br, h.length)
			if err == io.EOF && n < h.length {
				err = io.ErrUnexpectedEOF
			}
		default:
			keep = false
			var n int64
			n, err = out.ReadFrom(io.LimitReader(br, limit+1))
			if err == nil && n > limit {
				err = ErrTooLarge
			}
		}
		if err != nil {
			return 0, false, err
		}
		return h.status, keep, nil
	}
}

type header struct {
	status    int
	length    int64 // -1: not given
	chunked   bool
	keepAlive bool
}

// readHeader parses the status line and the headers this client needs.
func readHeader(br *bufio.Reader, maxHeader int) (header, error) {
	h := header{length: -1}
	used := 0
	line := func() ([]byte, error) {
		l, err := br.ReadSlice('\n')
		used += len(l)
		if err == bufio.ErrBufferFull || used > maxHeader {
			return nil, errors.New("httpc: response header too large")
		}
		if err != nil {
			if err == io.EOF && used > len(l) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		return bytes.TrimRight(l, "\r\n"), nil
	}
	l, err := line()
	if err != nil {
		return h, err
	}
	proto, rest, _ := bytes.Cut(l, []byte(" "))
	code, _, _ := bytes.Cut(rest, []byte(" "))
	switch string(proto) {
	case "HTTP/1.1":
		h.keepAlive = true
	case "HTTP/1.0":
	default:
		return h, fmt.Errorf("httpc: malformed status line %.64q", l)
	}
	if len(code) != 3 {
		return h, fmt.Errorf("httpc: malformed status line %.64q", l)
	}
	n, err := strconv.Atoi(string(code))
	if err != nil || n < 100 {
		return h, fmt.Errorf("httpc: malformed status line %.64q", l)
	}
	h.status = n
	for {
		l, err := line()
		if err != nil {
			return h, err
		}
		if len(l) == 0 {
			break
		}
		name, value, ok := bytes.Cut(l, []byte(":"))
		if !ok {
			return h, fmt.Errorf("httpc: malformed header %.64q", l)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			v, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil || v < 0 || h.length >= 0 && h.length != v {
				return h, fmt.Errorf("httpc: bad Content-Length %.32q", value)
			}
			h.length = v
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			if !bytes.EqualFold(value, []byte("chunked")) {
				return h, fmt.Errorf("httpc: unsupported Transfer-Encoding %.32q", value)
			}
			h.chunked = true
		case bytes.EqualFold(name, []byte("Connection")):
			for _, t := range bytes.Split(value, []byte(",")) {
				t = bytes.TrimSpace(t)
				if bytes.EqualFold(t, []byte("close")) {
					h.keepAlive = false
				} else if bytes.EqualFold(t, []byte("keep-alive")) && string(proto) == "HTTP/1.0" {
					h.keepAlive = true
				}
			}
		}
	}
	if h.chunked {
		h.length = -1 // chunked wins over a Content-Length (RFC 9112 §6.3)
	}
	return h, nil
}

// readChunked reads a chunked body and its trailers.
func readChunked(br *bufio.Reader, out *bytes.Buffer, limit int64) error {
	var total int64
	for {
		l, err := br.ReadSlice('\n')
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			if err == bufio.ErrBufferFull {
				err = errors.New("httpc: chunk size line too long")
			}
			return err
		}
		l = bytes.TrimRight(l, "\r\n")
		if i := bytes.IndexByte(l, ';'); i >= 0 {
			l = l[:i]
		}
		size, err := strconv.ParseInt(string(bytes.TrimSpace(l)), 16, 64)
		if err != nil || size < 0 {
			return fmt.Errorf("httpc: bad chunk size %.32q", l)
		}
		if size == 0 {
			for { // trailers, up to the blank line
				t, err := br.ReadSlice('\n')
				if err != nil {
					if err == io.EOF {
						err = io.ErrUnexpectedEOF
					}
					return err
				}
				if len(bytes.TrimRight(t, "\r\n")) == 0 {
					return nil
				}
			}
		}
		if total += size; total > limit {
			return ErrTooLarge
		}
		if n, err := io.CopyN(out, br, size); err != nil {
			if err == io.EOF && n < size {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		crlf, err := br.ReadSlice('\n')
		if err != nil || len(bytes.TrimRight(crlf, "\r\n")) != 0 {
			if err == nil || err == io.EOF {
				err = errors.New("httpc: malformed chunk end")
			}
			return err
		}
	}
}
