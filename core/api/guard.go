package api

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/prorl/prorl/core/config"
)

// guard keeps web pages off the API: a deployment without a token (the
// workstation default) is otherwise open to any page its user opens. A
// page can send requests to loopback (CSRF) and, by rebinding its own
// name to this machine's address, read the answers (DNS rebinding).
//   - Host must name this machine: a loopback name, an IP address, its
//     host name, or one the operator allowed. A rebound name is refused.
//   - A request a browser sends from another page (Origin, or
//     Sec-Fetch-Site saying it is not same-origin) is refused unless its
//     origin is allowed; the dashboard is same-origin.
//   - A body must be declared application/json, which a page can only
//     send cross-origin after a preflight this API never grants.
type guard struct {
	anyHost, anyOrigin bool
	hosts              map[string]bool // lower case, with or without :port
	origins            map[string]bool // scheme://host[:port], lower case
}

func newGuard(cfg *config.Config) *guard {
	c := cfg.Server
	g := &guard{hosts: map[string]bool{"localhost": true}, origins: map[string]bool{}}
	names := []string{}
	if h, err := os.Hostname(); err == nil && h != "" {
		names = append(names, h)
		if short, _, ok := strings.Cut(h, "."); ok {
			names = append(names, short)
		}
	}
	// The names the deployment itself gives this host.
	if h, _, err := net.SplitHostPort(c.Listen); err == nil {
		names = append(names, h)
	}
	if u, err := url.Parse(cfg.Cluster.Advertise); err == nil && u.Hostname() != "" {
		names = append(names, u.Hostname())
	}
	for _, h := range names {
		g.hosts[strings.ToLower(strings.TrimSuffix(h, "."))] = true
	}
	for _, h := range c.AllowedHosts {
		if h == "*" {
			g.anyHost = true
		}
		g.hosts[strings.ToLower(strings.TrimSuffix(h, "."))] = true
	}
	for _, o := range c.AllowedOrigins {
		if o == "*" {
			g.anyOrigin = true
		}
		g.origins[strings.ToLower(strings.TrimSuffix(o, "/"))] = true
	}
	return g
}

// hostAllowed checks a request's Host header.
func (g *guard) hostAllowed(hostport string) bool {
	if g.anyHost || hostport == "" {
		return true
	}
	hostport = strings.ToLower(hostport)
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	// An address is no name a page can rebind: its origin is the host itself.
	if net.ParseIP(host) != nil {
		return true
	}
	return host == "localhost" || strings.HasSuffix(host, ".localhost") || g.hosts[host] || g.hosts[hostport]
}

// originAllowed checks a browser's Origin against the request's Host.
func (g *guard) originAllowed(origin, host string) bool {
	if g.anyOrigin {
		return true
	}
	o := strings.ToLower(strings.TrimSuffix(origin, "/"))
	if g.origins[o] {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" || o == "null" {
		return false
	}
	return u.Host == strings.ToLower(host) // same origin: the page the API served
}

// check refuses a request a web page could have made; nil lets it pass.
func (g *guard) check(r *http.Request) *Error {
	if !g.hostAllowed(r.Host) {
		return Errf(http.StatusForbidden, "host_not_allowed", "Host", "the Host %q is not this server's; add it to [server] allowed_hosts if it is", r.Host)
	}
	origin := r.Header.Get("Origin")
	switch {
	case origin != "":
		if !g.originAllowed(origin, r.Host) {
			return Errf(http.StatusForbidden, "origin_not_allowed", "Origin", "requests from the page at %q are not allowed; add its origin to [server] allowed_origins if they should be", origin)
		}
	default:
		// A GET a page makes without CORS (an image, a script) carries no
		// Origin; the browser still says where it came from.
		if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
			return Errf(http.StatusForbidden, "origin_not_allowed", "Sec-Fetch-Site", "requests from another site (%s) are not allowed", s)
		}
	}
	return nil
}

// jsonBody refuses a body not declared application/json.
func jsonBody(r *http.Request) *Error {
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return Errf(http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type", "a request body must be sent as Content-Type: application/json, not %q (curl: --json)", ct)
	}
	return nil
}

// corsOrigin is the origin to answer with CORS headers: one the operator
// allowed, not the API's own (a same-origin page needs none).
func (g *guard) corsOrigin(r *http.Request) string {
	o := r.Header.Get("Origin")
	if o == "" || strings.EqualFold(o, "null") {
		return ""
	}
	if u, err := url.Parse(o); err == nil && strings.EqualFold(u.Host, r.Host) {
		return ""
	}
	if g.anyOrigin || g.origins[strings.ToLower(strings.TrimSuffix(o, "/"))] {
		return o
	}
	return ""
}

// guarded wraps the whole router: every route, the dashboard and the
// gateway too. Allowed origins other than the API's own get CORS answers.
func (g *guard) guarded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e := g.check(r); e != nil {
			WriteError(w, e)
			return
		}
		if o := g.corsOrigin(r); o != "" {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", o)
			h.Add("Vary", "Origin")
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE")
				h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID")
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
