package lengthhist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
)

// A memo outlives the host in a file (the host writes it beside its
// durable store): a training run's epochs span restarts (an HPC job's time
// limit, a crash), and an empty memory after each would start every task
// as unknown again. The format, all little-endian:
//
//	"PRORLLH1" | uvarint count | count × (key u64, mean f64, n u8) | CRC-32C of all before
//
// Older entries come first, so loading into a smaller memo keeps the newest.

const magic = "PRORLLH1"

// entrySize is one entry's bytes: key, mean, n.
const entrySize = 8 + 8 + 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crcOf(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// ErrFormat is wrapped by Load's errors for data that is not a saved memo.
var ErrFormat = errors.New("not a saved length memory")

// AppendBinary appends the memo's saved form to b and marks it saved.
func (m *Memo) AppendBinary(b []byte) []byte {
	start := len(b)
	b = append(b, magic...)
	if m == nil {
		b = binary.AppendUvarint(b, 0)
		return binary.LittleEndian.AppendUint32(b, crcOf(b[start:]))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b = binary.AppendUvarint(b, uint64(len(m.old)+len(m.cur)))
	for _, gen := range []map[Key]entry{m.old, m.cur} {
		for k, e := range gen {
			b = binary.LittleEndian.AppendUint64(b, uint64(k))
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(e.mean))
			b = append(b, byte(e.n))
		}
	}
	m.dirty = false
	return binary.LittleEndian.AppendUint32(b, crcOf(b[start:]))
}

// Saved reports whether nothing changed since the last AppendBinary.
func (m *Memo) Saved() bool {
	if m == nil {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.dirty
}

// Load adds the entries of a saved memo (AppendBinary) and returns how many
// it read; on malformed data it adds nothing.
func (m *Memo) Load(data []byte) (int, error) {
	if len(data) < len(magic)+1+4 || string(data[:len(magic)]) != magic {
		return 0, fmt.Errorf("%w: no header", ErrFormat)
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crcOf(body) != sum {
		return 0, fmt.Errorf("%w: checksum mismatch (truncated or damaged)", ErrFormat)
	}
	rest := body[len(magic):]
	count, n := binary.Uvarint(rest)
	if n <= 0 {
		return 0, fmt.Errorf("%w: bad entry count", ErrFormat)
	}
	rest = rest[n:]
	if count > uint64(len(rest)) || uint64(len(rest)) != count*entrySize {
		return 0, fmt.Errorf("%w: %d bytes for %d entries", ErrFormat, len(rest), count)
	}
	type kv struct {
		k Key
		e entry
	}
	es := make([]kv, 0, count)
	for i := 0; i < len(rest); i += entrySize {
		k := Key(binary.LittleEndian.Uint64(rest[i:]))
		mean := math.Float64frombits(binary.LittleEndian.Uint64(rest[i+8:]))
		cnt := int(rest[i+16])
		if cnt < 1 || cnt > window || math.IsNaN(mean) || mean < 0 || mean > math.MaxInt32 {
			return 0, fmt.Errorf("%w: entry %d: mean %g over %d rollouts", ErrFormat, i/entrySize, mean, cnt)
		}
		es = append(es, kv{k, entry{mean: mean, n: cnt}})
	}
	if m == nil {
		return 0, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, x := range es {
		m.putLocked(x.k, x.e)
	}
	return len(es), nil
}

// WriteFile saves the memo to path atomically (a crash leaves the old file
// or the new one, never a mix).
func (m *Memo) WriteFile(path string) error {
	if m == nil {
		return nil
	}
	data := m.AppendBinary(nil)
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("save lengths: %w", err)
	}
	defer os.Remove(tmp.Name()) // gone after the rename; left only on failure
	if _, err = tmp.Write(data); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		m.mu.Lock()
		m.dirty = true // not saved after all
		m.mu.Unlock()
		return fmt.Errorf("save lengths: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync() // the rename itself durable
		d.Close()
	}
	return nil
}

// ReadFile loads a memo saved at path; a missing file loads nothing.
func (m *Memo) ReadFile(path string) (int, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("load lengths: %w", err)
	}
	n, err := m.Load(data)
	if err != nil {
		return 0, fmt.Errorf("load lengths %s: %w", path, err)
	}
	return n, nil
}
