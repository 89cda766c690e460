package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/core/config"
	"github.com/prorl/prorl/core/dirlock"
	"github.com/prorl/prorl/core/sandbox/cgroup"
	"github.com/prorl/prorl/internal/sandboxproto"
	"github.com/prorl/prorl/internal/seccomp"
	"golang.org/x/sys/unix"
)

// Config configures the manager.
type Config struct {
	Driver    string // bwrap | apptainer | none
	BwrapPath string
	// ApptainerPath is the apptainer binary; empty searches PATH and the
	// build cache of `python3 scripts/ref.py install apptainer`.
	ApptainerPath string
	// ApptainerRootMode is how a root host runs Apptainer: "userns" (as
	// root with --userns; the default) or "user" (rootless, as ApptainerUser).
	ApptainerRootMode string
	// ApptainerUser is the unprivileged account of "user" mode; Apptainer
	// needs a real account, so sandboxes share it (and its process count).
	ApptainerUser string
	ImageDir      string
	DefaultImage  string
	WorkRoot      string // work directories live under WorkRoot/<instance>/<id>
	Agent         string // prorl-sandbox-agent binary
	// MaxStarting caps sandboxes starting at once, overall and per image, so a
	// burst of rollouts does not storm the node.
	MaxStarting         int
	MaxStartingPerImage int
	Limits              Limits
	StopGrace           time.Duration
	// Seccomp is "default" (internal/seccomp's deny list, less what a spec
	// allows) or "off".
	Seccomp string
	// Cgroups is "auto" (per-sandbox cgroups where the host can make
	// them, else per-process limits), "required" or "off".
	Cgroups string
	// FaultStartRate fails this share of starts on purpose (fault drills).
	FaultStartRate float64
	// Baseline starts sandboxes as they were before the hardening (no
	// per-command namespaces, seccomp, cgroups, capabilities or sized
	// tmpfs), for benchmarks that measure its cost. Never for serving.
	Baseline bool
}

// Manager starts, tracks and stops sandboxes, and reaps what a crashed host left.
type Manager struct {
	cfg      Config
	driver   Driver
	log      hclog.Logger
	instance string
	lock     *os.File
	sem      chan struct{}
	imgMu    sync.Mutex
	imgSem   map[string]chan struct{}
	mu       sync.Mutex
	boxes    map[string]*Sandbox
	// stopping counts stops under way (Stop), which Close waits for.
	stopping sync.WaitGroup
	reserved map[string]*Reserved
	starting atomic.Int64
	uids     atomic.Int64
	asRoot   bool
	fixedUID int // apptainer user mode: the one account sandboxes run as
	cgroups  *cgroup.Set
	cgErr    error
	// Counters count frames and output the host refused from sandboxes.
	Counters Counters
}

// uidBase starts the uids given to sandboxes when the host runs as root;
// far above any real account.
const uidBase = 4_000_000

// New checks the driver, claims an instance directory and reaps leftovers.
func New(cfg Config, log hclog.Logger) (*Manager, error) {
	if cfg.MaxStarting <= 0 {
		cfg.MaxStarting = 16
	}
	if cfg.MaxStartingPerImage <= 0 {
		cfg.MaxStartingPerImage = cfg.MaxStarting
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 2 * time.Second
	}
	if cfg.DefaultImage == "" {
		cfg.DefaultImage = "host"
	}
	var d Driver
	switch cfg.Driver {
	case "bwrap", "":
		p := cfg.BwrapPath
		if p == "" {
			p = "bwrap"
		}
		path, err := exec.LookPath(p)
		if err != nil {
			return nil, fmt.Errorf("sandbox driver bwrap: %w (install bubblewrap)", err)
		}
		d = &Bwrap{Path: path, ImageDir: cfg.ImageDir}
	case "apptainer":
		path, err := FindApptainer(cfg.ApptainerPath)
		if err != nil {
			return nil, err
		}
		userns := os.Geteuid() == 0 && cfg.ApptainerRootMode != "user"
		d = &Apptainer{Path: path, ImageDir: cfg.ImageDir, UserNS: userns}
	case "none":
		d = None{}
		log.Warn("sandbox driver none: commands run WITHOUT isolation on this host; only for domains that score text")
	default:
		return nil, fmt.Errorf("unknown sandbox driver %q", cfg.Driver)
	}
	if st, err := os.Stat(cfg.Agent); err != nil || st.IsDir() {
		return nil, fmt.Errorf("sandbox agent %q not found: build it with make build", cfg.Agent)
	}
	m := &Manager{cfg: cfg, driver: d, log: log, sem: make(chan struct{}, cfg.MaxStarting), imgSem: map[string]chan struct{}{}, boxes: map[string]*Sandbox{}, reserved: map[string]*Reserved{},
		asRoot: os.Geteuid() == 0 && (d.Name() == "bwrap" || d.Name() == "apptainer" && cfg.ApptainerRootMode == "user")}
	if m.asRoot && d.Name() == "apptainer" {
		name := cfg.ApptainerUser
		if name == "" {
			name = "nobody"
		}
		u, err := user.Lookup(name)
		if err != nil {
			return nil, fmt.Errorf("apptainer user mode: %w", err)
		}
		m.fixedUID, _ = strconv.Atoi(u.Uid)
	}
	if err := os.MkdirAll(cfg.WorkRoot, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox work root: %w", err)
	}
	if m.asRoot {
		// Sandboxes run as other uids: they must be able to walk to their
		// work dirs and the agent. A work root inside a private directory
		// is replaced by a root-owned one that others can cross but not list.
		if !traversable(cfg.WorkRoot) {
			alt := filepath.Join("/var/tmp", "prorl-sandboxes")
			log.Warn("sandbox work root is not reachable by the sandboxes' uids; using another", "configured", cfg.WorkRoot, "using", alt)
			m.cfg.WorkRoot = alt
			if err := os.MkdirAll(alt, 0o711); err != nil {
				return nil, fmt.Errorf("sandbox work root: %w", err)
			}
		}
		if err := os.Chmod(m.cfg.WorkRoot, 0o711); err != nil {
			return nil, err
		}
		cfg = m.cfg
		agent := filepath.Join(cfg.WorkRoot, "prorl-sandbox-agent")
		if err := copyFile(cfg.Agent, agent, 0o755); err != nil {
			return nil, fmt.Errorf("install sandbox agent: %w", err)
		}
		m.cfg.Agent = agent
	}
	m.Reap()
	// The instance directory's lock, held for the host's life, tells
	// other hosts' reapers that its sandboxes are live.
	dir, f, err := dirlock.Claim(func() (string, error) {
		dir := filepath.Join(cfg.WorkRoot, fmt.Sprintf("h%d-%s", os.Getpid(), randHex(4)))
		return dir, os.Mkdir(dir, 0o755)
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox instance directory: %w", err)
	}
	m.instance = filepath.Base(dir)
	m.lock = f
	if cfg.Cgroups != "off" && d.Name() != "none" && !cfg.Baseline {
		m.cgroups, m.cgErr = cgroup.New(m.instance)
		if m.cgErr != nil && cfg.Cgroups == "required" {
			_ = RemoveAll(dir)
			m.lock.Close()
			return nil, fmt.Errorf("sandbox cgroups required: %w", m.cgErr)
		}
		if m.cgErr != nil {
			log.Warn("sandboxes get per-process limits only: memory and process count are not bounded per sandbox", "reason", m.cgErr)
		}
	}
	return m, nil
}

// Enforcement says how memory and processes are bounded: "cgroup v1",
// "cgroup v2", or per-process rlimits and why.
func (m *Manager) Enforcement() string {
	switch {
	case m.cgroups != nil:
		return m.cgroups.Version()
	case m.cgErr != nil:
		return "per-process rlimits (" + m.cgErr.Error() + ")"
	}
	return "per-process rlimits"
}

// Driver is the driver's name.
func (m *Manager) Driver() string { return m.driver.Name() }

// Instance is this host's label prefix.
func (m *Manager) Instance() string { return m.instance }

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func labelPrefix(instance string) string { return "prorl:" + instance + "/" }

// Reap kills the sandboxes of hosts that died and removes their work dirs
// and cgroups, and the cgroups of dead hosts whose work dirs are gone.
func (m *Manager) Reap() {
	m.reapDirs()
	if m.cfg.Cgroups == "off" {
		return
	}
	known := func(instance string) bool {
		if instance == m.instance {
			return true
		}
		_, err := os.Stat(filepath.Join(m.cfg.WorkRoot, instance))
		return err == nil
	}
	if n := cgroup.ReapOrphans(known); n > 0 {
		m.log.Info("removed the cgroups of dead hosts whose work directories are gone", "instances", n)
	}
}

// reapDirs reaps the dead hosts of the work root, which their directories'
// locks tell.
func (m *Manager) reapDirs() {
	ents, err := os.ReadDir(m.cfg.WorkRoot)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || e.Name() == m.instance || !strings.HasPrefix(e.Name(), "h") {
			continue
		}
		dir := filepath.Join(m.cfg.WorkRoot, e.Name())
		// Held while reaping, so a host claiming this name now gets
		// another; a lock that cannot be taken is a live host's, or one
		// this user may not touch.
		f, err := dirlock.Lock(dir)
		if err != nil {
			continue
		}
		n := killLabelled(labelPrefix(e.Name())) + killLabelled(instancePrefix(e.Name()))
		if m.cfg.Cgroups != "off" {
			cgroup.Reap(e.Name())
		}
		err = RemoveAll(dir)
		f.Close()
		if err != nil {
			m.log.Warn("reaper could not remove leftovers", "dir", dir, "error", err)
			continue
		}
		m.log.Info("reaped the sandboxes of a dead host", "instance", e.Name(), "processes_killed", n)
	}
}

// killLabelled kills every process whose command line or environment
// carries the label.
func killLabelled(prefix string) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if !strings.Contains(string(b), prefix) && !strings.Contains(string(env), labelEnv+"="+prefix) {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

func (m *Manager) imageSem(image string) chan struct{} {
	m.imgMu.Lock()
	defer m.imgMu.Unlock()
	s, ok := m.imgSem[image]
	if !ok {
		s = make(chan struct{}, m.cfg.MaxStartingPerImage)
		m.imgSem[image] = s
	}
	return s
}

func acquire(ctx context.Context, s chan struct{}) error {
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Start starts a sandbox for an owner (a rollout id), waiting its turn
// under the start caps.
func (m *Manager) Start(ctx context.Context, owner string, spec Spec) (*Sandbox, error) {
	if spec.Image == "" {
		spec.Image = m.cfg.DefaultImage
	}
	spec.Limits = merge(spec.Limits, m.cfg.Limits)
	m.starting.Add(1)
	defer m.starting.Add(-1)
	if err := acquire(ctx, m.sem); err != nil {
		return nil, err
	}
	defer func() { <-m.sem }()
	is := m.imageSem(spec.Image)
	if err := acquire(ctx, is); err != nil {
		return nil, err
	}
	defer func() { <-is }()
	if err := seccomp.Validate(spec.SeccompAllow); err != nil {
		return nil, err
	}
	if err := checkWritable(m.driver.Name(), spec.Writable); err != nil {
		return nil, err
	}
	if err := checkEnv(spec.Env); err != nil {
		return nil, err
	}
	id := "sb-" + randHex(8)
	dir := filepath.Join(m.cfg.WorkRoot, m.instance, id)
	var err error
	if err = os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	isolate := m.driver.Name() != "none"
	lim := sandboxproto.Limits{CPUSeconds: spec.Limits.CPUSeconds, MemoryBytes: spec.Limits.ProcessMemoryBytes,
		MaxProcesses: spec.Limits.MaxProcesses, MaxFileBytes: spec.Limits.MaxFileBytes, MaxOutputBytes: spec.Limits.MaxOutputBytes,
		Seccomp: m.cfg.Seccomp, SeccompAllow: spec.SeccompAllow, Isolate: isolate, RequireIsolation: isolate}
	if m.driver.Name() == "none" {
		lim.Seccomp = "off" // documented as unprotected; its commands are the host's own
	}
	if m.cfg.Baseline {
		lim.Seccomp, lim.Isolate, lim.RequireIsolation = "off", false, false
		spec.Limits.TmpBytes, spec.Limits.DiskBytes = 0, 0
	}
	// The label names the host instance and the sandbox, never the rollout:
	// it is the one thing about the host a sandbox's launcher carries.
	l := Launch{ID: id, Label: labelPrefix(m.instance) + id, Spec: spec, WorkDir: dir, Agent: m.cfg.Agent, Limits: lim, Instance: m.instance, Baseline: m.cfg.Baseline}
	if m.asRoot {
		l.UID = m.freeUID()
		if m.fixedUID > 0 {
			l.UID = m.fixedUID
		}
		if err := os.Chown(dir, l.UID, l.UID); err != nil {
			_ = RemoveAll(dir)
			return nil, err
		}
	}
	if l.Cgroup, err = m.cgroups.Create(id, spec.Limits.MemoryBytes, spec.Limits.MaxProcesses); err != nil {
		_ = RemoveAll(dir)
		return nil, fmt.Errorf("sandbox cgroup: %w", err)
	}
	unmount := m.sizeWorkDir(l)
	s, err := start(ctx, m.driver, l, m.log.With("sandbox", id, "rollout", owner), &m.Counters)
	if err != nil {
		l.Cgroup.Remove()
		unmount()
		_ = RemoveAll(dir)
		return nil, err
	}
	s.unmount = unmount
	m.mu.Lock()
	m.boxes[id] = s
	m.mu.Unlock()
	return s, nil
}

// sizeWorkDir gives an Apptainer sandbox a sized work directory: a host
// running as root mounts a tmpfs of the disk budget there (bwrap makes
// its own). It returns the undo.
func (m *Manager) sizeWorkDir(l Launch) func() {
	if m.driver.Name() != "apptainer" || os.Geteuid() != 0 || l.Spec.Limits.DiskBytes == 0 {
		return func() {}
	}
	uid := max(l.UID, 0)
	opts := fmt.Sprintf("size=%d,mode=0755,uid=%d,gid=%d", l.Spec.Limits.DiskBytes, uid, uid)
	if err := unix.Mount("tmpfs", l.WorkDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		m.log.Warn("work dir not sized; it is on the host's disk", "error", err)
		return func() {}
	}
	return func() { _ = unix.Unmount(l.WorkDir, unix.MNT_DETACH) }
}

// FindApptainer locates the apptainer binary.
func FindApptainer(configured string) (string, error) {
	if configured != "" {
		return exec.LookPath(configured)
	}
	if p, err := exec.LookPath("apptainer"); err == nil {
		return p, nil
	}
	home, _ := os.UserHomeDir()
	for _, base := range []string{"/var/cache", filepath.Join(home, ".cache")} {
		found, _ := filepath.Glob(filepath.Join(base, "prorl", "apptainer-*", "bin", "apptainer"))
		if len(found) > 0 {
			return found[len(found)-1], nil
		}
	}
	return "", fmt.Errorf("sandbox driver apptainer: apptainer not found (python3 scripts/ref.py install apptainer builds it)")
}

// traversable reports whether every directory up to dir lets others through.
func traversable(dir string) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for p := abs; ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm()&0o001 == 0 {
			return false
		}
		if p == "/" {
			return true
		}
	}
}

// freeUID picks a uid no process runs as: the process limit counts per
// uid, so a uid shared with leftovers of another sandbox would start full.
func (m *Manager) freeUID() int {
	used := map[int]bool{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if st, err := os.Stat(filepath.Join("/proc", e.Name())); err == nil {
			if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid >= uidBase {
				used[int(sys.Uid)] = true
			}
		}
	}
	for {
		uid := uidBase + int(m.uids.Add(1)%1_000_000) + int(os.Getpid()%1000)*1000
		if !used[uid] {
			return uid
		}
	}
}

func copyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	tmp := dst + ".tmp" + randHex(4)
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

func merge(a, def Limits) Limits {
	pick := func(x, y uint64) uint64 {
		if x > 0 {
			return x
		}
		return y
	}
	l := Limits{CPUSeconds: pick(a.CPUSeconds, def.CPUSeconds), MemoryBytes: pick(a.MemoryBytes, def.MemoryBytes),
		ProcessMemoryBytes: pick(a.ProcessMemoryBytes, def.ProcessMemoryBytes),
		MaxProcesses:       pick(a.MaxProcesses, def.MaxProcesses), MaxFileBytes: pick(a.MaxFileBytes, def.MaxFileBytes),
		MaxOutputBytes: pick(a.MaxOutputBytes, def.MaxOutputBytes), TmpBytes: pick(a.TmpBytes, def.TmpBytes), DiskBytes: pick(a.DiskBytes, def.DiskBytes)}
	// A sandbox asked to hold more memory than one process may map would
	// be no use: the per-process cap grows with it.
	l.ProcessMemoryBytes = max(l.ProcessMemoryBytes, a.MemoryBytes)
	return l
}

// ErrNoSandbox is returned for an unknown sandbox id.
var ErrNoSandbox = errors.New("no such sandbox")

// Get returns a running sandbox.
func (m *Manager) Get(id string) (*Sandbox, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.boxes[id]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoSandbox, id)
	}
	return s, nil
}

// Stop stops and removes a sandbox: no process, mount or directory stays.
func (m *Manager) Stop(id string) error {
	m.mu.Lock()
	s, ok := m.boxes[id]
	delete(m.boxes, id)
	if ok {
		m.stopping.Add(1) // Close waits for it: a stop may run in the background
	}
	m.mu.Unlock()
	if !ok {
		return nil
	}
	defer m.stopping.Done()
	return s.stop(m.cfg.StopGrace)
}

// Stats reports sandboxes alive and starting.
func (m *Manager) Stats() (alive, starting int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.boxes), int(m.starting.Load())
}

// Close stops every sandbox and releases the instance directory.
func (m *Manager) Close() {
	m.mu.Lock()
	ids := make([]string, 0, len(m.boxes))
	for id := range m.boxes {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() { defer wg.Done(); _ = m.Stop(id) }()
	}
	wg.Wait()
	m.stopping.Wait()
	m.cgroups.Close()
	if m.lock != nil {
		_ = RemoveAll(filepath.Join(m.cfg.WorkRoot, m.instance))
		m.lock.Close()
	}
}

// ConfigFrom maps the [sandbox] table onto the manager's configuration.
func ConfigFrom(sc config.Sandbox) Config {
	return Config{Driver: sc.Driver, ApptainerPath: sc.ApptainerPath, ApptainerRootMode: sc.ApptainerRootMode, ApptainerUser: sc.ApptainerUser,
		ImageDir: sc.ImageDir, DefaultImage: sc.DefaultImage, WorkRoot: sc.WorkRoot, Agent: sc.AgentBinary,
		MaxStarting: sc.MaxStarting, MaxStartingPerImage: sc.MaxStartingPerImage, Seccomp: sc.Seccomp, Cgroups: sc.Cgroups,
		Limits: Limits{CPUSeconds: sc.CPUSeconds, MemoryBytes: sc.MemoryMiB << 20, ProcessMemoryBytes: sc.ProcessMemoryMiB << 20,
			MaxProcesses: sc.MaxProcesses, MaxFileBytes: sc.MaxFileMiB << 20, MaxOutputBytes: sc.MaxOutputKiB << 10,
			TmpBytes: sc.TmpMiB << 20, DiskBytes: sc.WorkMiB << 20}, FaultStartRate: sc.FaultStartRate}
}
