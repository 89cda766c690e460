package cgroup

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The forker (cgroup v1): a thread that waits in the next sandbox's groups.
// Moving a thread into a v1 group (a write to its tasks) takes the
// kernel's cgroup_threadgroup_rwsem for writing, which waits out an RCU
// grace period unless another move came just before: 3-5 ms on this VM,
// paid once per sandbox start, on the start's path (bench SandboxHardening: the
// hardening took bwrap's start from 8.3 to 13.7 ms, 4-5 of it in that
// first write). The forker pays it between starts: it joins a spare pair
// of groups, which a start renames to its sandbox's and in which it forks
// that sandbox, and then goes back to the host's own groups. Its thread
// never ends (after close it goes back to the runtime): a child's
// Pdeathsig follows the thread that forked it, not the process. A start
// that finds no spare ready (another start took it a moment before) joins
// and leaves on its own thread, as without a forker.
type forker struct {
	c       *Set
	mu      sync.Mutex
	ready   *spare // joined, waiting for a start
	quit    chan struct{}
	closing sync.Once
	done    chan struct{}
	// forked counts the sandboxes it started.
	forked atomic.Int64
}

// spare is a pair of groups the forker thread is in, waiting.
type spare struct {
	mem, pids string
	cmds      chan *exec.Cmd // nil: not wanted after all
	errs      chan error
}

func newForker(c *Set) *forker {
	f := &forker{c: c, quit: make(chan struct{}), done: make(chan struct{})}
	go f.run()
	return f
}

func (f *forker) run() {
	runtime.LockOSThread()
	tid := strconv.Itoa(unix.Gettid())
	for n := 1; ; n++ {
		select {
		case <-f.quit:
			f.end()
			return
		default:
		}
		name := "spare-" + strconv.Itoa(n)
		sp := &spare{mem: filepath.Join(f.c.mem, name), pids: filepath.Join(f.c.pids, name), cmds: make(chan *exec.Cmd), errs: make(chan error, 1)}
		unused := sp.join(tid) != nil // then starts join on their own threads
		if !unused {
			f.mu.Lock()
			f.ready = sp
			f.mu.Unlock()
			var cmd *exec.Cmd
			select {
			case cmd = <-sp.cmds:
			case <-f.quit:
				f.mu.Lock()
				unused = f.ready == sp
				f.ready = nil
				f.mu.Unlock()
				if !unused {
					cmd = <-sp.cmds // a start took it: it is owed its answer
				}
			}
			if !unused {
				var err error
				if cmd != nil {
					if err = cmd.Start(); err == nil {
						f.forked.Add(1)
					}
				}
				sp.errs <- err
			}
		}
		if !f.c.leave(tid) {
			// Ending this thread would kill the sandboxes it forked
			// (Pdeathsig): it stays, parked, and no spare is made again.
			close(f.done)
			select {}
		}
		if unused {
			removeGroups(sp.mem, sp.pids)
			f.end()
			return
		}
	}
}

// end hands the thread, back in the host's groups, to the runtime.
func (f *forker) end() {
	runtime.UnlockOSThread()
	close(f.done)
}

func (sp *spare) join(tid string) error {
	if err := os.Mkdir(sp.mem, 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(sp.pids, 0o755); err != nil {
		return err
	}
	if err := write(sp.mem, "tasks", tid); err != nil {
		return err
	}
	return write(sp.pids, "tasks", tid)
}

// claim gives g the waiting spare's groups, renamed to g's (nil: none is
// ready).
func (f *forker) claim(g *Group) *spare {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	sp := f.ready
	f.ready = nil
	f.mu.Unlock()
	if sp == nil {
		return nil
	}
	if err := os.Rename(sp.mem, g.mem); err != nil {
		sp.cancel()
		removeGroups(sp.mem, sp.pids)
		return nil
	}
	if err := os.Rename(sp.pids, g.pids); err != nil {
		sp.cancel()
		removeGroups(g.mem, sp.pids)
		return nil
	}
	return sp
}

// start forks cmd on the forker thread, inside the spare's groups.
func (sp *spare) start(cmd *exec.Cmd) error {
	sp.cmds <- cmd
	return <-sp.errs
}

// cancel lets the forker go on without forking (it then leaves the groups).
func (sp *spare) cancel() {
	sp.cmds <- nil
	<-sp.errs
}

func (f *forker) close() {
	if f == nil {
		return
	}
	f.closing.Do(func() { close(f.quit) })
	<-f.done
}
