package coord

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Member is a node's side: it registers with the coordinator, heartbeats
// its load, registers again when the coordinator forgot it (a restart),
// and asks to be drained when it shuts down.
type Member struct {
	Coordinator string
	Info        NodeInfo
	Token       string
	Interval    time.Duration
	Load        func() Load
	Log         hclog.Logger
	Client      *http.Client
}

// ErrRefused wraps the coordinator's refusal of this node.
var ErrRefused = errors.New("the coordinator refused this node")

// Run registers and heartbeats until ctx ends. It returns only for a
// refusal (wrapping ErrRefused) or when ctx ends; an unreachable
// coordinator is retried.
func (m *Member) Run(ctx context.Context) error {
	if m.Client == nil {
		// Its requests carry the admin token: redirects are not followed.
		m.Client = &http.Client{Timeout: 10 * time.Second, CheckRedirect: NoRedirects}
	}
	registered := false
	t := time.NewTicker(m.Interval)
	defer t.Stop()
	for {
		if !registered {
			status, body, err := m.post(ctx, "/v1/nodes", m.Info)
			switch {
			case err != nil:
				m.Log.Warn("coordinator unreachable; retrying", "coordinator", m.Coordinator, "error", err)
			case status/100 == 2:
				registered = true
				m.Log.Info("joined the coordinator", "coordinator", m.Coordinator, "node", m.Info.ID)
			case status == http.StatusConflict || status == http.StatusUnprocessableEntity || status == http.StatusUnauthorized || status == http.StatusForbidden:
				return fmt.Errorf("%w: %s", ErrRefused, body)
			default:
				m.Log.Warn("coordinator did not take the registration; retrying", "status", status, "body", body)
			}
		} else {
			status, body, err := m.post(ctx, "/v1/nodes/"+url.PathEscape(m.Info.ID)+":heartbeat", m.Load())
			switch {
			case err != nil:
				m.Log.Warn("heartbeat failed", "coordinator", m.Coordinator, "error", err)
			case status == http.StatusNotFound:
				registered = false // the coordinator restarted or declared us dead
				m.Log.Warn("the coordinator does not know this node; registering again", "body", body)
				continue
			case status/100 != 2:
				m.Log.Warn("heartbeat refused", "status", status, "body", body)
			}
		}
		select {
		case <-ctx.Done():
			if registered {
				dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, _, _ = m.post(dctx, "/v1/nodes/"+url.PathEscape(m.Info.ID)+":drain", struct{}{})
				cancel()
			}
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (m *Member) post(ctx context.Context, path string, body any) (int, string, error) {
	status, b, err := request(ctx, m.Client, m.Token, http.MethodPost, m.Coordinator+path, body, 64<<10)
	return status, string(b), err
}
