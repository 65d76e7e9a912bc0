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
	mu      sync.Mutex // held across Do's operation
	highest uint64
	holder  string
}

var _ Fence = (*Memory)(nil)

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
	if err := validate(resource, token); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r := m.resource(resource)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.admit(resource, token, holder); err != nil {
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
	return r.highest
}

func (r *memoryResource) admit(resource string, token uint64, holder string) error {
	switch {
	case token < r.highest:
		return &StaleTokenError{Resource: resource, Token: token, Highest: r.highest}
	case token == r.highest && holder != "" && r.holder != "" && holder != r.holder:
		return &ReusedTokenError{Resource: resource, Token: token, Holder: holder, StoredHolder: r.holder}
	case token > r.highest || r.holder == "":
		r.highest, r.holder = token, holder
	}
	return nil
}
