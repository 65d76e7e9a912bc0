package main

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
)

// rawFloor is the physical floor: the same two rounds as goFloor, on one
// plain TCP connection per node with RESP written by hand, many requests in
// flight on a connection at once (pipelined), and both rounds returning at
// the majority. No client library can do less work per lock.
type rawFloor struct{ conns []*rawConn }

func newRawFloor(addrs []string) *rawFloor {
	f := &rawFloor{}
	for _, a := range addrs {
		f.conns = append(f.conns, &rawConn{addr: a})
	}
	return f
}

const releaseSrc = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`

var releaseSHA = func() string { s := sha1.Sum([]byte(releaseSrc)); return hex.EncodeToString(s[:]) }()

var ttlMillis = strconv.FormatInt(ttl.Milliseconds(), 10)

func (f *rawFloor) try(ctx context.Context, key string) (func(context.Context) error, error) {
	value := newValue()
	ok := f.round(ctx, resp("SET", key, value, "NX", "PX", ttlMillis), func(r rawReply) bool { return r.kind == '+' })
	release := func(ctx context.Context) error {
		f.round(ctx, resp("EVALSHA", releaseSHA, "1", key, value), func(r rawReply) bool { return r.kind == ':' })
		return nil
	}
	if !ok {
		release(ctx)
		return nil, errNotAcquired
	}
	return release, nil
}

func (f *rawFloor) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	return retryTry(ctx, f, key)
}

// round sends req to every node and returns once a majority said yes, or
// enough said no that none can.
func (f *rawFloor) round(ctx context.Context, req []byte, yes func(rawReply) bool) bool {
	n := len(f.conns)
	need := n/2 + 1
	out := make(chan rawReply, n)
	for _, c := range f.conns {
		c.send(req, out)
	}
	y, no := 0, 0
	for y < need && no <= n-need {
		select {
		case r := <-out:
			if r.err == nil && yes(r) {
				y++
			} else {
				no++
			}
		case <-ctx.Done():
			return false
		}
	}
	return y >= need
}

func (f *rawFloor) close() {
	for _, c := range f.conns {
		c.close()
	}
}

func resp(args ...string) []byte {
	b := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}

type rawReply struct {
	kind byte // '+', '-', ':', '$' or '*'
	err  error
}

// rawConn is one node's connection, dialled on first use and again after
// it breaks. Replies come back in the order requests were written, so a
// request's reply channel is queued, under the same lock, as it is written.
type rawConn struct {
	addr string
	mu   sync.Mutex
	s    *rawSession
}

// rawPipeline bounds the requests in flight on one connection: 256
// goroutines with a round in flight each, and the stragglers of their
// previous rounds, stay well below it.
const rawPipeline = 1024

type rawSession struct {
	conn    net.Conn
	w       *bufio.Writer
	pending chan chan<- rawReply
}

func (c *rawConn) send(req []byte, out chan<- rawReply) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.s == nil {
		s, err := dialRaw(c.addr)
		if err != nil {
			out <- rawReply{err: err}
			return
		}
		c.s = s
		go c.read(s)
	}
	c.s.pending <- out
	c.s.w.Write(req)
	if err := c.s.w.Flush(); err != nil {
		c.s.conn.Close() // the reader fails every pending request
	}
}

// dialRaw connects and loads the release script, so that EVALSHA finds it.
func dialRaw(addr string) (*rawSession, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	s := &rawSession{conn: conn, w: bufio.NewWriter(conn), pending: make(chan chan<- rawReply, rawPipeline)}
	conn.Write(resp("SCRIPT", "LOAD", releaseSrc))
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(conn)
	if k, err := readReply(r); err != nil || k != '$' {
		conn.Close()
		return nil, fmt.Errorf("raw floor: SCRIPT LOAD on %s: %v %c", addr, err, k)
	}
	conn.SetReadDeadline(time.Time{})
	// The reader continues with r's buffer: nothing else was sent, so it is empty.
	return s, nil
}

func (c *rawConn) read(s *rawSession) {
	r := bufio.NewReader(s.conn)
	for {
		k, err := readReply(r)
		if err != nil {
			c.mu.Lock()
			if c.s == s {
				c.s = nil
			}
			c.mu.Unlock()
			s.conn.Close()
			for {
				select {
				case out := <-s.pending:
					out <- rawReply{err: err}
				default:
					return
				}
			}
		}
		out := <-s.pending
		out <- rawReply{kind: k}
	}
}

func (c *rawConn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.s != nil {
		c.s.conn.Close()
		c.s = nil
	}
}

// readReply reads one RESP2 reply and returns its type.
func readReply(r *bufio.Reader) (byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 3 {
		return 0, errors.New("raw floor: short reply")
	}
	k, body := line[0], string(line[1:len(line)-2])
	switch k {
	case '+', '-', ':':
		return k, nil
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return k, err
		}
		_, err = r.Discard(n + 2)
		return k, err
	case '*':
		n, err := strconv.Atoi(body)
		for range n {
			if _, err := readReply(r); err != nil {
				return k, err
			}
		}
		return k, err
	}
	return 0, fmt.Errorf("raw floor: bad reply %q", line)
}
