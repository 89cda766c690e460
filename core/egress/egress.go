// Package egress makes the host's requests to URLs a caller supplied (a
// Polar task's callback_url): only to destinations the operator allowed,
// with the address checked when the connection is made (a name that
// resolves elsewhere after the check is caught there), no redirects, no
// proxy from the environment, and bounded time and bodies.
package egress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Policy is an allow-list of destinations.
type Policy struct {
	names    map[string][]uint16 // lower-case host name -> ports (none: any)
	prefixes []allowedPrefix
}

type allowedPrefix struct {
	p    netip.Prefix
	port uint16 // 0: any
}

// ErrNotAllowed refuses a destination the policy does not allow.
var ErrNotAllowed = errors.New("destination not allowed")

// NewPolicy reads entries: a host name, host:port, an IP address
// (optionally with :port, IPv6 in brackets) or a CIDR range. An empty
// list allows nothing.
func NewPolicy(entries []string) (*Policy, error) {
	p := &Policy{names: map[string][]uint16{}}
	for _, e := range entries {
		if pf, err := netip.ParsePrefix(e); err == nil {
			p.prefixes = append(p.prefixes, allowedPrefix{p: pf.Masked()})
			continue
		}
		host, port := e, uint16(0)
		if h, ps, err := net.SplitHostPort(e); err == nil {
			n, err := strconv.ParseUint(ps, 10, 16)
			if err != nil || n == 0 {
				return nil, fmt.Errorf("%q: bad port", e)
			}
			host, port = h, uint16(n)
		}
		if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
			a = a.Unmap()
			p.prefixes = append(p.prefixes, allowedPrefix{p: netip.PrefixFrom(a, a.BitLen()), port: port})
			continue
		}
		if host == "" || strings.ContainsAny(host, "/ []") {
			return nil, fmt.Errorf("%q: not a host name, host:port, IP address or CIDR range", e)
		}
		h := strings.ToLower(strings.TrimSuffix(host, "."))
		if port == 0 {
			p.names[h] = nil // any port
		} else if ports, ok := p.names[h]; !ok || ports != nil {
			p.names[h] = append(ports, port)
		}
	}
	return p, nil
}

// Empty reports a policy that allows nothing.
func (p *Policy) Empty() bool { return p == nil || len(p.names) == 0 && len(p.prefixes) == 0 }

// CheckURL reports whether a URL may be requested, as far as it can be
// told before connecting: http or https, and a host the policy names.
func (p *Policy) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return errors.New("must be an http or https URL")
	}
	if u.User != nil {
		return errors.New("must not carry credentials")
	}
	port := portOf(u)
	if p.nameAllowed(u.Hostname(), port) {
		return nil
	}
	if a, err := netip.ParseAddr(u.Hostname()); err == nil && p.addrAllowed(a, port) {
		return nil
	}
	return fmt.Errorf("%w: %s is not in this host's allow-list ([server] callback_allow)", ErrNotAllowed, u.Host)
}

func portOf(u *url.URL) uint16 {
	if ps := u.Port(); ps != "" {
		n, _ := strconv.ParseUint(ps, 10, 16)
		return uint16(n)
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}

func (p *Policy) nameAllowed(host string, port uint16) bool {
	if p == nil {
		return false
	}
	ports, ok := p.names[strings.ToLower(strings.TrimSuffix(host, "."))]
	if !ok {
		return false
	}
	if ports == nil {
		return true
	}
	for _, q := range ports {
		if q == port {
			return true
		}
	}
	return false
}

func (p *Policy) addrAllowed(a netip.Addr, port uint16) bool {
	if p == nil {
		return false
	}
	a = a.Unmap()
	for _, ap := range p.prefixes {
		if ap.p.Contains(a) && (ap.port == 0 || ap.port == port) {
			return true
		}
	}
	return false
}

// risky are addresses a named destination may not resolve to unless an
// address entry allows them: link-local (cloud metadata services),
// unspecified (0.0.0.0 reaches this machine) and multicast.
func risky(a netip.Addr) bool {
	return a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsUnspecified() || a.IsMulticast()
}

// checkDial allows a connection to address (ip:port) made for a URL
// naming host: the address is allowed itself, or host is an allowed name
// and the address is not a risky one.
func (p *Policy) checkDial(host, address string) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrNotAllowed, address)
	}
	if p.addrAllowed(ap.Addr(), ap.Port()) {
		return nil
	}
	if host != "" && p.nameAllowed(host, ap.Port()) && !risky(ap.Addr().Unmap()) {
		return nil
	}
	return fmt.Errorf("%w: %s resolves to %s", ErrNotAllowed, host, ap)
}

// Client is an HTTP client bound to a policy: a connection is made only
// to an address the policy allows for the URL it was asked for.
type Client struct {
	policy *Policy
	hc     *http.Client
	// MaxResponseBytes is how much of a response body is read (the rest is
	// not): a callback's answer is only its status.
	MaxResponseBytes int64
}

type hostKey struct{}

// NewClient returns a client for p; timeout bounds each request whole.
func NewClient(p *Policy, timeout time.Duration) *Client {
	c := &Client{policy: p, MaxResponseBytes: 64 << 10}
	dialer := &net.Dialer{Timeout: timeout}
	tr := &http.Transport{
		Proxy: nil, // never the environment's proxy: the check is on the address dialled
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _ := ctx.Value(hostKey{}).(string)
			d := *dialer
			// Control sees the address actually connected to, after any
			// name resolution: the check cannot be raced by DNS.
			d.Control = func(_, address string, _ syscall.RawConn) error { return c.policy.checkDial(host, address) }
			return d.DialContext(ctx, network, addr)
		},
		MaxIdleConns:          4,
		IdleConnTimeout:       30 * time.Second,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
	}
	c.hc = &http.Client{Transport: tr, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return c
}

// Post sends body as JSON to u; it returns the response's status. A
// redirect is not followed: its status is returned (not 2xx).
func (c *Client) Post(ctx context.Context, u, contentType string, body []byte) (int, error) {
	if err := c.policy.CheckURL(u); err != nil {
		return 0, err
	}
	pu, _ := url.Parse(u)
	ctx = context.WithValue(ctx, hostKey{}, pu.Hostname())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", contentType)
	res, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, c.MaxResponseBytes))
	return res.StatusCode, nil
}

// CloseIdle closes the client's idle connections.
func (c *Client) CloseIdle() { c.hc.CloseIdleConnections() }
