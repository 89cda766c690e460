package egress

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"
)

func TestPolicyCheckURL(t *testing.T) {
	p, err := NewPolicy([]string{"trainer.example", "cb.example:9000", "10.0.0.0/8", "192.168.1.5", "[::1]:8080"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"http://trainer.example/done", true},
		{"https://TRAINER.example./done", true},
		{"http://cb.example:9000/x", true},
		{"http://cb.example/x", false}, // port 80, only 9000 allowed
		{"http://10.3.4.5:1234/", true},
		{"http://192.168.1.5/", true},
		{"http://192.168.1.6/", false},
		{"http://[::1]:8080/", true},
		{"http://[::1]:8081/", false},
		{"http://127.0.0.1:8006/v1/policy:pause", false},
		{"http://localhost/", false},
		{"http://169.254.169.254/latest/meta-data", false},
		{"ftp://trainer.example/", false},
		{"http://user:pw@trainer.example/", false},
		{"trainer.example", false},
		{"http:///nohost", false},
	} {
		err := p.CheckURL(tc.url)
		if (err == nil) != tc.ok {
			t.Errorf("CheckURL(%q) = %v, want ok=%v", tc.url, err, tc.ok)
		}
	}
	var empty *Policy
	if empty.CheckURL("http://trainer.example/") == nil || !empty.Empty() {
		t.Error("a nil policy allows something")
	}
}

func TestPolicyBadEntries(t *testing.T) {
	for _, e := range []string{"", "a b", "host:0", "host:99999", "http://x/y"} {
		if _, err := NewPolicy([]string{e}); err == nil {
			t.Errorf("NewPolicy(%q) accepted", e)
		}
	}
}

// The address dialled is checked, not the name: a name the operator
// allowed may not lead to a link-local (metadata) or unspecified address,
// nor to a port it was not allowed on.
func TestCheckDial(t *testing.T) {
	p, _ := NewPolicy([]string{"trainer.example", "svc.example:9000", "10.0.0.0/8"})
	for _, tc := range []struct {
		host, addr string
		ok         bool
	}{
		{"trainer.example", "203.0.113.7:80", true},
		{"trainer.example", "169.254.169.254:80", false},
		{"trainer.example", "[fe80::1]:80", false},
		{"trainer.example", "0.0.0.0:80", false},
		{"svc.example", "203.0.113.7:9000", true},
		{"svc.example", "203.0.113.7:22", false},
		{"evil.example", "203.0.113.7:80", false},
		{"evil.example", "10.1.2.3:80", true}, // an allowed range, whatever the name
		{"", "127.0.0.1:8006", false},
	} {
		if err := p.checkDial(tc.host, tc.addr); (err == nil) != tc.ok {
			t.Errorf("checkDial(%q, %q) = %v, want ok=%v", tc.host, tc.addr, err, tc.ok)
		}
	}
}

// A callback answered with a redirect is not followed: the host does not
// re-POST anywhere the receiver names.
func TestNoRedirects(t *testing.T) {
	var redirected atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			redirected.Add(1)
			return
		}
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	p, _ := NewPolicy([]string{u.Host})
	c := NewClient(p, 5*time.Second)
	code, err := c.Post(context.Background(), srv.URL+"/cb", "application/json", []byte(`{}`))
	if err != nil || code != http.StatusTemporaryRedirect {
		t.Fatalf("Post = %d, %v; want the 307 itself", code, err)
	}
	if redirected.Load() != 0 {
		t.Fatal("the redirect was followed")
	}
}

func TestClientPolicy(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("reached") }))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	// localhost is allowed on another port only: the URL check passes the
	// name on no port, so the refusal is the URL's; with the name allowed
	// on any port the dial goes through.
	p, _ := NewPolicy([]string{"localhost:1"})
	c := NewClient(p, 5*time.Second)
	if _, err := c.Post(context.Background(), "http://localhost:"+u.Port()+"/", "application/json", nil); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("err = %v, want ErrNotAllowed", err)
	}
	p, _ = NewPolicy([]string{"localhost"})
	ok := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer ok.Close()
	ou, _ := url.Parse(ok.URL)
	if code, err := NewClient(p, 5*time.Second).Post(context.Background(), "http://localhost:"+ou.Port()+"/", "application/json", nil); err != nil || code != 200 {
		t.Fatalf("allowed name: %d, %v", code, err)
	}
}
