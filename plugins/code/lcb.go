package main

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// lcbPrivate reads LiveCodeBench's private_test_cases: JSON text, or (in
// its releases) base64 of zlib of a pickled str holding that JSON.
func lcbPrivate(raw json.RawMessage) (json.RawMessage, error) {
	if b, ok := jsonText(raw); ok {
		return b, nil // a list, or JSON text of one
	}
	var s string
	_ = json.Unmarshal(raw, &s) // jsonText found a string
	z, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("neither JSON nor base64: %w", err)
	}
	zr, err := zlib.NewReader(bytes.NewReader(z))
	if err != nil {
		return nil, fmt.Errorf("zlib: %w", err)
	}
	p, err := io.ReadAll(io.LimitReader(zr, 1<<30))
	if err != nil {
		return nil, fmt.Errorf("zlib: %w", err)
	}
	text, err := pickledString(p)
	if err != nil {
		return nil, err
	}
	if b := bytes.TrimSpace([]byte(text)); json.Valid(b) {
		return b, nil
	}
	return nil, errors.New("the unpickled text is not JSON")
}

// pickledString reads a pickle whose only value is a str. Nothing else is
// accepted: a pickle can otherwise name any callable.
func pickledString(p []byte) (string, error) {
	var val *string
	i := 0
	need := func(n int) error {
		if i+n > len(p) {
			return errors.New("pickle: truncated")
		}
		return nil
	}
	for i < len(p) {
		op := p[i]
		i++
		switch op {
		case 0x80: // PROTO
			if err := need(1); err != nil {
				return "", err
			}
			i++
		case 0x95: // FRAME
			if err := need(8); err != nil {
				return "", err
			}
			i += 8
		case 0x8c, 'X', 0x8d: // SHORT_BINUNICODE, BINUNICODE, BINUNICODE8
			var n int
			switch op {
			case 0x8c:
				if err := need(1); err != nil {
					return "", err
				}
				n = int(p[i])
				i++
			case 'X':
				if err := need(4); err != nil {
					return "", err
				}
				n = int(binary.LittleEndian.Uint32(p[i:]))
				i += 4
			default:
				if err := need(8); err != nil {
					return "", err
				}
				u := binary.LittleEndian.Uint64(p[i:])
				if u > uint64(len(p)) {
					return "", errors.New("pickle: truncated")
				}
				n = int(u)
				i += 8
			}
			if n < 0 || need(n) != nil || val != nil {
				return "", errors.New("pickle: not a single str")
			}
			s := string(p[i : i+n])
			val = &s
			i += n
		case 0x94: // MEMOIZE
		case 'q': // BINPUT
			i++
		case 'r': // LONG_BINPUT
			i += 4
		case '.': // STOP
			if val == nil {
				return "", errors.New("pickle: no str")
			}
			return *val, nil
		default:
			return "", fmt.Errorf("pickle: opcode 0x%02x is not part of a pickled str", op)
		}
	}
	return "", errors.New("pickle: no STOP")
}
