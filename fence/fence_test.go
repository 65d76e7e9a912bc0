package fence_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/fence"
	"github.com/quorumlock/redlock/fence/fencetest"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMemory(t *testing.T) {
	fencetest.Run(t, func(*testing.T) fence.Fence { return &fence.Memory{} })
}

// redisStore starts one real redis-server as the protected service's store.
func redisStore(t *testing.T) *redis.Client {
	t.Helper()
	n, err := node.StartProcess(context.Background(), node.Config{Name: "store"})
	if err != nil {
		t.Fatal(err)
	}
	c := n.NewClient()
	t.Cleanup(func() {
		c.Close()
		n.Close()
	})
	return c
}

func TestRedis(t *testing.T) {
	c := redisStore(t)
	i := 0
	fencetest.Run(t, func(*testing.T) fence.Fence {
		i++
		return fence.NewRedis(c, fmt.Sprint("suite", i))
	})
}

func TestRedisFencedWrites(t *testing.T) {
	c := redisStore(t)
	f := fence.NewRedis(c, "")
	ctx := context.Background()
	if err := f.Set(ctx, "acct", 10, "a", "{acct}:balance", "100", 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Set(ctx, "acct", 9, "old", "{acct}:balance", "0", 0); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale Set: %v", err)
	}
	if v := c.Get(ctx, "{acct}:balance").Val(); v != "100" {
		t.Fatalf("stale Set wrote: balance %q", v)
	}
	if err := f.HSet(ctx, "acct", 11, "b", "{acct}:meta", map[string]string{"owner": "b", "n": "1"}); err != nil {
		t.Fatal(err)
	}
	if err := f.HSet(ctx, "acct", 10, "a", "{acct}:meta", map[string]string{"owner": "a"}); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale HSet: %v", err)
	}
	if v := c.HGet(ctx, "{acct}:meta", "owner").Val(); v != "b" {
		t.Fatalf("owner %q after a stale HSet", v)
	}
	v, err := f.Get(ctx, "acct", 11, "b", "{acct}:balance")
	if err != nil || v != "100" {
		t.Fatalf("fenced Get: %q, %v", v, err)
	}
	if _, err := f.Get(ctx, "acct", 11, "b", "{acct}:missing"); !errors.Is(err, redis.Nil) {
		t.Fatalf("fenced Get of a missing key: %v, want redis.Nil", err)
	}
	if _, err := f.Get(ctx, "acct", 10, "a", "{acct}:balance"); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale Get: %v", err)
	}
	if h, err := f.Highest(ctx, "acct"); err != nil || h != 11 {
		t.Fatalf("Highest: %d, %v", h, err)
	}
	if err := f.Set(ctx, "acct", 12, "c", "{acct}:tmp", "x", time.Second); err != nil {
		t.Fatal(err)
	}
	if ttl := c.PTTL(ctx, "{acct}:tmp").Val(); ttl <= 0 || ttl > time.Second {
		t.Fatalf("Set with a TTL left PTTL %v", ttl)
	}
}

// httpFence is a Fence that admits through an HTTP server running the
// middleware: the suite then covers the middleware end to end.
type httpFence struct{ url string }

func (h httpFence) Admit(ctx context.Context, resource string, token uint64, holder string) error {
	return h.send(ctx, http.MethodPost, resource, token, holder)
}

// AdmitRead sends a GET: the middleware admits it as a read.
func (h httpFence) AdmitRead(ctx context.Context, resource string, token uint64, holder string) error {
	return h.send(ctx, http.MethodGet, resource, token, holder)
}

func (h httpFence) send(ctx context.Context, method, resource string, token uint64, holder string) error {
	req, err := http.NewRequestWithContext(ctx, method, h.url+"?resource="+url.QueryEscape(resource), nil)
	if err != nil {
		return err
	}
	req.Header.Set(fence.TokenHeader, strconv.FormatUint(token, 10))
	if holder != "" {
		req.Header.Set(fence.HolderHeader, holder)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNoContent {
		return nil
	}
	var p struct {
		Code     string
		Error    string
		Resource string
		Token    uint64
		Highest  uint64
	}
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &p); err != nil {
		return fmt.Errorf("status %d, body %q", resp.StatusCode, body)
	}
	switch p.Code {
	case "stale":
		return &fence.StaleTokenError{Resource: p.Resource, Token: p.Token, Highest: p.Highest}
	case "reused":
		return &fence.ReusedTokenError{Resource: p.Resource, Token: p.Token, Holder: holder, StoredHolder: "a"}
	case "zero_token":
		return fence.ErrZeroToken
	case "empty_resource":
		return fence.ErrEmptyResource
	case "token_range":
		return fence.ErrTokenRange
	}
	return fmt.Errorf("status %d: %s", resp.StatusCode, p.Error)
}

func serve(t *testing.T, f fence.Fence) (string, *atomic.Int32) {
	t.Helper()
	var handled atomic.Int32
	h := fence.Middleware(f, func(r *http.Request) string { return r.URL.Query().Get("resource") },
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			handled.Add(1)
			w.WriteHeader(http.StatusNoContent)
		}))
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		http.DefaultClient.CloseIdleConnections()
	})
	return srv.URL, &handled
}

func TestHTTPMiddleware(t *testing.T) {
	fencetest.Run(t, func(t *testing.T) fence.Fence {
		u, _ := serve(t, &fence.Memory{})
		return httpFence{u}
	})
}

func TestHTTPMiddlewareRefusals(t *testing.T) {
	u, handled := serve(t, &fence.Memory{})
	post := func(token string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, u+"?resource=orders", nil)
		if token != "" {
			req.Header.Set(fence.TokenHeader, token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := post("9"); code != http.StatusNoContent {
		t.Fatalf("token 9: %d", code)
	}
	code, body := post("7")
	if code != http.StatusConflict {
		t.Fatalf("stale token: status %d, want 409", code)
	}
	want := `{"code":"stale","error":"stale fencing token","resource":"orders","token":7,"highest":9}` + "\n"
	if body != want {
		t.Fatalf("stale body %s, want %s", body, want)
	}
	for _, bad := range []string{"", "x", "-1"} {
		if code, _ := post(bad); code != http.StatusBadRequest {
			t.Errorf("token %q: status %d, want 400", bad, code)
		}
	}
	if handled.Load() != 1 {
		t.Fatalf("handler ran %d times, want once: refused requests must not reach it", handled.Load())
	}
}

// The middleware over a Redis fence: admission first, then the handler.
func TestHTTPMiddlewareOverRedis(t *testing.T) {
	c := redisStore(t)
	i := 0
	fencetest.Run(t, func(t *testing.T) fence.Fence {
		i++
		u, _ := serve(t, fence.NewRedis(c, fmt.Sprint("http", i)))
		return httpFence{u}
	})
}
