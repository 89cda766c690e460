// Package images builds the sandbox images: a Debian root filesystem with
// mmdebstrap, and for Apptainer a SIF and its sandbox directory. The
// sandbox manager runs what is built here; it does not build.
package images

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prorl/prorl/core/sandbox"
)

// DefaultPackages are in the default image: what agents and tests need.
var DefaultPackages = []string{"python3", "python3-pytest", "git", "patch", "coreutils", "procps", "util-linux", "ca-certificates"}

// CodePackages are in the code image: the default image and the toolchains
// the code domain judges with (C, C++, Java, JavaScript) and numpy for
// HumanEval+ checks.
var CodePackages = append(append([]string{}, DefaultPackages...), "g++", "gcc", "openjdk-17-jdk-headless", "nodejs", "python3-numpy")

// ImageInfo is written beside an image's root.
type ImageInfo struct {
	Name     string    `json:"name"`
	Suite    string    `json:"suite"`
	Packages []string  `json:"packages"`
	Built    time.Time `json:"built"`
	Builder  string    `json:"builder"`
}

// SamePackages says whether the image was built with these packages (its
// image.json lists them); an image without one counts as the same.
func SamePackages(dir, name string, packages []string) bool {
	b, err := os.ReadFile(filepath.Join(dir, name, "image.json"))
	if err != nil {
		return true
	}
	var info ImageInfo
	if json.Unmarshal(b, &info) != nil {
		return true
	}
	return slices.Equal(info.Packages, packages)
}

// BuildImage makes dir/name/rootfs from Debian packages with mmdebstrap
// (minbase), ready to be a sandbox's read-only root. It replaces an
// existing image only when the new one is complete.
func BuildImage(ctx context.Context, dir, name, suite string, packages []string, out io.Writer) (string, error) {
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return "", fmt.Errorf("mmdebstrap not found: apt-get install mmdebstrap (make test does)")
	}
	if name == "" || strings.ContainsAny(name, "/\\") || name == "host" {
		return "", fmt.Errorf("bad image name %q", name)
	}
	base := filepath.Join(dir, name)
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	tmp := filepath.Join(base, "rootfs.building")
	_ = sandbox.RemoveAll(tmp)
	mode := "auto" // root: chroot; otherwise user namespaces (unshare)
	args := []string{"--variant=minbase", "--mode=" + mode, "--include=" + strings.Join(packages, ","),
		// Mount points the sandbox drivers bind onto a read-only root.
		"--customize-hook=mkdir -p \"$1/work\" \"$1/.prorl\"",
		"--customize-hook=rm -rf \"$1\"/var/cache/apt/archives/*.deb \"$1\"/var/lib/apt/lists/*",
		suite, tmp}
	cmd := exec.CommandContext(ctx, "mmdebstrap", args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		_ = sandbox.RemoveAll(tmp)
		return "", fmt.Errorf("mmdebstrap: %w", err)
	}
	// Readable and enterable by the sandboxes' uids.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	final := filepath.Join(base, "rootfs")
	old := filepath.Join(base, "rootfs.old")
	_ = sandbox.RemoveAll(old)
	if _, err := os.Stat(final); err == nil {
		if err := os.Rename(final, old); err != nil {
			return "", err
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", err
	}
	_ = sandbox.RemoveAll(old)
	info, _ := json.MarshalIndent(ImageInfo{Name: name, Suite: suite, Packages: packages, Built: time.Now().UTC(), Builder: "mmdebstrap minbase"}, "", "  ")
	if err := os.WriteFile(filepath.Join(base, "image.json"), append(info, '\n'), 0o644); err != nil {
		return "", err
	}
	return final, nil
}

// BuildSIF packs an image's root into dir/name.sif with `apptainer build`
// (which adds the /.singularity.d that `instance start` needs).
func BuildSIF(ctx context.Context, apptainer, dir, name string, out io.Writer) (string, error) {
	root, err := sandbox.RootDir(dir, name)
	if err != nil {
		return "", err
	}
	sif := filepath.Join(dir, name+".sif")
	tmp := sif + ".building"
	cmd := exec.CommandContext(ctx, apptainer, "build", "--force", tmp, root)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + os.TempDir()}
	if err := cmd.Run(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("apptainer build: %w", err)
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, sif); err != nil {
		return "", err
	}
	return sif, buildSandboxDir(ctx, apptainer, sif, filepath.Join(dir, name+".sandbox"), out)
}

// buildSandboxDir unpacks a SIF's file system into an Apptainer sandbox
// directory: rootless Apptainer cannot mount a SIF without FUSE access,
// but runs a directory. (`apptainer build --sandbox` as root trips over
// capabilities here; the squashfs partition unpacked is the same thing.)
func buildSandboxDir(ctx context.Context, apptainer, sif, dest string, out io.Writer) error {
	sqfs := dest + ".squashfs"
	f, err := os.Create(sqfs)
	if err != nil {
		return err
	}
	defer os.Remove(sqfs)
	dump := exec.CommandContext(ctx, apptainer, "sif", "dump", "3", sif)
	dump.Stdout, dump.Stderr = f, out
	dump.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + os.TempDir()}
	err = dump.Run()
	f.Close()
	if err != nil {
		return fmt.Errorf("apptainer sif dump: %w", err)
	}
	tmp := dest + ".building"
	_ = sandbox.RemoveAll(tmp)
	un := exec.CommandContext(ctx, "unsquashfs", "-q", "-n", "-d", tmp, sqfs)
	un.Stdout, un.Stderr = out, out
	if err := un.Run(); err != nil {
		_ = sandbox.RemoveAll(tmp)
		return fmt.Errorf("unsquashfs: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	_ = sandbox.RemoveAll(dest)
	return os.Rename(tmp, dest)
}
