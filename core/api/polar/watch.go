package polar

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/prorl/prorl/core/egress"
	"github.com/prorl/prorl/core/pipeline"
	"github.com/prorl/prorl/core/trajectory"
)

// polarWatch collects a task's results as its rollouts finish, then marks
// it completed and calls back.
func (s *server) polarWatch(t *polarTask, rs []*pipeline.Rollout) {
	pt := s.tasks
	finished := make(chan *pipeline.Rollout, len(rs))
	for _, r := range rs {
		go func() { <-r.Done(); finished <- r }()
	}
	for range rs {
		res, ok := s.svc.Result((<-finished).ID)
		if !ok {
			continue
		}
		sess := toPolarSession(res, t.id, pt.node)
		pt.mu.Lock()
		cancelled := t.status == "cancelling" || t.status == "cancelled"
		if !cancelled || res.Status != trajectory.StatusCancelled {
			t.results = append(t.results, sess)
		}
		t.updated = time.Now()
		completed, total := len(t.results), len(t.rollouts)
		pt.mu.Unlock()
		pt.events.publish("session.state_changed", map[string]any{"task_id": t.id, "session_id": sess.SessionID, "status": sess.Status})
		pt.events.publish("task.updated", map[string]any{"task_id": t.id, "completed_sessions": completed, "total_sessions": total})
	}
	pt.mu.Lock()
	callback := ""
	if t.status == "running" {
		t.status = "completed"
		callback = t.callback
	}
	t.updated = time.Now()
	close(t.done)
	st := pt.statusLocked(t)
	pt.mu.Unlock()
	pt.events.publish("task.completed", map[string]any{"task_id": t.id, "status": st.Status, "completed_sessions": st.CompletedSessions})
	if callback != "" {
		s.polarCallback(callback, st)
	}
}

// polarCallback POSTs the terminal TaskResult {task_id, status, results,
// result_paths}, retrying a failed delivery (Polar tries once).
// Through s.callbacks: only to allowed addresses, checked at connect
// time; a redirect is not followed (it counts as a failed attempt).
func (s *server) polarCallback(u string, st PolarTaskStatus) {
	body, _ := json.Marshal(map[string]any{"task_id": st.TaskID, "status": st.Status, "results": st.Results, "result_paths": st.ResultPaths})
	var last error
	for attempt := 1; attempt <= polarCallbackAttempts; attempt++ {
		code, err := s.callbacks.client.Post(s.svc.Lifetime(), u, "application/json", body)
		if err == nil {
			if code/100 == 2 {
				return
			}
			err = fmt.Errorf("status %d", code)
		}
		last = err
		if errors.Is(err, egress.ErrNotAllowed) || s.svc.Lifetime().Err() != nil {
			break
		}
		if attempt < polarCallbackAttempts {
			select {
			case <-time.After(polarCallbackBackoff * time.Duration(1<<(attempt-1))):
			case <-s.svc.Lifetime().Done():
			}
		}
	}
	s.svc.Logger().Warn("polar callback failed; the trainer must poll GET /rollout/task/{id}", "task", logID(st.TaskID), "url", logID(u), "error", last)
}

// callbacks is where Polar's callbacks may go, and the client that sends them.
type callbacks struct {
	policy *egress.Policy
	client *egress.Client
}

func newCallbacks(allow []string) (callbacks, error) {
	p, err := egress.NewPolicy(allow)
	if err != nil {
		return callbacks{}, fmt.Errorf("server.callback_allow: %w", err)
	}
	return callbacks{policy: p, client: egress.NewClient(p, 10*time.Second)}, nil
}

// maxLoggedID is how much of a caller's id or URL a log line carries.
const maxLoggedID = 200

// logID shortens a caller-supplied string for a log line.
func logID(s string) string {
	if len(s) <= maxLoggedID {
		return s
	}
	return fmt.Sprintf("%s…(%d bytes)", s[:maxLoggedID], len(s))
}

// Callback delivery: 4 attempts, 0.5 s, 1 s, 2 s apart.
var (
	polarCallbackAttempts = 4
	polarCallbackBackoff  = 500 * time.Millisecond
)
