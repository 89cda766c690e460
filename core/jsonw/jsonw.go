// Package jsonw writes JSON by hand, byte for byte as encoding/json
// writes it (HTML escaping, its float format, compacted raw messages), for
// the hot encoders that reflection made slow: finished results (every
// rollout) and the requests every turn sends to a backend. Each user
// proves the equality with a differential test against encoding/json.
// MinimalString is the one exception: strings as Python's json.dumps and
// Rust's serde_json write them, for renderers checked against those.
package jsonw

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Writer appends JSON to B; the first unsupported value (NaN, ±Inf,
// invalid raw JSON) is kept in Err.
type Writer struct {
	B   []byte
	Err error
}

// Raw appends s as it is.
func (w *Writer) Raw(s string) { w.B = append(w.B, s...) }

// Key writes `,"name":` (no comma for the first field of an object).
func (w *Writer) Key(k string) {
	if c := w.B[len(w.B)-1]; c != '{' && c != '[' {
		w.B = append(w.B, ',')
	}
	w.B = append(w.B, '"')
	w.B = append(w.B, k...)
	w.B = append(w.B, '"', ':')
}

// Str writes a string.
func (w *Writer) Str(s string) { w.B = AppendString(w.B, s) }

// Int writes an integer.
func (w *Writer) Int(n int64) { w.B = strconv.AppendInt(w.B, n, 10) }

// Uint writes an unsigned integer.
func (w *Writer) Uint(n uint64) { w.B = strconv.AppendUint(w.B, n, 10) }

// Bool writes true or false.
func (w *Writer) Bool(v bool) { w.B = strconv.AppendBool(w.B, v) }

// Float writes f as encoding/json does (NaN and ±Inf are errors).
func (w *Writer) Float(f float64) {
	var ok bool
	if w.B, ok = AppendFloat(w.B, f); !ok {
		w.unsupported(f)
	}
}

func (w *Writer) unsupported(f float64) {
	if w.Err == nil {
		w.Err = &json.UnsupportedValueError{Str: strconv.FormatFloat(f, 'g', -1, 64)}
	}
}

// List writes a JSON array of n elements, each written by elem (null
// when null is set, as encoding/json writes a nil slice).
func (w *Writer) List(null bool, n int, elem func(i int)) {
	if null {
		w.Raw("null")
		return
	}
	w.B = append(w.B, '[')
	for i := range n {
		if i > 0 {
			w.B = append(w.B, ',')
		}
		elem(i)
	}
	w.B = append(w.B, ']')
}

// Value writes v through encoding/json (rare fields).
func (w *Writer) Value(v any) {
	out, err := json.Marshal(v)
	if err != nil && w.Err == nil {
		w.Err = err
	}
	w.B = append(w.B, out...)
}

// Strs writes a list of strings.
func (w *Writer) Strs(v []string) { w.List(v == nil, len(v), func(i int) { w.Str(v[i]) }) }

// AppendFloat formats like encoding/json: %f, or %e for very small or
// large magnitudes with a short exponent (1e-07 -> 1e-7).
func AppendFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, '0'), false
	}
	if f == 0 && !math.Signbit(f) {
		return append(b, '0'), true
	}
	abs := math.Abs(f)
	if abs < 1e15 && f == math.Trunc(f) && f != 0 {
		// Whole numbers (a temperature of 1, a reward, a count): %f of one
		// is its integer, and AppendInt is several times cheaper.
		return strconv.AppendInt(b, int64(f), 10), true
	}
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

// The loops below work on a local slice: appending through w.B stores a
// pointer into the writer on every element (a write barrier while the GC
// runs), which cost more than the formatting.

// Ints writes token ids.
func (w *Writer) Ints(v []int) {
	if v == nil {
		w.Raw("null")
		return
	}
	// Room for the common case (ids below 10^7 and a comma each): the
	// loop writes digits in place, by index, instead of appending.
	b := slices.Grow(w.B, 2+8*len(v))
	buf, at := b[:cap(b)], len(b)
	buf[at] = '['
	at++
	for i, n := range v {
		if uint(n) >= 1e7 || len(buf)-at < 9 {
			b = buf[:at]
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(n), 10)
			b = slices.Grow(b, 8*(len(v)-i))
			buf, at = b[:cap(b)], len(b)
			continue
		}
		if i > 0 {
			buf[at] = ','
			at++
		}
		at = putSmall(buf, at, uint(n))
	}
	w.B = append(buf[:at], ']')
}

// pairs is "00".."99": two digits per division.
const pairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839" +
	"4041424344454647484950515253545556575859606162636465666768697071727374757677787980818283848586878889" +
	"90919293949596979899"

// putSmall writes n < 10^7 at buf[at:], which has room, and returns the
// index after it.
func putSmall(buf []byte, at int, n uint) int {
	var k int
	switch {
	case n < 10:
		buf[at] = byte('0' + n)
		return at + 1
	case n < 100:
		k = 2
	case n < 1000:
		k = 3
	case n < 10000:
		k = 4
	case n < 100000:
		k = 5
	case n < 1000000:
		k = 6
	default:
		k = 7
	}
	end := at + k
	i := end
	for n >= 100 {
		q := n % 100 * 2
		n /= 100
		buf[i-1], buf[i-2] = pairs[q+1], pairs[q]
		i -= 2
	}
	if n >= 10 {
		buf[i-1], buf[i-2] = pairs[n*2+1], pairs[n*2]
	} else {
		buf[i-1] = byte('0' + n)
	}
	return end
}

// Mask writes a loss mask.
func (w *Writer) Mask(v []int8) {
	if v == nil {
		w.Raw("null")
		return
	}
	b := append(w.B, '[')
	for i, n := range v {
		if i > 0 {
			b = append(b, ',')
		}
		if n == 0 || n == 1 {
			b = append(b, '0'+byte(n))
		} else {
			b = strconv.AppendInt(b, int64(n), 10)
		}
	}
	w.B = append(b, ']')
}

// Floats writes logprobs.
func (w *Writer) Floats(v []float64) {
	if v == nil {
		w.Raw("null")
		return
	}
	b := append(w.B, '[')
	for i, f := range v {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = AppendFloat(b, f); !ok {
			w.unsupported(f)
		}
	}
	w.B = append(b, ']')
}

// RawJSON writes a RawMessage as encoding/json does (compacted, HTML
// escaped, an error if invalid). Tool schemas repeat in every rollout of a
// domain and every turn, so small ones are compacted once.
func (w *Writer) RawJSON(m json.RawMessage) {
	if len(m) <= maxCachedRaw {
		rawMu.RLock()
		v, ok := rawCache[string(m)]
		rawMu.RUnlock()
		if ok {
			w.B = append(w.B, v...)
			return
		}
	}
	if plain(m) && json.Valid(m) {
		// What encoding/json writes as it is: each rollout's own small
		// values (a plugin's info) would only churn the cache.
		w.B = append(w.B, m...)
		return
	}
	v, err := json.Marshal(m)
	if err != nil {
		if w.Err == nil {
			w.Err = err
		}
		return
	}
	if len(m) <= maxCachedRaw {
		rawMu.Lock()
		if len(rawCache) >= maxCachedRaws {
			clear(rawCache) // bounded: an unusual workload just stops hitting
		}
		rawCache[string(m)] = v
		rawMu.Unlock()
	}
	w.B = append(w.B, v...)
}

// plain is whether encoding/json would write valid m unchanged: no
// whitespace outside strings (compacting removes it), and none of the
// bytes it escapes (<, >, &, and U+2028/U+2029, whose UTF-8 starts with
// 0xE2: any 0xE2 is refused, to stay simple).
func plain(m []byte) bool {
	in := false
	for i := 0; i < len(m); i++ {
		switch c := m[i]; c {
		case '<', '>', '&', 0xE2:
			return false
		case ' ', '\t', '\n', '\r':
			if !in {
				return false
			}
		case '\\':
			i++ // the escaped byte is never a quote that ends the string
		case '"':
			in = !in
		}
	}
	return len(m) > 0
}

const (
	maxCachedRaw  = 16 << 10
	maxCachedRaws = 256
)

var (
	rawMu    sync.RWMutex
	rawCache = map[string][]byte{}
)

const hexDigits = "0123456789abcdef"

// AppendString quotes s exactly as encoding/json does with HTML escaping:
// invalid UTF-8 becomes U+FFFD, and U+2028/U+2029 are escaped.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// MinimalString writes s as a JSON string escaping only what JSON requires
// (quote, backslash, control characters; everything else as is), as
// Python's json.dumps(ensure_ascii=False) and Rust's serde_json write it.
func MinimalString(b *strings.Builder, s string) {
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b.WriteString(s[start:i])
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			fmt.Fprintf(b, `\u%04x`, c)
		}
		start = i + 1
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}
