package sandbox

import "sync/atomic"

// Counters count what sandboxes sent that the host refused to keep.
type Counters struct {
	oversized, forged, malformed, late atomic.Uint64
	// OutputDropped counts output bytes over a call's cap.
	OutputDropped atomic.Uint64
}

// FrameReasons are the reasons a frame from a sandbox is dropped.
var FrameReasons = []string{"oversized", "forged", "malformed", "late"}

// FramesDropped is the counter of frames dropped for a reason.
func (c *Counters) FramesDropped(reason string) *atomic.Uint64 {
	switch reason {
	case "oversized":
		return &c.oversized
	case "forged":
		return &c.forged
	case "malformed":
		return &c.malformed
	default:
		return &c.late
	}
}
