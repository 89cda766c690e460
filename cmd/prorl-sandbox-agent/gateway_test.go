package main

import (
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// TestRelayBounds: the in-sandbox relay serves at most relayMaxConns
// connections at once (the next waits until one closes) and closes a
// connection on which nothing moved for relayIdle.
func TestRelayBounds(t *testing.T) {
	oldMax, oldIdle := relayMaxConns, relayIdle
	relayMaxConns, relayIdle = 2, 300*time.Millisecond
	defer func() { relayMaxConns, relayIdle = oldMax, oldIdle }()

	// The host's side: echoes what it reads, counting connections.
	sock := filepath.Join(t.TempDir(), "gw.sock")
	host, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	accepted := make(chan struct{}, 16)
	go func() {
		for {
			c, err := host.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go acceptRelay(ln, sock)

	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	relayed := func(wait time.Duration) bool {
		select {
		case <-accepted:
			return true
		case <-time.After(wait):
			return false
		}
	}
	a, _ := dial(), dial()
	for i := range 2 {
		if !relayed(2 * time.Second) {
			t.Fatalf("connection %d of the first two was not relayed", i+1)
		}
	}
	third := dial()
	if relayed(100 * time.Millisecond) {
		t.Fatal("a third connection was relayed past the cap")
	}
	// Traffic keeps a connection open past relayIdle...
	buf := make([]byte, 1)
	for range 4 {
		time.Sleep(relayIdle / 2)
		if _, err := a.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(a, buf); err != nil {
			t.Fatalf("an active connection was closed: %v", err)
		}
	}
	// ...silence closes it, and the waiting one is relayed.
	_ = a.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := a.Read(buf); err == nil {
		t.Fatal("an idle connection stayed open")
	}
	if !relayed(5 * time.Second) {
		t.Fatal("the waiting connection was not relayed once a place freed")
	}
	_ = third
}
