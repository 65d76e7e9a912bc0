package redlock

import (
	"context"

	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/redis/go-redis/v9"
)

// answer runs a call whose script answers 1 (done: NodeGranted) or 0 (not
// done: NodeRefused), as the acquisition, release and extension scripts do.
func answer(ctx context.Context, call *nodescript.Call, node redis.UniversalClient) (Outcome, int64, error) {
	n, err := call.Run(ctx, node).Int64()
	switch {
	case err != nil:
		return NodeFailed, 0, err
	case n == 1:
		return NodeGranted, 0, nil
	default:
		return NodeRefused, 0, nil
	}
}
