package fairqueue

// The channels of a lock key: the one every client hears, and the one on
// which only this client hears of the waiters it was promised to. The
// release and leave scripts publish on the same names.
//
//	<lock key>:released                      channel: a release any waiter may take
//	<lock key>:promised:<client id>          channel: a promise to one client's waiter
const (
	releasedSuffix = ":released"
	promisedInfix  = ":promised:"
)

func (q *Queue) channels(key string) [2]string {
	return [2]string{key + releasedSuffix, key + promisedInfix + q.cfg.ID}
}
