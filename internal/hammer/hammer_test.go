package hammer

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestStartStop(t *testing.T) {
	var calls atomic.Int64
	stop := Start(3, func() { calls.Add(1); time.Sleep(time.Millisecond) })
	for calls.Load() < 30 {
		time.Sleep(time.Millisecond)
	}
	stop()
	n := calls.Load()
	time.Sleep(20 * time.Millisecond)
	if calls.Load() != n {
		t.Fatalf("calls went on after stop: %d then %d", n, calls.Load())
	}
	stop() // a second stop is harmless
}
