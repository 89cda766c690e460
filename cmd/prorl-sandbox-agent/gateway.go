package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/prorl/prorl/internal/sandboxproto"
)

// Bounds of the relay: model-written code shares the sandbox with the
// harness and can open connections to it too.
var (
	// relayMaxConns connections are relayed at once; more wait in the
	// listen backlog until one closes.
	relayMaxConns = 64
	// relayIdle closes a connection on which nothing moved either way for
	// this long (a generation being waited for moves nothing: generous).
	relayIdle = 15 * time.Minute
)

// serveGateway relays the host's LLM gateway into the sandbox: a harness
// connects to loopback (the sandbox has no other network), each connection
// goes on to the Unix socket the host bound in. The host's side serves the
// gateway's routes alone, authenticated by each session's key.
func serveGateway(g *sandboxproto.Gateway) {
	ln, err := net.Listen("tcp", g.Listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		return
	}
	go acceptRelay(ln, g.Socket)
}

func acceptRelay(ln net.Listener, socket string) {
	slots := make(chan struct{}, relayMaxConns)
	for {
		slots <- struct{}{} // a free place before the next accept
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer func() { <-slots }()
			relay(c, socket)
		}()
	}
}

func relay(c net.Conn, socket string) {
	defer c.Close()
	u, err := net.Dial("unix", socket)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		return
	}
	defer u.Close()
	// Each read in either direction pushes both deadlines on: the
	// connection ends only when both sides were silent for relayIdle.
	alive := func() {
		t := time.Now().Add(relayIdle)
		_ = c.SetReadDeadline(t)
		_ = u.SetReadDeadline(t)
	}
	alive()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		pump(u, c, alive)
		if cw, ok := u.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	}()
	pump(c, u, alive)
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	wg.Wait()
}

// pump copies src to dst, calling alive after every read that moved bytes.
func pump(dst io.Writer, src io.Reader, alive func()) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			alive()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
