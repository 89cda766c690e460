package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"sync"

	"github.com/prorl/prorl/internal/sandboxproto"
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
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go relay(c, g.Socket)
		}
	}()
}

func relay(c net.Conn, socket string) {
	defer c.Close()
	u, err := net.Dial("unix", socket)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		return
	}
	defer u.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(u, c)
		if cw, ok := u.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	}()
	_, _ = io.Copy(c, u)
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	wg.Wait()
}
