package redlock

import (
	"errors"
	"fmt"
	"testing"

	"github.com/quorumlock/redlock/internal/verdict"
)

// replyError stands for a Redis error reply as go-redis returns it.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// The replies are as Redis 7.0 and 6 give them (collected from real
// servers); the OOM and BUSY ones must stay retryable even inside a script.
func TestPermanentKind(t *testing.T) {
	for _, tc := range []struct {
		reply string
		want  error
	}{
		{"WRONGPASS invalid username-password pair or user is disabled.", ErrAuth},
		{"NOAUTH Authentication required.", ErrAuth},
		{"ERR Protocol error: unauthenticated multibulk length", ErrAuth},
		{"ERR Protocol error: unauthenticated bulk length", ErrAuth},
		{"CROSSSLOT Keys in request don't hash to the same slot", ErrFencingNode},
		{"NOPERM this user has no permissions to run the 'eval' command", ErrNoPermission},
		{"ERR The user executing the script can't run this command or subcommand script: 6163, on @user_script:1.", ErrNoPermission},
		{"ERR ACL failure in script: User locker has no permissions to run the 'incr' command script: b88a, on @user_script:97.", ErrNoPermission}, // Valkey 8.0
		{"ERR user_script:1: attempt to perform arithmetic on a nil value script: d13b, on @user_script:1.", ErrScript},
		{"ERR Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'", ErrScript},
		{"ERR Unknown Redis command called from script script: 7ae0, on @user_script:1.", ErrScript},
		{"OOM command not allowed when used memory > 'maxmemory'. script: efcc, on @user_script:84.", nil},
		{"ERR Error running script (call to f_efcc): @user_script:84: @user_script: 84: -OOM command not allowed when used memory > 'maxmemory'.", nil},
		{"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.", nil},
		{"LOADING Redis is loading the dataset in memory", nil},
		{"READONLY You can't write against a read only replica.", nil},
		{"ERR max number of clients reached", nil},
	} {
		if got := verdict.PermanentKind(fmt.Errorf("wrapped: %w", replyError(tc.reply))); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.reply, got, tc.want)
		}
	}
	if got := verdict.PermanentKind(errors.New("WRONGPASS but not a reply")); got != nil {
		t.Errorf("a non-reply error: %v, want nil", got)
	}
}
