// Package reqbody reads an HTTP request's body the way every handler of
// the host's servers must: bounded in size and in time, so a client that
// sends too much, or drips its body a byte at a time, holds neither memory
// nor a connection (and its goroutine) for long.
package reqbody

import (
	"errors"
	"io"
	"net"
	"net/http"
	"time"
)

// ErrTimeout: the body did not arrive within the deadline.
var ErrTimeout = errors.New("the request body took too long to arrive")

// Read reads r's body, at most limit bytes (a *http.MaxBytesError past
// it) and within timeout (ErrTimeout past it).
func Read(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration) ([]byte, error) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(timeout))
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err == nil {
		// Cleared only on success: after a failed read the passed deadline
		// keeps the server from waiting for the rest of a dripping body.
		_ = rc.SetReadDeadline(time.Time{})
		return data, nil
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return nil, ErrTimeout
	}
	return nil, err
}
