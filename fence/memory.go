package fence

import (
	"context"
	"sync"
)

// Memory is a Fence for a single service process. The zero value is ready
// to use.
type Memory struct {
	mu        sync.Mutex
	resources map[string]*memoryResource
}

type memoryResource struct {
	mu    sync.Mutex // held across Do's operation
	write mark
	read  mark // ReadFence's: the highest read token admitted
}

// mark is the highest token admitted, and its holder.
type mark struct {
	highest uint64
	holder  string
}

var _ ReadFence = (*Memory)(nil)

func (m *Memory) resource(name string) *memoryResource {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.resources == nil {
		m.resources = map[string]*memoryResource{}
	}
	r := m.resources[name]
	if r == nil {
		r = &memoryResource{}
		m.resources[name] = r
	}
	return r
}

// Admit implements Fence.
func (m *Memory) Admit(ctx context.Context, resource string, token uint64, holder string) error {
	return m.Do(ctx, resource, token, holder, nil)
}

// Do admits the token and, if admitted, runs op while no other operation on
// the same resource can be admitted: admission and operation are one atomic
// step. op's error is returned; the token stays admitted either way.
func (m *Memory) Do(ctx context.Context, resource string, token uint64, holder string, op func() error) error {
	return m.do(ctx, resource, token, holder, false, op)
}

// AdmitRead implements ReadFence.
func (m *Memory) AdmitRead(ctx context.Context, resource string, token uint64, holder string) error {
	return m.DoRead(ctx, resource, token, holder, nil)
}

// DoRead admits a read's token (ReadFence) and, if admitted, runs op as Do
// does: a fenced read under a read-write lock's read hold.
func (m *Memory) DoRead(ctx context.Context, resource string, token uint64, holder string, op func() error) error {
	return m.do(ctx, resource, token, holder, true, op)
}

func (m *Memory) do(ctx context.Context, resource string, token uint64, holder string, read bool, op func() error) error {
	if err := validate(resource, token); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r := m.resource(resource)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.admit(resource, token, holder, read); err != nil {
		return err
	}
	if op == nil {
		return nil
	}
	return op()
}

// Highest returns the highest token admitted for resource (0 if none).
func (m *Memory) Highest(resource string) uint64 {
	r := m.resource(resource)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.write.highest
}

// admit admits a write's token (both marks) or a read's (the write mark;
// it raises the read mark).
func (r *memoryResource) admit(resource string, token uint64, holder string, read bool) error {
	if err := r.write.check(resource, token, holder); err != nil {
		return err
	}
	if read {
		r.read.raise(token, holder)
		return nil
	}
	if err := r.read.check(resource, token, holder); err != nil {
		return err
	}
	r.write.raise(token, holder)
	return nil
}

// check refuses a token below the mark, or equal to it from another
// holder (both known).
func (m *mark) check(resource string, token uint64, holder string) error {
	switch {
	case token < m.highest:
		return &StaleTokenError{Resource: resource, Token: token, Highest: m.highest}
	case token == m.highest && holder != "" && m.holder != "" && holder != m.holder:
		return &ReusedTokenError{Resource: resource, Token: token, Holder: holder, StoredHolder: m.holder}
	}
	return nil
}

// raise raises the mark to token, or fills in a holder it did not know.
func (m *mark) raise(token uint64, holder string) {
	if token > m.highest || token == m.highest && m.holder == "" {
		m.highest, m.holder = token, holder
	}
}
