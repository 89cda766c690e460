package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prorl/prorl/internal/sandboxproto"
)

// Bwrap runs the agent under bubblewrap: every namespace unshared (no
// network unless asked), a read-only root, a tmpfs /tmp, the work dir bound
// read-write, dying with its parent.
type Bwrap struct {
	Path string // bwrap binary
	// Images resolves an image name to a root directory; "host" is the
	// host's own /usr, read-only.
	ImageDir string
}

func (b *Bwrap) Name() string { return "bwrap" }

func (b *Bwrap) InnerWorkdir(Launch) string { return Workdir }

// agentInside is where the agent binary is bound: /tmp is a fresh tmpfs in
// every sandbox, so the mount point can always be made.
const agentInside = "/tmp/.prorl-agent"

// lower is where bwrap binds the image's content of writable directory i,
// in the sandbox's own /tmp (lowerBinder).
func (b *Bwrap) lower(i int) string { return "/tmp/.prorl-image/" + strconv.Itoa(i) }

// hostRoot binds the host's system directories read-only. /etc is not
// bound whole: it holds the host's secrets.
var hostRoot = []string{
	"--ro-bind", "/usr", "/usr",
	"--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
	"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
	"--ro-bind-try", "/etc/alternatives", "/etc/alternatives",
	"--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
	"--ro-bind-try", "/etc/ssl", "/etc/ssl",
	"--ro-bind-try", "/etc/localtime", "/etc/localtime",
}

// RootDir resolves an image name to a root directory ("" for the host root).
func RootDir(imageDir, image string) (string, error) {
	if image == "" || image == "host" {
		return "", nil
	}
	dir := image
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(imageDir, image, "rootfs")
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return "", fmt.Errorf("image %q: no root directory at %s (build it with prorl-host sandbox build-image)", image, dir)
	}
	if os.Geteuid() == 0 && !traversable(dir) {
		return "", fmt.Errorf("image %q: %s is inside a directory other users cannot enter; sandboxes run as their own uids (chmod o+x its parents, or move the image)", image, dir)
	}
	return dir, nil
}

func (b *Bwrap) Command(l Launch) (*exec.Cmd, error) {
	root, err := RootDir(b.ImageDir, l.Spec.Image)
	if err != nil {
		return nil, err
	}
	// The agent keeps CAP_SYS_ADMIN and CAP_SETPCAP of the sandbox's own
	// user namespace, to give each command pid and mount namespaces of its
	// own; commands run with none (cmd/prorl-sandbox-agent/init.go).
	args := []string{"--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
		"--cap-drop", "ALL", "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP"}
	if l.Baseline {
		args = args[:4]
	}
	if l.Spec.Network {
		args = append(args, "--share-net", "--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf")
	}
	if root == "" {
		args = append(args, hostRoot...)
	} else {
		args = append(args, "--ro-bind", root, "/")
	}
	// /tmp and the work dir are sized tmpfs: a sandbox cannot fill the
	// host's disk, and what it writes is charged to its memory cgroup.
	args = append(args, "--proc", "/proc", "--dev", "/dev")
	args = append(args, sizedTmpfs(l.Spec.Limits.TmpBytes, "/tmp")...)
	args = append(args, sizedTmpfs(l.Spec.Limits.DiskBytes, Workdir)...)
	// Writable directories: bwrap mounts the sized tmpfs and binds the
	// image's content beside it; the agent copies one into the other
	// (sandboxproto.Writable).
	for i, p := range l.Spec.Writable {
		if root == "" {
			return nil, fmt.Errorf("writable %s: the host root is not an image; name one", p)
		}
		if st, err := os.Stat(filepath.Join(root, p)); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("writable %s: not a directory in image %s", p, l.Spec.Image)
		}
		args = append(args, "--ro-bind", filepath.Join(root, p), b.lower(i))
		args = append(args, sizedTmpfs(l.Spec.Limits.DiskBytes, p)...)
	}
	for _, bd := range l.Spec.Binds {
		args = append(args, "--ro-bind", bd.Host, bd.Inside)
	}
	if l.Spec.Gateway != "" {
		args = append(args, "--bind", l.Spec.Gateway, gatewayInside)
	}
	args = append(args, "--ro-bind", l.Agent, agentInside, "--chdir", Workdir,
		"--setenv", "HOME", Workdir, "--hostname", "sandbox")
	args = append(args, "--setenv", sandboxproto.EnvVar, sandboxproto.EncodeEnv(l.Spec.Env))
	// Last: bwrap applies options in order, and mount points must be made first.
	args = append(args, "--remount-ro", "/")
	args = append(args, "--", agentInside, "serve")
	path := b.Path
	if path == "" {
		path = "bwrap"
	}
	cmd := command(l.UID, path, args...)
	cmd.Dir = l.WorkDir // never the host's cwd, which the sandbox's uid may not enter
	// The label is for the reaper, in the environment of the process on
	// the host side; nothing inside the sandbox sees it.
	cmd.Env = []string{"PATH=/usr/bin:/bin", labelEnv + "=" + l.Label}
	return cmd, nil
}

// checkEnv refuses what a process's environment cannot carry: a name
// other than POSIX's portable ones (letters, digits and _, not first a
// digit), or a NUL in a value.
func checkEnv(env map[string]string) error {
	for k, v := range env {
		ok := k != "" && (k[0] < '0' || k[0] > '9')
		for _, c := range k {
			ok = ok && (c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9')
		}
		if !ok || k == sandboxproto.EnvVar {
			return fmt.Errorf("sandbox env: %q is not a name a sandbox's variable can have (letters, digits and _, not first a digit; not %s)", k, sandboxproto.EnvVar)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("sandbox env: %s's value holds a NUL byte", k)
		}
	}
	return nil
}

// labelEnv names a sandbox's launcher in the host's process table.
const labelEnv = "PRORL_SANDBOX_LABEL"

func sizedTmpfs(size uint64, at string) []string {
	if size == 0 {
		return []string{"--tmpfs", at}
	}
	return []string{"--size", strconv.FormatUint(size, 10), "--tmpfs", at}
}

// command runs path as uid when uid > 0. A host running as root gives each
// sandbox its own unprivileged uid: the kernel does not apply RLIMIT_NPROC
// to root, and a uid per sandbox makes the process limit count one
// sandbox's processes.
func command(uid int, path string, args ...string) *exec.Cmd {
	if uid <= 0 {
		return exec.Command(path, args...)
	}
	id := strconv.Itoa(uid)
	return exec.Command("setpriv", append([]string{"--reuid=" + id, "--regid=" + id, "--clear-groups", "--", path}, args...)...)
}

// None runs the agent with no isolation, in the work directory. Only for
// domains that score text; a deployment must opt in.
type None struct{}

func (None) Name() string { return "none" }

func (None) InnerWorkdir(l Launch) string { return l.WorkDir }

func (None) Command(l Launch) (*exec.Cmd, error) {
	// Its own temporary directory, removed with the work directory: the
	// host's /tmp would keep what a killed command leaves (a judge's
	// directory after the code under test kills it).
	tmp := filepath.Join(l.WorkDir, ".tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("sandbox temporary directory: %w", err)
	}
	cmd := exec.Command(l.Agent, "serve")
	cmd.Dir = l.WorkDir
	env := map[string]string{"TMPDIR": tmp}
	maps.Copy(env, l.Spec.Env)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + l.WorkDir, labelEnv + "=" + l.Label,
		sandboxproto.EnvVar + "=" + sandboxproto.EncodeEnv(env)}
	return cmd, nil
}
