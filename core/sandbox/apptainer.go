package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/prorl/prorl/internal/sandboxproto"
	"github.com/prorl/prorl/internal/syncbuf"
)

// Apptainer runs the agent in an Apptainer (Singularity) instance: the HPC
// sandbox, rootless, from SIF images. The instance is started first, then
// the agent runs in it with `exec instance://`.
type Apptainer struct {
	Path     string // apptainer binary
	ImageDir string
	// UserNS adds --userns: needed when the host runs as root.
	UserNS bool
}

func (a *Apptainer) Name() string { return "apptainer" }

func (a *Apptainer) InnerWorkdir(Launch) string { return Workdir }

// image resolves a name to {image_dir}/{name}.sif or {name}.sandbox (the
// same image unpacked): rootless Apptainer cannot mount a SIF without FUSE
// access, so it prefers the directory; as root the SIF.
func (a *Apptainer) image(name string, rootless bool) (string, error) {
	if name == "" || name == "host" {
		return "", fmt.Errorf("the apptainer driver needs an image: set [sandbox] default_image (the host root is a bwrap-only image)")
	}
	if filepath.IsAbs(name) {
		return name, nil
	}
	forms := []string{name + ".sif", name + ".sandbox"}
	if rootless {
		forms[0], forms[1] = forms[1], forms[0]
	}
	for _, f := range forms {
		if _, err := os.Stat(filepath.Join(a.ImageDir, f)); err == nil {
			return filepath.Join(a.ImageDir, f), nil
		}
	}
	return "", fmt.Errorf("image %q: neither %s nor %s in %s (prorl-host sandbox build-image makes both)", name, forms[0], forms[1], a.ImageDir)
}

// instanceName carries the host instance, so the reaper finds instances of a dead host.
func instanceName(l Launch) string { return instancePrefix(l.Instance) + l.ID }

func instancePrefix(hostInstance string) string { return "prorl-" + hostInstance + "-" }

func (a *Apptainer) cmd(l Launch, args ...string) *exec.Cmd {
	path := a.Path
	if path == "" {
		path = "apptainer"
	}
	c := command(l.UID, path, args...) // rootless, as the sandbox's own uid when the host is root
	c.Dir = l.WorkDir                  // never the host's cwd, which that uid may not enter
	home := filepath.Join(l.WorkDir, ".apptainer-home")
	c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "APPTAINER_CACHEDIR=" + filepath.Join(home, "cache")}
	return c
}

// Prepare starts the instance; cleanup stops it.
func (a *Apptainer) Prepare(ctx context.Context, l Launch) (func(), error) {
	img, err := a.image(l.Spec.Image, l.UID > 0 || os.Geteuid() != 0)
	if err != nil {
		return nil, err
	}
	home := filepath.Join(l.WorkDir, ".apptainer-home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, err
	}
	if l.UID > 0 {
		_ = os.Chown(home, l.UID, l.UID)
	}
	args := []string{"instance", "start", "--containall", "--cleanenv", "--writable-tmpfs", "--no-home",
		"--bind", l.WorkDir + ":" + Workdir, "--bind", l.Agent + ":/.prorl-agent:ro",
		"--env", "HOME=" + Workdir}
	for _, bd := range l.Spec.Binds {
		args = append(args, "--bind", bd.Host+":"+bd.Inside+":ro")
	}
	if l.Spec.Gateway != "" {
		args = append(args, "--bind", l.Spec.Gateway+":"+gatewayInside)
	}
	if !l.Spec.Network {
		args = append(args, "--net", "--network", "none")
	}
	args = append(args, a.nsFlag())
	name := instanceName(l)
	args = append(args, img, name)
	c := a.cmd(l, args...)
	if out, err := runFor(ctx, c, 90*time.Second); err != nil {
		return nil, fmt.Errorf("apptainer instance start: %v: %s", err, tail(string(out)))
	}
	return func() {
		stop := a.cmd(l, "instance", "stop", "--force", name)
		_, _ = runFor(context.Background(), stop, 30*time.Second)
	}, nil
}

// runFor runs a command to completion, killing it after d.
func runFor(ctx context.Context, c *exec.Cmd, d time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var out syncbuf.Buffer // stdout and stderr write from two goroutines
	c.Stdout, c.Stderr = &out, &out
	if err := c.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		return out.Bytes(), err
	case <-ctx.Done():
		_ = c.Process.Kill()
		<-done
		return out.Bytes(), ctx.Err()
	}
}

func tail(s string) string {
	if len(s) > 1500 {
		return s[len(s)-1500:]
	}
	return s
}

// nsFlag is --userns for a root host; rootless, --fakeroot: a user
// namespace where the agent holds capabilities (of that namespace only),
// which it needs to give each command pid and mount namespaces and a /proc
// of their own. Commands run as root of that namespace, with none.
func (a *Apptainer) nsFlag() string {
	if a.UserNS {
		return "--userns"
	}
	return "--fakeroot"
}

// Command runs the agent inside the started instance.
func (a *Apptainer) Command(l Launch) (*exec.Cmd, error) {
	args := []string{"exec", "--pwd", Workdir}
	if a.UserNS {
		args = append(args, "--userns") // a fakeroot instance is joined as it is
	}
	args = append(args, "instance://"+instanceName(l), "/.prorl-agent", "serve")
	c := a.cmd(l, args...)
	c.Env = append(append(c.Env, labelEnv+"="+l.Label), apptainerEnv(l)...)
	return c, nil
}

// apptainerEnv is the sandbox's environment, for the agent exec'd into the
// instance (APPTAINERENV_ passes it through --cleanenv).
func apptainerEnv(l Launch) []string {
	return []string{"APPTAINERENV_" + sandboxproto.EnvVar + "=" + sandboxproto.EncodeEnv(l.Spec.Env)}
}
