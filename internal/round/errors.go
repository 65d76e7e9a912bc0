package round

import (
	"errors"
	"fmt"

	"github.com/quorumlock/redlock/internal/batch"
)

// The errors a round gives a node, or returns. The root package exports
// them under the same names, with their documentation.
var (
	ErrNodeTimeout = errors.New("redlock: node did not answer within the node timeout")
	ErrNodeHung    = fmt.Errorf("%w: not sent, the node has left earlier calls unanswered past the node timeout", ErrNodeTimeout)
	ErrBadNode     = batch.ErrClientPanicked
	ErrClosed      = errors.New("redlock: client closed")
)
