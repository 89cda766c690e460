package rundir

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prorl/prorl/core/dirlock"
	"github.com/prorl/prorl/internal/hammer"
)

// helperEnv makes the test binary a host that creates its directory in
// the base it names, prints it, and waits to be killed.
const helperEnv = "RUNDIR_TEST_HELPER_BASE"

// held keeps the helper's directory reachable, as a host keeps its own: a
// Dir the collector finalised would close its lock file, and the lock.
var held *Dir

func TestMain(m *testing.M) {
	if base := os.Getenv(helperEnv); base != "" {
		var err error
		if held, _, err = Create(base); err != nil {
			os.Stdout.WriteString("error " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Stdout.WriteString(held.Path + "\n")
		time.Sleep(time.Hour) // killed by the test (select{} would be a deadlock, and exit)
	}
	os.Exit(m.Run())
}

// host starts a helper process holding a directory in base.
func host(t *testing.T, base string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+base)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !filepath.IsAbs(line[:len(line)-1]) {
		t.Fatalf("helper: %q %v", line, err)
	}
	return cmd, line[:len(line)-1]
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

func TestCreateClose(t *testing.T) {
	base := t.TempDir()
	d, removed, err := Create(base)
	if err != nil || len(removed) != 0 {
		t.Fatalf("Create: %v, removed %v", err, removed)
	}
	st, err := os.Stat(d.Path)
	if err != nil || st.Mode().Perm() != 0o711 || filepath.Dir(d.Path) != base {
		t.Fatalf("%s: %v %v", d.Path, st.Mode(), err)
	}
	if err := os.WriteFile(filepath.Join(d.Path, "gateway.sock"), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if got := Sweep(base); len(got) != 0 {
		t.Fatalf("swept a live host's directory: %v", got)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if exists(d.Path) {
		t.Fatal("directory left after Close")
	}
}

// A host killed with SIGKILL leaves its directory; the next host to start
// removes it, and leaves a live host's alone.
func TestKilledHostSwept(t *testing.T) {
	base := t.TempDir()
	killed, dead := host(t, base)
	_, live := host(t, base)
	if err := os.WriteFile(filepath.Join(dead, "plugin123"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := killed.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = killed.Wait()
	if !exists(dead) {
		t.Fatal("a killed host removed its directory: the test shows nothing")
	}
	d, removed, err := Create(base)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !slices.Equal(removed, []string{dead}) || exists(dead) {
		t.Fatalf("removed %v, want the killed host's %s (still there: %v)", removed, dead, exists(dead))
	}
	if !exists(live) {
		t.Fatal("the live host's directory was removed")
	}
}

func TestSweepLeaves(t *testing.T) {
	base := t.TempDir()
	mk := func(name string) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		return p
	}
	crashed := mk(Prefix + "crashed") // killed before it locked: no lock file
	other := mk("prorl-gateway-x")    // not a host directory
	target := mk("target")
	if err := os.Symlink(target, filepath.Join(base, Prefix+"link")); err != nil {
		t.Fatal(err)
	}
	keep := []string{other, target, filepath.Join(base, Prefix+"link")}
	if os.Getuid() == 0 { // another user's: never ours to remove
		theirs := mk(Prefix + "theirs")
		if err := os.Chown(theirs, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		keep = append(keep, theirs)
	}
	if got := Sweep(base); !slices.Equal(got, []string{crashed}) {
		t.Fatalf("swept %v, want only %s", got, crashed)
	}
	for _, p := range keep {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// Hosts starting while others sweep: a sweep may take a directory between
// its creation and its lock (its host then makes another), never one a
// host holds (flock conflicts between two opens in one process as between
// processes).
func TestCreateWhileSweeping(t *testing.T) {
	base := t.TempDir()
	stop := hammer.Start(4, func() { Sweep(base) })
	var dirs []*Dir
	for range 200 {
		d, _, err := Create(base)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	stop()
	for _, d := range dirs {
		if !exists(filepath.Join(d.Path, dirlock.Name)) {
			t.Fatalf("%s was swept while its host held it", d.Path)
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(int(d.lock.Fd()), &st); err != nil || st.Nlink == 0 {
			t.Fatalf("%s: its lock file is not the one named there", d.Path)
		}
		d.Close()
	}
}

func TestCloseAll(t *testing.T) {
	base := t.TempDir()
	a, _, err := Create(base)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := Create(base)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	CloseAll()
	if exists(a.Path) || exists(b.Path) {
		t.Fatalf("left after CloseAll: %v %v", exists(a.Path), exists(b.Path))
	}
	if err := b.Close(); err != nil { // closed already: nothing to do
		t.Fatal(err)
	}
}

// Base is $TMPDIR while the longest socket in a host's directory there
// fits a socket address, and /tmp past that.
func TestBase(t *testing.T) {
	short := t.TempDir()
	room := MaxSocketPath - len("/"+Prefix) - 10 - SocketRoom // the longest $TMPDIR kept
	for _, c := range []struct {
		name   string
		tmpdir string
		want   string
	}{
		{"short", short, short},
		{"longest kept", "/" + strings.Repeat("a", room-1), "/" + strings.Repeat("a", room-1)},
		{"one too long", "/" + strings.Repeat("a", room), "/tmp"},
		{"scratch of a batch job", "/" + strings.Repeat("s", 150), "/tmp"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("TMPDIR", c.tmpdir)
			if got := Base(); got != c.want {
				t.Errorf("Base() = %q, want %q", got, c.want)
			}
		})
	}
	// A socket with the longest name binds in a directory made there.
	t.Setenv("TMPDIR", "/"+strings.Repeat("s", 150))
	d, _, err := Create("")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ln, err := net.Listen("unix", filepath.Join(d.Path, strings.Repeat("s", SocketRoom-1)))
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
}
