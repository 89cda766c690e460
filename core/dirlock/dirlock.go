// Package dirlock marks a directory as owned by a live process: a lock
// file inside it, locked (flock) for the owner's life. The kernel drops the
// lock when the process dies, however it dies, so a lock that can be taken
// marks a directory nobody uses, which whoever takes it may remove. Process
// ids are not used: they are reused.
//
// A sweep locks a directory before removing it and holds the lock while it
// does, so of an owner locking its new directory and a sweep, exactly one
// gets it; the owner then makes another (Claim).
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Name is the lock file inside a directory.
const Name = ".lock"

// ErrLost says the directory is gone, or another process holds its lock.
var ErrLost = errors.New("directory gone or held by another process")

// Lock takes the lock of dir's lock file (creating it), never waiting. It
// returns ErrLost when dir is gone or another process holds the lock: a
// live owner's, or a sweep's that is removing dir. The caller holds the
// lock until it closes the file.
func Lock(dir string) (*os.File, error) {
	name := filepath.Join(dir, Name)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrLost
	}
	if err != nil {
		return nil, err
	}
	if testHookOpened != nil {
		testHookOpened(dir)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrLost
		}
		return nil, err
	}
	// Locked, but a sweep may have locked, removed and let go before.
	held, err1 := f.Stat()
	named, err2 := os.Stat(name)
	if err1 != nil || err2 != nil || !os.SameFile(held, named) {
		f.Close()
		return nil, ErrLost
	}
	return f, nil
}

// testHookOpened runs between Lock's open and its flock: a test sweeps
// there, in the window no schedule reliably hits.
var testHookOpened func(dir string)

// Claim makes a new directory with mkdir and locks it. When a sweep takes
// it first (it was removed), Claim tries again with another; mkdir must
// make a new name each call and fail if the name exists.
func Claim(mkdir func() (string, error)) (string, *os.File, error) {
	for range 100 {
		dir, err := mkdir()
		if err != nil {
			return "", nil, err
		}
		f, err := Lock(dir)
		if err == nil {
			return dir, f, nil
		}
		if !errors.Is(err, ErrLost) {
			os.RemoveAll(dir)
			return "", nil, fmt.Errorf("lock %s: %w", dir, err)
		}
	}
	return "", nil, ErrLost
}
