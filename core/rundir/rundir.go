// Package rundir gives a host process one directory of its own under the
// system's temporary directory, for its sockets: the agent gateway's and
// its plugins' (go-plugin's and the Python SDK's, through
// PLUGIN_UNIX_SOCKET_DIR). A host that stops removes it; a host that was
// killed (SIGKILL, the OOM killer, a batch system's time limit) cannot, and
// the next host to start on the machine removes it then.
//
// Each directory is claimed with package dirlock: a lock file, locked for
// the host's life, marks it as a live host's.
package rundir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/prorl/prorl/core/dirlock"
)

// Prefix begins the name of every host's directory.
const Prefix = "prorl-host-"

// SocketRoom is the most a socket in a host's directory adds to its path:
// "/plugin-dir" and 10 digits, then "/plugin" and 10 digits (go-plugin's
// broker and server), or "/prorl-plugin-" and 8 characters, then
// "/plugin.sock" (the Python SDK's).
const SocketRoom = len("/plugin-dir") + 10 + len("/prorl-plugin-") + 8 + len("/plugin.sock")

// MaxSocketPath is the longest path a Unix socket can have (sun_path: 108
// bytes, its terminating NUL included).
const MaxSocketPath = 107

// Fits is whether every socket a host makes under dir fits a Unix socket
// address.
func Fits(dir string) bool { return dir != "" && len(dir)+SocketRoom <= MaxSocketPath }

// Base is where hosts' directories go: the system's temporary directory
// ($TMPDIR), or /tmp where $TMPDIR's path leaves too little room for the
// sockets in them (a batch job's scratch directory can be long; the
// sockets would not bind, and the host would not start).
func Base() string {
	t := os.TempDir()
	if Fits(filepath.Join(t, Prefix+"4294967295")) { // MkdirTemp's longest name
		return t
	}
	if st, err := os.Stat("/tmp"); err == nil && st.IsDir() {
		return "/tmp"
	}
	return t
}

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

// Create sweeps base (Base() if empty) of directories left by killed
// hosts, then makes and locks this host's. The directory is 0711: a
// sandbox's uid may reach a socket in it by name (the gateway's, bound into
// sandboxes) but not list it.
func Create(base string) (d *Dir, removed []string, err error) {
	if base == "" {
		base = Base()
	}
	removed = Sweep(base)
	path, f, err := dirlock.Claim(func() (string, error) { return os.MkdirTemp(base, Prefix) })
	if err != nil {
		return nil, removed, fmt.Errorf("run directory: %w", err)
	}
	if err := os.Chmod(path, 0o711); err != nil {
		os.RemoveAll(path)
		f.Close()
		return nil, removed, fmt.Errorf("run directory: %w", err)
	}
	d = &Dir{Path: path, lock: f}
	openMu.Lock()
	open[d] = true
	openMu.Unlock()
	return d, removed, nil
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
	// A host killed before it locked left no lock file: Lock makes one. A
	// host locking its new directory now either wins (and this leaves it)
	// or loses, and makes another (dirlock.Claim).
	f, err := dirlock.Lock(path)
	if err != nil {
		return false // a live host's
	}
	defer f.Close()
	return os.RemoveAll(path) == nil
}
