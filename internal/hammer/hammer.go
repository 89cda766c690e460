// Package hammer runs an action over and over in goroutines beside a
// test's own work: the tests of races between a process's own steps and
// another's (a host claiming a directory while others sweep).
package hammer

import "sync"

// Start runs f in n goroutines, each calling it again as soon as it
// returns, until stop is called; stop returns once they have all ended.
func Start(n int, f func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
					f()
				}
			}
		})
	}
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}
