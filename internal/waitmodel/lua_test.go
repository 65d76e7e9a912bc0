package waitmodel

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The model against the script it models: for every reachable state of the
// models in model_test.go and every waiting multi-lock, the node is set to
// that state (holders, promises, places, liveness) and runs the real
// MultiAcquire (lua/multi_take.lua, multi_wait.lua) for it; who then holds
// each name and whom it is promised to must be what attempt says.
func TestTheModelsAttemptIsMultiWaitLua(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a redis-server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, err := node.StartProcess(ctx, node.Config{Name: "waitmodel", BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rc := p.NewClient()
	defer rc.Close()
	runs := 0
	for _, cfg := range luaConfigs() {
		g := explore(&cfg)
		for _, s := range g.states {
			for w, a := range cfg.Actors {
				if s.status[w] != waiting || len(a.Set) < 2 {
					continue
				}
				want := cfg.attempt(s, w)
				got, err := runAttempt(ctx, rc, &cfg, s, w)
				if err != nil {
					t.Fatal(err)
				}
				runs++
				for n := range cfg.Names {
					if got.holder[n] != want.holder[n] || got.promise[n] != want.promise[n] {
						t.Fatalf("%v, %s attempts in state %s:\nthe script: %s\nthe model:  %s", cfg.Rules, a.Name,
							g.describeState(g.index[s]), g.describe(got), g.describe(want))
					}
				}
			}
		}
	}
	t.Logf("%d attempts, the script and the model agree", runs)
}

func luaConfigs() []Config {
	const a, b, c = 0, 1, 2
	return []Config{
		{Names: 2, Actors: []Actor{
			{Name: "A1", Set: []int{a}, Holding: true, Turns: true},
			{Name: "B1", Set: []int{b}, Holding: true, Turns: true},
			{Name: "A2", Set: []int{a}, Turns: true},
			{Name: "B2", Set: []int{b}, Turns: true},
			{Name: "M", Set: []int{a, b}},
		}},
		{Names: 3, Actors: []Actor{
			{Name: "Xa", Set: []int{a}, Holding: true},
			{Name: "Xb", Set: []int{b}, Holding: true},
			{Name: "Xc", Set: []int{c}, Holding: true},
			{Name: "M1", Set: []int{a, b}},
			{Name: "M2", Set: []int{b, c}},
			{Name: "M3", Set: []int{c, a}},
			{Name: "L", Set: []int{a}},
		}},
	}
}

// runAttempt sets the node to s and runs w's MultiAcquire there.
func runAttempt(ctx context.Context, rc *redis.Client, cfg *Config, s state, w int) (state, error) {
	if err := rc.FlushAll(ctx).Err(); err != nil {
		return state{}, err
	}
	key := func(n int, part string) string { return fmt.Sprintf("{wm}:%d%s", n, part) }
	id := func(i int8) string { return fmt.Sprintf("c%d/1", i) }
	value := func(i int8) string { return fmt.Sprintf("v%d", i) }
	now := time.Now()
	// Places in µs, a day ago, one apart in age order: every waiter has
	// waited long; whether w has waited its TTL is set by the TTL it sends.
	base := now.Add(-24 * time.Hour).UnixMicro()
	live := float64(now.Add(time.Hour).UnixMilli())
	pipe := rc.Pipeline()
	for n := range cfg.Names {
		if h := s.holder[n]; h >= 0 {
			pipe.Set(ctx, key(n, ""), value(h), time.Hour)
		}
		if p := s.promise[n]; p >= 0 {
			pipe.Set(ctx, key(n, ":next"), id(p), time.Hour)
		}
	}
	for i, a := range cfg.Actors {
		if s.status[i] != waiting {
			continue
		}
		for _, n := range a.Set {
			pipe.ZAdd(ctx, key(n, ":queue"), redis.Z{Score: float64(base + int64(s.place[i])), Member: id(int8(i))})
			pipe.ZAdd(ctx, key(n, ":seen"), redis.Z{Score: live, Member: id(int8(i))})
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return state{}, err
	}
	var keys []any
	for _, n := range cfg.Actors[w].Set {
		keys = append(keys, key(n, ""), key(n, ":rel:"+value(int8(w))), key(n, ":next"), key(n, ":queue"), key(n, ":seen"))
	}
	ttl := time.Hour.Milliseconds() // w has waited a day, more than its TTL
	if !s.patient[w] {
		ttl = 48 * time.Hour.Milliseconds() // w has not yet waited its TTL
	}
	const stale, promise = 60_000, 60_000
	if err := nodescript.NewCall(nodescript.MultiAcquire, keys, value(int8(w)), ttl, "", stale, 0, id(int8(w)), promise).
		Run(ctx, rc).Err(); err != nil {
		return state{}, err
	}
	got := s
	for n := range cfg.Names {
		got.holder[n], got.promise[n] = -1, -1
		v, err := rc.Get(ctx, key(n, "")).Result()
		if err != nil && err != redis.Nil {
			return state{}, err
		}
		for i := range cfg.Actors {
			if v == value(int8(i)) {
				got.holder[n] = int8(i)
			}
		}
		next, err := rc.Get(ctx, key(n, ":next")).Result()
		if err != nil && err != redis.Nil {
			return state{}, err
		}
		for i := range cfg.Actors {
			if next == id(int8(i)) && got.holder[n] != int8(w) { // a taker's own promise is spent
				got.promise[n] = int8(i)
			}
		}
	}
	return got, nil
}
