package round

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// A go-redis client gets one dial hook however many lock clients are made
// over it; a new client gets its own.
func TestDialHookOncePerGoRedisClient(t *testing.T) {
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rc.Close()
	first := watchDials(rc)
	for range 100 {
		if watchDials(rc) != first {
			t.Fatal("a second dial record for the same go-redis client")
		}
	}
	other := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer other.Close()
	if watchDials(other) == first {
		t.Fatal("two go-redis clients share a dial record")
	}
}
