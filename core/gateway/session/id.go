package session

import (
	"crypto/rand"
	"encoding/hex"
)

// NewID is a random id for a reply.
func NewID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
