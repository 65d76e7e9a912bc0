package luascript_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/luascript"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sent records the scripts a client sends: EVAL and EVALSHA.
type sent struct {
	mu    sync.Mutex
	names []string
}

func (s *sent) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *sent) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (s *sent) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); strings.HasPrefix(n, "eval") {
			s.mu.Lock()
			s.names = append(s.names, n)
			s.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (s *sent) take() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := strings.Join(s.names, " ")
	s.names = nil
	return out
}

func startNode(t *testing.T) *redis.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := node.StartProcess(ctx, node.Config{Name: "lua", BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c := p.NewClient()
	t.Cleanup(func() { c.Close() })
	return c
}

// A script starts with EVAL, learns its digest from the node (which then
// has the script under it), goes on with EVALSHA, and falls back to EVAL
// when the node has lost its scripts. Nothing is hashed in Go: the FIPS
// pass (make test-fips) runs this under GODEBUG=fips140=only.
func TestDigestFromTheServer(t *testing.T) {
	c := startNode(t)
	rec := &sent{}
	c.AddHook(rec)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A source no other test has sent, so that the node starts without it.
	s := luascript.New(fmt.Sprintf("return ARGV[1] .. '%d'", time.Now().UnixNano()))
	if s.Hash() != "" {
		t.Fatal("a new script knows a digest")
	}
	run := func(want string) {
		t.Helper()
		got, err := s.Run(ctx, c, nil, "x").Text()
		if err != nil || !strings.HasPrefix(got, "x") {
			t.Fatalf("run: %q, %v", got, err)
		}
		if cmds := rec.take(); cmds != want {
			t.Fatalf("sent %q, want %q", cmds, want)
		}
	}
	run("eval eval") // the script, then the digest
	h := s.Hash()
	if len(h) != 40 {
		t.Fatalf("digest %q", h)
	}
	if ok, err := c.ScriptExists(ctx, h).Result(); err != nil || !ok[0] {
		t.Fatalf("the node does not have the script under %s: %v %v", h, ok, err)
	}
	rec.take()
	run("evalsha")
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	rec.take()
	run("evalsha eval") // NOSCRIPT
	run("evalsha")
}

// A failed EVAL (the node is gone) leaves the digest unknown; the next
// answered one learns it.
func TestNoDigestFromAFailedCall(t *testing.T) {
	c := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := luascript.New("return 1")
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
	defer dead.Close()
	if err := s.Run(ctx, dead, nil).Err(); err == nil {
		t.Fatal("a call to a closed port succeeded")
	}
	if s.Hash() != "" {
		t.Fatalf("learnt %q from a failed call", s.Hash())
	}
	if err := s.Run(ctx, c, nil).Err(); err != nil {
		t.Fatal(err)
	}
	if s.Hash() == "" {
		t.Fatal("no digest after an answered call")
	}
}
