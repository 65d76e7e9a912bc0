package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// redlock revoke refuses a holder that extends the lock while watched
// (73), unless --force; revokes one that stopped extending; says a free
// lock is free; a bad name exits 2.
func TestRevokeRefusesALiveHolderUnlessForced(t *testing.T) {
	_, urls, clients, _, _ := inspectedNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	revoke := func(args ...string) (string, int) {
		var out bytes.Buffer
		err := run(ctx, append([]string{"revoke", "--nodes", urls}, args...), &out)
		if err != nil {
			out.WriteString(err.Error())
		}
		return out.String(), exitCode(err)
	}
	// A live holder: Do extends its 1.5 s lock every 500 ms.
	live, err := redlock.New(clients, redlock.WithTTL(1500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	held := make(chan string, 1)
	doErr := make(chan error, 1)
	go func() {
		doErr <- live.Do(ctx, "live", func(ctx context.Context, l *redlock.Lock) error {
			held <- l.ID()
			<-ctx.Done()
			return nil
		})
	}()
	id := <-held
	if out, code := revoke("--watch", "1s", "live"); code != 73 || !strings.Contains(out, id) {
		t.Fatalf("revoke of a live holder: exit %d, want 73 naming %s:\n%s", code, id, out)
	}
	if out, code := revoke("--force", "live"); code != 0 || !strings.Contains(out, "revoked "+id) {
		t.Fatalf("revoke --force: exit %d:\n%s", code, out)
	}
	select {
	case <-doErr:
	case <-time.After(5 * time.Second):
		t.Fatal("the revoked holder's Do still runs 5 s after the revocation")
	}

	// The inspected nodes' "job" is held by a lock nobody extends.
	if out, code := revoke("--watch", "300ms", "job"); code != 0 || !strings.Contains(out, "job: revoked ") {
		t.Fatalf("revoke of a holder that does not extend: exit %d:\n%s", code, out)
	}
	if out, code := revoke("job"); code != 0 || !strings.Contains(out, "job: free, nothing revoked") {
		t.Fatalf("revoke of a free lock: exit %d:\n%s", code, out)
	}
	if out, code := revoke("}bad"); code != 2 {
		t.Fatalf("revoke of a bad name: exit %d, want 2:\n%s", code, out)
	}
	if out, code := revoke(); code != 2 {
		t.Fatalf("revoke without a name: exit %d, want 2:\n%s", code, out)
	}
}
