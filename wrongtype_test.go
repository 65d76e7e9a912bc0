package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

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

// Review of issue 23, item 4 (adversarial): lock names are user input, and
// the key a WRONGTYPE names is parsed out of the node's message
// ('WRONGTYPE key <key> holds a <type>, not a string'). A name containing
// ", not a string" or " holds a " makes the error name another key (a
// prefix of the real one) and another type: wrongType cuts at the FIRST
// ", not a string". The type is one word the server chose, so parsing from
// the end (LastIndex) names the key exactly.
//
// On ce151f8:
//
//	review_diag_test.go:177: fenced true: WrongTypeError key "redlock:{a" type "b", want key "redlock:{a holds a b, not a string c}" type "list"
//	review_diag_test.go:177: fenced false: WrongTypeError key "redlock:{a" type "b", want key "redlock:{a holds a b, not a string c (unfenced)}" type "list"
//
// Origin: the adversarial review of provisioning and diagnostics.
func TestWrongTypeErrorWithACraftedName(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	for _, fenced := range []bool{true, false} {
		name := "a holds a b, not a string c"
		var opts []redlock.Option
		if !fenced {
			name += " (unfenced)"
			opts = append(opts, redlock.WithoutFencing())
		}
		key := "redlock:{" + name + "}"
		for _, n := range cl.inspect {
			if err := n.RPush(ctx, key, "x").Err(); err != nil {
				t.Fatal(err)
			}
		}
		_, err := cl.newClient(t, opts...).TryLock(ctx, name)
		var wt *redlock.WrongTypeError
		for _, r := range quorumError(t, err).Nodes {
			if errors.As(r.Err, &wt) {
				break
			}
		}
		if wt == nil {
			t.Fatalf("fenced %v: TryLock on a list: %v, want a node's *WrongTypeError", fenced, err)
		}
		if wt.Key != key || wt.Type != "list" {
			t.Errorf("fenced %v: WrongTypeError key %q type %q, want key %q type %q", fenced, wt.Key, wt.Type, key, "list")
		}
	}
}

// LockMulti gives up at once on the errors Lock gives up on: a member that
// is not a string is ErrWrongType, however the other members stand. With
// "a" held by another owner and "b" a list on every node, the node script
// returns 0 at "a" before it looks at "b", so LockMulti waits on as if "a"
// were merely contended, until ctx ends.
// Origin: the adversarial review of the multi-lock.
func TestMultiWrongTypeMemberBehindAHeldOne(t *testing.T) {
	cl := startCluster(t, 3)
	cl.holdAsStranger(t, "wt-a", 0, 1, 2)
	for i := range cl.inspect {
		if err := cl.inspect[i].RPush(context.Background(), "redlock:{wt-b}", "x").Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, fenced := range []bool{true, false} {
		t.Run(map[bool]string{true: "fenced", false: "unfenced"}[fenced], func(t *testing.T) {
			var opts []redlock.Option
			if !fenced {
				opts = append(opts, redlock.WithoutFencing())
			}
			c := cl.newClient(t, append(opts, redlock.WithRetryDelay(10*time.Millisecond, 20*time.Millisecond))...)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			start := time.Now()
			_, err := c.LockMulti(ctx, []string{"wt-a", "wt-b"})
			if !errors.Is(err, redlock.ErrWrongType) {
				t.Fatalf("LockMulti over a held member and a list: %v after %v, want ErrWrongType at once", err, time.Since(start).Round(time.Millisecond))
			}
		})
	}
}
