package round

import (
	"errors"
	"fmt"
)

// The errors a round gives a node, or returns. The root package exports
// them under the same names, with their documentation.
var (
	ErrNodeTimeout = errors.New("redlock: node did not answer within the node timeout")
	ErrNodeHung    = fmt.Errorf("%w: not sent, the node has left earlier calls unanswered past the node timeout", ErrNodeTimeout)
	ErrBadNode     = errors.New("redlock: unusable node client")
	ErrClosed      = errors.New("redlock: client closed")
)
