// Package rundir gives a host process one directory of its own under the
// system's temporary directory, for its sockets: the agent gateway's and
// its plugins' (go-plugin's and the Python SDK's, through
// PLUGIN_UNIX_SOCKET_DIR). A host that stops removes it; a host that was
// killed (SIGKILL, the OOM killer, a batch system's time limit) cannot, and
// the next host to start on the machine removes it then.
//
// Each directory holds a lock file, locked (flock) for the host's life: the
// kernel drops the lock when the process dies, however it dies, so a lock
// that can be taken marks a directory nobody uses. Process ids are not
// used: they are reused.
package rundir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// Prefix begins the name of every host's directory.
const Prefix = "prorl-host-"

// lockName is the lock file inside a directory.
const lockName = ".lock"

// Dir is a host's directory, locked until Close.
type Dir struct {
	Path string
	lock *os.File
}

// open are this process's directories not yet closed (CloseAll).
var (
	openMu sync.Mutex
	open   = map[*Dir]bool{}
)

// Create sweeps base (os.TempDir() if empty) of directories left by killed
// hosts, then makes and locks this host's. The directory is 0711: a
// sandbox's uid may reach a socket in it by name (the gateway's, bound into
// sandboxes) but not list it.
func Create(base string) (d *Dir, removed []string, err error) {
	if base == "" {
		base = os.TempDir()
	}
	removed = Sweep(base)
	// Another host's sweep may take a new directory's lock between its
	// creation and ours (then it removes it): try again with another.
	for range 100 {
		path, err := os.MkdirTemp(base, Prefix)
		if err != nil {
			return nil, removed, fmt.Errorf("run directory: %w", err)
		}
		f, err := lock(path)
		if err == nil {
			if err = os.Chmod(path, 0o711); err == nil {
				d := &Dir{Path: path, lock: f}
				openMu.Lock()
				open[d] = true
				openMu.Unlock()
				return d, removed, nil
			}
			f.Close()
		}
		if !errors.Is(err, errLost) {
			os.RemoveAll(path)
			return nil, removed, fmt.Errorf("run directory: %w", err)
		}
	}
	return nil, removed, fmt.Errorf("run directory: %w", errLost)
}

var errLost = errors.New("swept by another host as it was made")

// lock takes the lock of path's lock file (creating it), never waiting.
// The sweep takes it the same way, so of a host creating its directory and
// a sweep, one gets it; errLost tells the host it was the sweep.
func lock(path string) (*os.File, error) {
	name := filepath.Join(path, lockName)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errLost // the directory is gone
	}
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLost // held by a sweep removing the directory (or its host)
		}
		return nil, err
	}
	// Locked, but a sweep may have locked, removed and let go before.
	held, err1 := f.Stat()
	named, err2 := os.Stat(name)
	if err1 != nil || err2 != nil || !os.SameFile(held, named) {
		f.Close()
		return nil, errLost
	}
	return f, nil
}

// Close removes the directory and what is left in it, then lets go of
// the lock.
func (d *Dir) Close() error {
	if d == nil {
		return nil
	}
	openMu.Lock()
	if !open[d] {
		openMu.Unlock()
		return nil
	}
	delete(open, d)
	openMu.Unlock()
	err := os.RemoveAll(d.Path)
	return errors.Join(err, d.lock.Close())
}

// CloseAll closes every directory of this process's: for an exit that
// skips the hosts' own shutdown (a second SIGTERM), so that the next host
// need not sweep them.
func CloseAll() {
	openMu.Lock()
	ds := make([]*Dir, 0, len(open))
	for d := range open {
		ds = append(ds, d)
	}
	openMu.Unlock()
	for _, d := range ds {
		d.Close()
	}
}

// Sweep removes base's host directories that no live process holds: this
// user's whose lock it can take. It returns what it removed; what it
// cannot read it leaves.
func Sweep(base string) (removed []string) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return nil
	}
	uid := os.Getuid()
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), Prefix) {
			continue
		}
		if path := filepath.Join(base, e.Name()); removeStale(path, uid) {
			removed = append(removed, path)
		}
	}
	return removed
}

// removeStale removes path if it is uid's and no process holds its lock,
// holding the lock while it does: no host can take the directory then.
func removeStale(path string, uid int) bool {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil || int(st.Uid) != uid {
		return false
	}
	// A host killed before it locked left no lock file: lock makes one. A
	// host locking its new directory now either wins (and this leaves it)
	// or loses, and makes another (Create).
	f, err := lock(path)
	if err != nil {
		return false // a live host's
	}
	defer f.Close()
	return os.RemoveAll(path) == nil
}
