// Package profiling starts a CPU profile for the commands' --cpuprofile flag.
package profiling

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// Start writes a CPU profile to path until the returned stop is called,
// and then the allocations since the start to path.allocs (what the
// garbage collector's share of the CPU comes from); an empty path
// profiles nothing.
func Start(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		if a, err := os.Create(path + ".allocs"); err == nil {
			_ = pprof.Lookup("allocs").WriteTo(a, 0)
			a.Close()
		}
	}, nil
}
