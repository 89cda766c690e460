package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// aptStatus is a dpkg status database in dpkg's own format, read by the
// real dpkg-query through DPKG_ADMINDIR: a package installed, one removed
// with its config files kept (what apt-get remove leaves), one unpacked but
// not configured (an install that broke off).
const aptStatus = `Package: here
Status: install ok installed
Architecture: amd64
Version: 22.05.8-4+deb12u3
Maintainer: x
Description: y

Package: gone
Status: deinstall ok config-files
Architecture: amd64
Version: 156.0.8078.108-1~deb12u1
Maintainer: x
Description: y

Package: half
Status: install ok unpacked
Architecture: amd64
Version: 1.0-1
Maintainer: x
Description: y
`

// TestAptVersion: scripts/apt.sh counts a package as installed only when
// dpkg says it is. `dpkg -s` exits 0 for all three packages above, and a
// fresh machine's make test went on without Chromium, removed but not
// purged.
func TestAptVersion(t *testing.T) {
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		t.Skip("not a Debian system: no dpkg-query")
	}
	admin := t.TempDir()
	for _, d := range []string{"info", "updates"} {
		if err := os.Mkdir(filepath.Join(admin, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(admin, "status"), []byte(aptStatus), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join("..", "scripts", "apt.sh")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("bash", append([]string{script}, args...)...)
		cmd.Env = append(os.Environ(), "DPKG_ADMINDIR="+admin, "TMPDIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("apt.sh %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, tt := range []struct{ pkg, want string }{
		{"here", "22.05.8-4+deb12u3"},
		{"gone", ""},
		{"half", ""},
		{"never-heard-of", ""},
	} {
		if got := run("version", tt.pkg); got != tt.want {
			t.Errorf("version %s = %q, want %q", tt.pkg, got, tt.want)
		}
	}
	// Nothing missing: no apt-get, no output.
	if got := run("ensure", "here"); got != "" {
		t.Errorf("ensure of an installed package said %q", got)
	}
}
