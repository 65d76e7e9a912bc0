package batch

// Queued is how many calls wait for a batch: a test knows from it that a
// batch has left.
func (l *Link) Queued() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queue)
}
