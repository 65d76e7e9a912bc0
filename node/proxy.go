package node

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// proxy is a TCP relay in front of a node: it is how links are cut and
// slowed without tc netem (not in this kernel) or root.
//
// A cut link stalls: connections are still accepted and bytes are held, not
// dropped, and delivered after Heal, the way TCP retransmission delivers
// them after a partition heals. Clients see reads time out.
type proxy struct {
	ln       net.Listener
	upstream string

	mu      sync.Mutex
	cut     bool
	healed  chan struct{} // closed when a cut ends
	latency time.Duration
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
}

func startProxy(upstream string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, upstream: upstream, healed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.healed)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			c.Close()
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *proxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	if !p.pass() {
		return
	}
	server, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
	if err != nil {
		return // the node is down: the client sees its connection closed
	}
	if !p.track(server) {
		server.Close()
		return
	}
	defer p.untrack(server)
	done := make(chan struct{}, 2)
	go func() { p.relay(server, client); done <- struct{}{} }()
	go func() { p.relay(client, server); done <- struct{}{} }()
	<-done
	client.Close()
	server.Close()
	<-done
}

// relay copies src to dst, holding each chunk while the link is cut and
// delaying it by the configured latency.
func (p *proxy) relay(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.pass() {
				return
			}
			if d := p.delay(); d > 0 {
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return
			}
			if tc, ok := dst.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
			return
		}
	}
}

// pass waits while the link is cut; false once the proxy is closed.
func (p *proxy) pass() bool {
	for {
		p.mu.Lock()
		healed, cut, closed := p.healed, p.cut, p.closed
		p.mu.Unlock()
		if closed {
			return false
		}
		if !cut {
			return true
		}
		<-healed
	}
}

func (p *proxy) delay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.latency
}

func (p *proxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cut == p.cut {
		return
	}
	p.cut = cut
	if cut {
		p.healed = make(chan struct{})
	} else {
		close(p.healed)
	}
}

func (p *proxy) setLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

func (p *proxy) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	if p.cut {
		p.cut = false
		close(p.healed)
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}
