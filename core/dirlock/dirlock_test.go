package dirlock

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/prorl/prorl/internal/hammer"
)

func TestLock(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string) // before Lock
		want  error                          // nil: locked
	}{
		{"fresh directory", func(*testing.T, string) {}, nil},
		{"lock file left by a dead owner", func(t *testing.T, dir string) {
			f, err := Lock(dir)
			if err != nil {
				t.Fatal(err)
			}
			f.Close() // as the kernel does when the owner dies
		}, nil},
		{"held", func(t *testing.T, dir string) {
			f, err := Lock(dir) // flock conflicts between open files of one process too
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
		}, ErrLost},
		{"gone", func(t *testing.T, dir string) { os.RemoveAll(dir) }, ErrLost},
		{"swept between open and lock", func(t *testing.T, dir string) {
			testHookOpened = func(dir string) {
				testHookOpened = nil
				sweep(t, dir)
			}
			t.Cleanup(func() { testHookOpened = nil })
		}, ErrLost},
		{"recreated by another owner between open and lock", func(t *testing.T, dir string) {
			testHookOpened = func(dir string) {
				testHookOpened = nil
				sweep(t, dir)
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				f, err := Lock(dir)
				if err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
			t.Cleanup(func() { testHookOpened = nil })
		}, ErrLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, dir)
			f, err := Lock(dir)
			if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
				t.Fatalf("Lock: %v, want %v", err, tc.want)
			}
			if f != nil {
				f.Close()
			}
		})
	}
}

// sweep removes dir as a sweep does: locking the lock file, removing,
// letting go.
func sweep(t *testing.T, dir string) {
	f, err := os.Open(filepath.Join(dir, Name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
}

// Owners claiming directories while sweepers remove every one whose lock
// they can take: each claimed directory stays, with its lock, until its
// owner lets go.
func TestClaimWhileSweeping(t *testing.T) {
	base := t.TempDir()
	stop := hammer.Start(4, func() {
		ents, _ := os.ReadDir(base)
		for _, e := range ents {
			dir := filepath.Join(base, e.Name())
			if f, err := Lock(dir); err == nil {
				os.RemoveAll(dir)
				f.Close()
			}
		}
	})
	defer stop()
	for i := range 300 {
		dir, f, err := Claim(func() (string, error) { return os.MkdirTemp(base, "d") })
		if err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		if _, err := os.Stat(filepath.Join(dir, Name)); err != nil {
			t.Fatalf("claim %d: swept while held: %v", i, err)
		}
		f.Close()
	}
}

func TestClaimMkdirError(t *testing.T) {
	want := errors.New("no room")
	if _, _, err := Claim(func() (string, error) { return "", want }); !errors.Is(err, want) {
		t.Fatalf("%v", err)
	}
}
