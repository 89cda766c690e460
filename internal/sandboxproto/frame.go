package sandboxproto

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
)

// Frames are lines: 32 hex digits of MAC, then the JSON body. The MAC is
// HMAC-SHA256 (truncated to 16 bytes) over the direction, the frame's
// sequence number and the body, under a key the host sends in the Hello
// before anything runs in the sandbox. Sequence numbers are implicit
// (each side counts), so a forged, replayed or reordered frame fails the
// check, and dropping it leaves the channel in step.

// MaxFrame caps one frame; the agent splits larger replies into chunks of
// at most ChunkBytes of payload.
const (
	MaxFrame   = 8 << 20
	ChunkBytes = 2 << 20
	macHex     = 32
	// MaxEntries caps one directory listing.
	MaxEntries = 20000
)

// Directions, so a frame cannot be reflected back to its sender.
const (
	ToAgent byte = 'a'
	ToHost  byte = 'h'
)

// Hello is the first line the host writes, unauthenticated: the key and
// the limits. It never appears on a command line or in an environment.
type Hello struct {
	Key    []byte `json:"key"`
	Limits Limits `json:"limits"`
	// Writable are image directories the agent replaces, before anything
	// runs, with a private writable copy.
	Writable []Writable `json:"writable,omitempty"`
	// Gateway asks the agent to serve the host's LLM gateway inside.
	Gateway *Gateway `json:"gateway,omitempty"`
}

// Gateway: the agent listens on Listen (loopback of the sandbox's own
// network namespace) and relays each connection to the Unix socket the
// host bound at Socket.
type Gateway struct {
	Socket string `json:"socket"`
	Listen string `json:"listen"`
}

// Writable is one directory of the image made writable for one sandbox: a
// tmpfs of Bytes (0: half the memory, the kernel's default) over Path,
// holding a copy of what the image has there. Where the driver mounted the
// tmpfs itself (bwrap: its commands hold no capabilities, so the agent
// cannot), From is where it bound the image's directory, read-only.
type Writable struct {
	Path  string `json:"path"`
	Bytes uint64 `json:"bytes,omitempty"`
	From  string `json:"from,omitempty"`
}

// chain is one direction's MAC and frame count.
type chain struct {
	mac hash.Hash
	dir byte
	seq uint64
}

func newChain(key []byte, dir byte) chain { return chain{mac: hmac.New(sha256.New, key), dir: dir} }

// Sealer authenticates outgoing frames; not safe for concurrent use.
type Sealer struct{ chain }

// NewSealer seals frames in direction dir.
func NewSealer(key []byte, dir byte) *Sealer { return &Sealer{newChain(key, dir)} }

func sum(h hash.Hash, dir byte, seq uint64, body []byte, out []byte) []byte {
	h.Reset()
	var hdr [9]byte
	hdr[0] = dir
	for i := 0; i < 8; i++ {
		hdr[1+i] = byte(seq >> (8 * i))
	}
	h.Write(hdr[:])
	h.Write(body)
	return h.Sum(out[:0])
}

// Seal returns the frame for body, newline included.
func (s *Sealer) Seal(body []byte) []byte {
	var m [sha256.Size]byte
	mac := sum(s.mac, s.dir, s.seq, body, m[:])
	s.seq++
	out := make([]byte, macHex, macHex+len(body)+1)
	hex.Encode(out, mac[:macHex/2])
	out = append(out, body...)
	return append(out, '\n')
}

// Opener checks incoming frames; not safe for concurrent use.
type Opener struct{ chain }

// NewOpener checks frames sent in direction dir.
func NewOpener(key []byte, dir byte) *Opener { return &Opener{newChain(key, dir)} }

// ErrForged is a frame whose MAC does not verify.
var ErrForged = errors.New("frame not authenticated")

// Open verifies a frame (without its newline) and returns its body. A
// frame that fails is not counted, so the next genuine one still verifies.
func (o *Opener) Open(frame []byte) ([]byte, error) {
	if len(frame) < macHex {
		return nil, fmt.Errorf("%w: %d bytes", ErrForged, len(frame))
	}
	var got [macHex / 2]byte
	if _, err := hex.Decode(got[:], frame[:macHex]); err != nil {
		return nil, fmt.Errorf("%w: bad MAC encoding", ErrForged)
	}
	body := frame[macHex:]
	var m [sha256.Size]byte
	want := sum(o.mac, o.dir, o.seq, body, m[:])
	if !hmac.Equal(got[:], want[:macHex/2]) {
		return nil, ErrForged
	}
	o.seq++
	return body, nil
}

// ErrTooLong is a frame over MaxFrame; it was read and discarded, never held.
var ErrTooLong = errors.New("frame exceeds the size cap")

// ReadFrame reads one line of at most max bytes without buffering more
// than that: a longer line is consumed and discarded, and reported with
// its length.
func ReadFrame(r *bufio.Reader, max int) ([]byte, int, error) {
	var line []byte
	n := 0
	for {
		chunk, err := r.ReadSlice('\n')
		n += len(chunk)
		if n <= max+1 {
			line = append(line, chunk...)
		} else {
			line = nil // once over the cap, nothing more is kept
		}
		if err == nil {
			if n > max+1 {
				return nil, n, ErrTooLong
			}
			return line[:len(line)-1], n, nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) && n > 0 {
			if n > max+1 {
				return nil, n, ErrTooLong
			}
			return nil, n, io.ErrUnexpectedEOF
		}
		return nil, n, err
	}
}
