package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/quorumlock/redlock"
)

// Issue 23, item 4 (":fence:high of the wrong type"): a name's fence:high
// key holding a list was reported as "lock key holds a non-string value",
// ErrWrongType's text, sending the operator to the lock key, which was
// fine. The error now names the key that clashes, and its type, and still
// matches ErrWrongType (the node's result holds a *WrongTypeError). Both
// the fenced key and the lock key itself.
//
// On today's code (e1c99f5), the three cases:
//
//	fence key: redlock: lock "wt": lock key holds a non-string value [1 granted, 2 failed of 3: lock key holds a non-string value: WRONGTYPE Operation against a key holding the wrong kind of value script: 40eb6c4b58879c4c780836d7405ec9fd289900fa, on @user_script:132. (nodes 0,1)]; want a *WrongTypeError naming "redlock:{wt}:fence:high", a list
//	lock key: redlock: lock "wl": lock key holds a non-string value [1 no reply, 2 failed of 3: lock key holds a non-string value: WRONGTYPE lock key holds a non-string value (nodes 0,1)]; want a *WrongTypeError naming "redlock:{wl}", a list
//	lock key, unfenced: redlock: lock "wu": lock key holds a non-string value [1 granted, 2 failed of 3: lock key holds a non-string value: WRONGTYPE lock key holds a non-string value (nodes 0,1)]; want the message to name "redlock:{wu}", a list
func TestWrongTypeErrorNamesTheKey(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	for _, c := range []struct {
		what, name, key string
		fenced          bool
	}{
		{"fence key", "wt", "redlock:{wt}:fence:high", true},
		{"lock key", "wl", "redlock:{wl}", true},
		{"lock key, unfenced", "wu", "redlock:{wu}", false},
	} {
		for _, in := range cl.inspect[:2] {
			if err := in.LPush(ctx, c.key, "x").Err(); err != nil {
				t.Fatal(err)
			}
		}
		var opts []redlock.Option
		if !c.fenced {
			opts = append(opts, redlock.WithoutFencing())
		}
		_, err := cl.newClient(t, opts...).TryLock(ctx, c.name)
		// errors.As reaches the nodes' *WrongTypeError on the returned
		// error (issue 35: it was only in QuorumError.Nodes).
		var wte *redlock.WrongTypeError
		errors.As(err, &wte)
		switch {
		case !errors.Is(err, redlock.ErrWrongType):
			t.Errorf("%s: %v, want ErrWrongType", c.what, err)
		case wte == nil || wte.Key != c.key || wte.Type != "list":
			t.Errorf("%s: %v; want a *WrongTypeError naming %q, a list", c.what, err, c.key)
		case !strings.Contains(err.Error(), c.key+" holds a list"):
			t.Errorf("%s: %v; want the message to name %q, a list", c.what, err, c.key)
		case strings.Contains(err.Error(), "non-string"):
			t.Errorf("%s: %v; still says the lock key holds a non-string value", c.what, err)
		default:
			t.Logf("%s: %v", c.what, err)
		}
	}
}
