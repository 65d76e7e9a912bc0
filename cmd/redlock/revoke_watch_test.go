package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// Found by an adversarial review (fixed: revoke refuses a lock that changed
// hands while watched, exit 73, and revokes only the holder it watched):
// `redlock revoke --watch` watches holder A, but if A releases
// (or expires) during the watch and a live holder B takes the lock, the
// second Inspect sees another holder, watchForExtension returns "" (no
// extension seen) and Client.Revoke then releases B: a live holder that
// was never watched is revoked without --force.
func TestRevokeWatchLeavesAHolderItNeverWatched(t *testing.T) {
	_, urls := startNodes(t)
	clients, err := dialNodes(urls)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(clients)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// A: a stuck holder, 2 s TTL, nobody extends it.
	ca, err := redlock.New(clients, redlock.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	a, err := ca.TryLock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}

	type result struct {
		out  string
		code int
	}
	done := make(chan result, 1)
	go func() {
		var out bytes.Buffer
		err := run(ctx, []string{"revoke", "--nodes", urls, "--watch", "1500ms", "job"}, &out)
		if err != nil {
			out.WriteString(err.Error())
		}
		done <- result{out.String(), exitCode(err)}
	}()

	// Meanwhile A finishes and a live holder B (Do, extending) takes the lock.
	time.Sleep(300 * time.Millisecond)
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	cb, err := redlock.New(clients, redlock.WithTTL(1500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	held := make(chan string, 1)
	doErr := make(chan error, 1)
	bctx, bcancel := context.WithCancel(ctx)
	defer bcancel()
	go func() {
		doErr <- cb.Do(bctx, "job", func(ctx context.Context, l *redlock.Lock) error {
			held <- l.ID()
			<-ctx.Done()
			return ctx.Err()
		})
	}()
	bid := <-held

	r := <-done
	t.Logf("revoke (exit %d):\n%s", r.code, r.out)
	if strings.Contains(r.out, "revoked "+bid) {
		t.Fatalf("revoke --watch (no --force) revoked holder %s, which took the lock during the watch "+
			"and was never watched (the watched holder was %s); exit %d:\n%s", bid, a.ID(), r.code, r.out)
	}
	if r.code != 73 {
		t.Errorf("revoke of a lock that changed hands while watched: exit %d, want 73", r.code)
	}
	select {
	case err := <-doErr:
		t.Fatalf("B's Do ended (%v): its live hold was revoked", err)
	case <-time.After(2 * time.Second):
	}
}
