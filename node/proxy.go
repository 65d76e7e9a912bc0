package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/rs/zerolog"
	zerologlog "github.com/rs/zerolog/log"
)

// proxy is an embedded Toxiproxy in front of a node: it is how links are
// cut, slowed and broken without tc netem (not in this kernel) or root. It
// runs in this process; no Toxiproxy server or HTTP API is started.
//
// Each fault is a pair of toxics, one per direction, named after the fault,
// so that setting a fault again replaces it and Heal can remove it.
type proxy struct {
	tp   *toxiproxy.Proxy
	addr string

	mu     sync.Mutex // one fault change at a time: remove and add are two steps
	closed bool
}

// stallType is the toxic behind Cut. Toxiproxy's own toxics either drop
// bytes (timeout) or close the connection (reset_peer, limit_data); none
// holds them. A stall reads nothing, so the bytes wait in the chain and in
// the kernel's socket buffers, and when it is removed Toxiproxy flushes
// what it holds downstream: the partition heals and TCP delivers.
const stallType = "redlock-stall"

type stallToxic struct{}

func (stallToxic) Pipe(stub *toxics.ToxicStub) { <-stub.Interrupt }

// closeType is the toxic behind ResetPeer and HalfOpen with a close delay.
// Toxiproxy's reset_peer and timeout toxics stop reading once they have
// closed the connection, and a chunk still coming then blocks the toxic
// before them for good, a goroutine leaked per connection. This one drops
// what arrives until it closes, then drains until the link ends.
//
// With OnData it waits for the first chunk and closes After later (a
// reset); otherwise it drops everything and closes After from the start (a
// half-open link whose keepalive gives up), or never if After is 0.
const closeType = "redlock-close"

type closeToxic struct {
	After  int64 `json:"after"` // milliseconds
	OnData bool  `json:"on_data"`
}

func (t *closeToxic) Pipe(stub *toxics.ToxicStub) {
	after := time.Duration(t.After) * time.Millisecond
	var timer <-chan time.Time
	if !t.OnData && after > 0 {
		timer = time.After(after)
	}
wait:
	for {
		select {
		case <-stub.Interrupt:
			return
		case <-timer:
			break wait
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			if t.OnData && timer == nil {
				timer = time.After(after)
			}
		}
	}
	stub.Close()
	for range stub.Input { // dropped: the connection is closed
	}
}

// Cleanup runs when Heal removes the toxic from a link it has not closed.
// A half-open link's connection has lost bytes and is out of step with
// the server, so Heal closes it (as Toxiproxy's timeout toxic does), and
// the drain keeps the toxics before it from blocking until the link ends.
// A reset that has not fired leaves its connection alone.
func (t *closeToxic) Cleanup(stub *toxics.ToxicStub) {
	if t.OnData {
		return
	}
	stub.Close()
	go func() {
		for range stub.Input {
		}
	}()
}

func init() {
	toxics.Register(stallType, new(stallToxic))
	toxics.Register(closeType, new(closeToxic))
}

// nextProxy numbers the proxies, for their Toxiproxy names.
var nextProxy struct {
	sync.Mutex
	n int
}

// quietToxics silences zerolog's global logger, which some toxics write
// to directly (bandwidth logs a trace line to stderr each time it is
// removed); nothing else in a harness process uses zerolog.
var quietToxics sync.Once

func startProxy(upstream string) (*proxy, error) {
	quietToxics.Do(func() { zerologlog.Logger = zerolog.Nop() })
	nextProxy.Lock()
	nextProxy.n++
	name := fmt.Sprintf("redlock-node-%d", nextProxy.n)
	nextProxy.Unlock()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	tp := toxiproxy.NewProxy(srv, name, "127.0.0.1:0", upstream)
	if err := tp.Start(); err != nil {
		return nil, fmt.Errorf("node: start proxy: %w", err)
	}
	return &proxy{tp: tp, addr: tp.Listen}, nil
}

// set replaces the fault called name with a toxic of type typ in both
// directions; nil attrs only removes it.
func (p *proxy) set(name, typ string, attrs any) error { return p.setToxicity(name, typ, attrs, 1) }

// setToxicity is set with the share of connections the toxic acts on.
func (p *proxy) setToxicity(name, typ string, attrs any, toxicity float64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	for _, stream := range []string{"upstream", "downstream"} {
		if err := p.remove(name + "_" + stream); err != nil {
			return err
		}
		if attrs == nil {
			continue
		}
		body, err := json.Marshal(map[string]any{
			"name": name + "_" + stream, "type": typ, "stream": stream, "toxicity": toxicity, "attributes": attrs,
		})
		if err != nil {
			return err
		}
		if _, err := p.tp.Toxics.AddToxicJson(strings.NewReader(string(body))); err != nil {
			return fmt.Errorf("node: add %s toxic: %w", typ, err)
		}
	}
	return nil
}

func (p *proxy) remove(toxic string) error {
	err := p.tp.Toxics.RemoveToxic(context.Background(), toxic)
	if err != nil && !errors.Is(err, toxiproxy.ErrToxicNotFound) {
		return fmt.Errorf("node: remove toxic %s: %w", toxic, err)
	}
	return nil
}

// Fault names; breaks are what Heal ends.
const (
	faultCut      = "cut"
	faultReset    = "reset"
	faultHalfOpen = "halfopen"
	faultLatency  = "latency"
	faultRate     = "bandwidth"
	faultSlice    = "slicer"
)

var breaks = []string{faultCut, faultReset, faultReset + "-linger", faultHalfOpen}

func (p *proxy) heal() error {
	for _, f := range breaks {
		if err := p.set(f, "", nil); err != nil {
			return err
		}
	}
	return nil
}

// close removes every toxic first, so that held bytes drain and every
// link's goroutines can see their connections close, then stops the
// listener and closes the connections.
func (p *proxy) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	p.tp.Toxics.ResetToxics(context.Background())
	p.tp.Stop()
}
