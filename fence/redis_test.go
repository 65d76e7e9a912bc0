package fence_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/fence"
)

// Above 2^53 the script's doubles could not tell tokens apart: a stale
// write with 2^60+1 landed after 2^60+100. Such tokens are refused before
// anything is sent; marks already stored above 2^53 still compare exactly.
func TestRedisTokenRange(t *testing.T) {
	c := redisStore(t)
	f := fence.NewRedis(c, "")
	ctx := context.Background()
	if err := f.Set(ctx, "r", 1<<60+100, "new", "{r}:v", "new", 0); !errors.Is(err, fence.ErrTokenRange) {
		t.Errorf("token 2^60+100: %v, want ErrTokenRange", err)
	}
	if err := f.Set(ctx, "r", 1<<60+1, "", "{r}:v", "stale", 0); !errors.Is(err, fence.ErrTokenRange) {
		t.Errorf("token 2^60+1: %v, want ErrTokenRange", err)
	}
	if v := c.Get(ctx, "{r}:v").Val(); v != "" {
		t.Errorf("out-of-range tokens wrote %q", v)
	}
	if err := f.Admit(ctx, "r", fence.MaxRedisToken, "a"); err != nil {
		t.Fatalf("MaxRedisToken: %v", err)
	}
	if err := f.Admit(ctx, "r", fence.MaxRedisToken+1, "a"); !errors.Is(err, fence.ErrTokenRange) {
		t.Errorf("MaxRedisToken+1: %v, want ErrTokenRange", err)
	}

	// A mark stored above the range, as an older version could leave it.
	c.HSet(ctx, "fence:{old}", "highest", "18446744073709551615", "holder", "x")
	err := f.Set(ctx, "old", fence.MaxRedisToken, "a", "{old}:v", "stale", 0)
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) || stale.Highest != math.MaxUint64 {
		t.Errorf("token below a mark of 2^64-1: %v, want a *StaleTokenError with that mark", err)
	}
	// A mark that is not a token is an error, not 0.
	c.HSet(ctx, "fence:{junk}", "highest", "1e30", "holder", "x")
	if err := f.Set(ctx, "junk", 5, "a", "{junk}:v", "w", 0); err == nil || errors.Is(err, fence.ErrStale) {
		t.Errorf("a mark of 1e30: %v, want an error", err)
	}
	if n := c.Exists(ctx, "{old}:v", "{junk}:v").Val(); n != 0 {
		t.Errorf("%d refused writes landed", n)
	}
}

// An operation that fails leaves the mark where it was: the old script
// raised it first, leaving a raised mark and no data.
func TestRedisFailedOperationLeavesTheMark(t *testing.T) {
	c := redisStore(t)
	f := fence.NewRedis(c, "")
	ctx := context.Background()
	if err := f.Set(ctx, "r", 5, "a", "{r}:v", "v5", 0); err != nil {
		t.Fatal(err)
	}
	mark := func(want uint64, after string) {
		t.Helper()
		if h, err := f.Highest(ctx, "r"); err != nil || h != want {
			t.Errorf("after %s: mark %d (%v), want %d", after, h, err, want)
		}
	}
	c.Set(ctx, "{r}:str", "x", 0)
	if err := f.HSet(ctx, "r", 6, "b", "{r}:str", map[string]string{"f": "v"}); err == nil {
		t.Error("HSet on a string key succeeded")
	}
	mark(5, "an HSet on a string key")
	c.HSet(ctx, "{r}:hash", "f", "v")
	if _, err := f.Get(ctx, "r", 7, "b", "{r}:hash"); err == nil {
		t.Error("Get of a hash key succeeded")
	}
	mark(5, "a Get of a hash key")
	if err := f.Set(ctx, "r", 8, "b", "{r}:v", "v8", -time.Second); !errors.Is(err, fence.ErrBadTTL) {
		t.Errorf("negative TTL: %v, want ErrBadTTL", err)
	}
	mark(5, "a Set with a negative TTL")
	for _, key := range []string{"fence:{r}", "fence:{other}"} {
		if err := f.Set(ctx, "r", 8, "b", key, "x", 0); !errors.Is(err, fence.ErrFenceKey) {
			t.Errorf("Set of the fence key %s: %v, want ErrFenceKey", key, err)
		}
	}
	mark(5, "Sets of fence keys")
	// Over maxmemory Redis refuses a script's first write: that must be the
	// operation, not the mark.
	if err := c.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	err := f.Set(ctx, "r", 8, "b", "{r}:v", "v8", 0)
	if err := c.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Errorf("Set over maxmemory: %v, want an OOM error", err)
	}
	mark(5, "a Set over maxmemory")
	if v := c.Get(ctx, "{r}:v").Val(); v != "v5" {
		t.Errorf("data %q, want v5", v)
	}

}

// Writes the old script got wrong without failing the mark: an HSet with
// more fields than Lua's unpack takes at once failed after raising it, and
// a TTL under a millisecond was taken for none.
func TestRedisWritesOfAnySize(t *testing.T) {
	c := redisStore(t)
	f := fence.NewRedis(c, "")
	ctx := context.Background()
	fields := map[string]string{}
	for i := range 10000 {
		fields[fmt.Sprint("f", i)] = "v"
	}
	if err := f.HSet(ctx, "r", 9, "b", "{r}:big", fields); err != nil {
		t.Errorf("HSet of %d fields: %v", len(fields), err)
	}
	if n := c.HLen(ctx, "{r}:big").Val(); n != int64(len(fields)) {
		t.Errorf("HSet of %d fields wrote %d", len(fields), n)
	}
	if h, err := f.Highest(ctx, "r"); err != nil || h != 9 {
		t.Errorf("mark %d (%v), want 9", h, err)
	}
	if err := f.Set(ctx, "r", 9, "b", "{r}:short", "x", 500*time.Microsecond); err != nil {
		t.Fatal(err)
	}
	if ms, err := c.Do(ctx, "PTTL", "{r}:short").Int64(); err != nil || ms == -1 {
		t.Errorf("Set with a 500µs TTL left PTTL %d (%v): no expiry", ms, err)
	}
	if err := f.HSet(ctx, "r", 9, "b", "{r}:h", nil); !errors.Is(err, fence.ErrNoFields) {
		t.Errorf("HSet without fields: %v, want ErrNoFields", err)
	}
}
