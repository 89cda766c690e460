// Package testbin builds the binaries a test runs — the host, plugins,
// the sandbox agent, the simulator, example domains — one way for every
// test package: by import path, statically (CGO_ENABLED=0: the sandbox
// agent runs inside images without the host's libc), into a directory of
// the test's own.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
)

// Build builds each import path of bins into dir under its key (which may
// name a subdirectory, as "plugins/prorl-math").
func Build(dir string, bins map[string]string) error {
	names := make([]string, 0, len(bins))
	for n := range bins {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		out := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", out, bins[name])
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %w\n%s", bins[name], err, b)
		}
	}
	return nil
}

// ForMain builds bins into a new temporary directory for a TestMain; it
// exits the test binary if a build fails. cleanup removes the directory.
func ForMain(prefix string, bins map[string]string) (dir string, cleanup func()) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := Build(dir, bins); err != nil {
		os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return dir, func() { os.RemoveAll(dir) }
}
