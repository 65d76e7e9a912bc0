package redlock_test

import (
	"bytes"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// review32Wire (from the adversarial review of issue 32) is the network between one go-redis client and its node.
// When armed, the next write that carries an EVAL/EVALSHA is delayed "in
// the network" (a lost segment waiting for its retransmission): the writer
// is told it was sent, and the bytes reach the node only once release is
// closed. A Close of that connection meanwhile does not drop them: the
// kernel still delivers what it had accepted before the FIN, so the real
// close follows the delivery.
type review32Wire struct {
	addr    string
	armed   atomic.Bool
	once    sync.Once
	held    chan struct{} // closed once a write is held
	release chan struct{}
	landed  chan struct{} // closed once the held write reached the node
	relOnce sync.Once
	log     func(string, ...any)
}

func newReview32Wire(addr string) *review32Wire {
	return &review32Wire{addr: addr, held: make(chan struct{}), release: make(chan struct{}), landed: make(chan struct{})}
}

func (w *review32Wire) open() { w.relOnce.Do(func() { close(w.release) }) }

func (w *review32Wire) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, w.addr)
	if err != nil {
		return nil, err
	}
	return &review32Conn{Conn: c, w: w}, nil
}

type review32Conn struct {
	net.Conn
	w       *review32Wire
	mu      sync.Mutex
	pending chan struct{} // closed once the held bytes were delivered
}

func (c *review32Conn) Write(b []byte) (int, error) {
	if bytes.Contains(bytes.ToLower(b), []byte("eval")) && c.w.armed.CompareAndSwap(true, false) {
		buf := append([]byte(nil), b...)
		done := make(chan struct{})
		c.mu.Lock()
		c.pending = done
		c.mu.Unlock()
		c.w.once.Do(func() { close(c.w.held) })
		go func() {
			<-c.w.release
			c.Conn.SetWriteDeadline(time.Time{})
			_, err := c.Conn.Write(buf)
			if c.w.log != nil {
				c.w.log("held write to %s delivered: %v %q", c.w.addr, err, buf[:min(len(buf), 60)])
			}
			close(done)
			close(c.w.landed)
		}()
		return len(b), nil
	}
	return c.Conn.Write(b)
}

func (c *review32Conn) Close() error {
	c.mu.Lock()
	p := c.pending
	c.mu.Unlock()
	if p == nil {
		return c.Conn.Close()
	}
	go func() {
		<-p
		time.Sleep(50 * time.Millisecond) // let the node read it before the FIN
		c.Conn.Close()
	}()
	return nil
}

// review32Arm arms the wire for the first attempt of the next call of one
// script: go-redis's retries of that call (inside next) are not held.
type review32Arm struct {
	w        *review32Wire
	script   string
	arm      atomic.Bool
	log      func(string, ...any)
	inflight atomic.Int32
}

// quiet waits until no call is in flight on any of hooks' wires.
func review32Quiet(t *testing.T, hooks map[int]*review32Arm) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		n := int32(0)
		for _, h := range hooks {
			n += h.inflight.Load()
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("calls still in flight after 5 s")
		}
	}
}

func (h *review32Arm) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *review32Arm) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *review32Arm) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if redlock.ScriptName(cmd.Args()) == h.script && h.arm.CompareAndSwap(true, false) {
			h.w.armed.Store(true)
		}
		start := time.Now()
		h.inflight.Add(1)
		defer h.inflight.Add(-1)
		err := next(ctx, cmd)
		if h.log != nil {
			h.log("%s %v -> %v (%v)", h.w.addr, cmd.Args()[0], err, time.Since(start).Round(time.Millisecond))
		}
		return err
	}
}

// TestRetriedShorteningCannotLandAfterALaterExtend: the unheard rule
// (internal/lease/unheard.go) counts an extension call as heard as soon as
// its go-redis Process returns a reply. With go-redis's default MaxRetries
// (3, what redis.NewClient gives; the library neither sets nor documents
// it) one Process is up to four commands on the wire: a first attempt that
// hit the client's ReadTimeout is still on its way to the node (a lost
// segment waiting for TCP's retransmission) when go-redis re-sends it on
// another connection and hears that copy. The lease then believes the call
// is done, but the first copy lands later.
//
// Interleaving (N = 3, TTL 3 s, ReadTimeout 300 ms, default MaxRetries):
//  1. A holds "x"; Extend(For(1s)): the first EVALSHA to n1 and to n2 is
//     held in the network; go-redis times out after 300 ms, closes the
//     connection, re-sends on a new one; the copies are granted: the
//     Extend succeeds on all nodes and nothing is left unheard.
//  2. Extend(For(3s)) succeeds on all three: Until is 3 s out.
//  3. The held copies reach n1 and n2 (retransmission): both keys now live
//     1 s from then.
//  4. B takes {n1, n2} about 1 s later, with ~2 s of A's validity left.
func TestRetriedShorteningCannotLandAfterALaterExtend(t *testing.T) {
	cl := startCluster(t, 3)
	clients, wires, hooks := delayedWires(t, cl, "extend")
	a, err := redlock.New(clients, redlock.WithTTL(3*time.Second), redlock.WithNodeTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a.Close()
		for _, c := range clients {
			c.Close()
		}
	})
	b := cl.newClient(t, redlock.WithTTL(3*time.Second), redlock.WithNodeTimeout(time.Second))
	ctx := context.Background()
	l, err := a.TryLock(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hooks {
		h.arm.Store(true)
	}
	if err := l.Extend(ctx, redlock.For(time.Second)); err != nil {
		t.Fatalf("the shortening failed (its retries were meant to be heard): %v", err)
	}
	review32Quiet(t, hooks) // every retry heard: nothing of this lease is unheard
	for i, w := range wires {
		select {
		case <-w.held:
		default:
			t.Fatalf("no first attempt was held on n%d", i)
		}
	}
	if err := l.Extend(ctx, redlock.For(3*time.Second)); err != nil {
		t.Fatalf("second Extend: %v", err)
	}
	review32Quiet(t, hooks) // the 3 s Extend ran on every node
	t.Logf("A's Until after the 3 s Extend: %v from now", time.Until(l.Until()).Round(time.Millisecond))
	for _, w := range wires {
		w.open()
	}
	for _, w := range wires {
		<-w.landed
	}
	time.Sleep(100 * time.Millisecond)
	for i, c := range cl.inspect {
		t.Logf("n%d PTTL after the landing: %v", i, c.PTTL(ctx, "redlock:{x}").Val())
	}
	var granted time.Time
	deadline := time.Now().Add(5 * time.Second)
	for {
		bl, err := b.TryLock(ctx, "x")
		if err == nil {
			granted = time.Now()
			defer bl.Unlock(ctx)
			break
		}
		if time.Now().After(deadline) {
			t.Logf("B never granted (held copies did not cut the key): %v", err)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	if left := l.Until().Sub(granted); left > 0 {
		t.Fatalf("B was granted \"x\" while A still had %v of validity (A's first-attempt EVALSHA, re-sent by go-redis's MaxRetries and heard, landed after the 3 s Extend)", left.Round(time.Millisecond))
	}
}

// delayedWires are go-redis clients to cl's nodes with a ReadTimeout of
// 300 ms and go-redis's default retries: the ones to n1 and n2 dial
// through a review32Wire that an armed hook (of script) can hold a copy
// of a call on, so that go-redis resends it while the first is delayed.
func delayedWires(t *testing.T, cl *cluster, script string) (clients []redis.UniversalClient, wires map[int]*review32Wire, hooks map[int]*review32Arm) {
	t.Helper()
	wires = map[int]*review32Wire{}
	hooks = map[int]*review32Arm{}
	clients = make([]redis.UniversalClient, len(cl.nodes))
	for i, n := range cl.nodes {
		opt := &redis.Options{Addr: n.Addr(), ReadTimeout: 300 * time.Millisecond} // MaxRetries: default (3)
		if i > 0 {
			w := newReview32Wire(n.Addr())
			w.log = t.Logf
			wires[i] = w
			opt.Dialer = w.dial
			h := &review32Arm{w: w, script: script}
			hooks[i] = h
			rc := redis.NewClient(opt)
			rc.AddHook(h)
			clients[i] = rc
			t.Cleanup(w.open)
			continue
		}
		clients[i] = redis.NewClient(opt)
	}
	return clients, wires, hooks
}
