package devops

import (
	"fmt"
	"sync"

	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/tensor"
)

// Pool is a caching allocator on one device: a freed buffer is kept and handed out
// again for the same dtype and element count, so the methods' per-call buffers cost no
// cuMemAlloc/cuMemFree (which synchronises the whole device) after the first call.
// Reuse is safe for work on one stream (the next user is ordered after the last), or
// when the freeing side has waited for its work. The device's PeakMemory counts what
// the pool holds, as a caching allocator's reserved memory.
type Pool struct {
	g     *cuda.Device
	mu    sync.Mutex
	free  map[poolKey][]*cuda.Buffer
	owner map[*cuda.Buffer]*cuda.Buffer // handed-out view -> pooled buffer
}

type poolKey struct {
	dt tensor.DType
	n  int
}

// NewPool makes an empty pool on g.
func NewPool(g *cuda.Device) *Pool {
	return &Pool{g: g, free: map[poolKey][]*cuda.Buffer{}, owner: map[*cuda.Buffer]*cuda.Buffer{}}
}

// Get returns an uninitialised buffer of the dtype and shape.
func (p *Pool) Get(dt tensor.DType, shape ...int) (*cuda.Buffer, error) {
	k := poolKey{dt, tensor.Numel(shape)}
	p.mu.Lock()
	var b *cuda.Buffer
	if l := p.free[k]; len(l) > 0 {
		b, p.free[k] = l[len(l)-1], l[:len(l)-1]
	}
	p.mu.Unlock()
	if b == nil {
		var err error
		if b, err = p.g.AllocBuffer(dt, k.n); err != nil {
			return nil, err
		}
	}
	v, err := b.View(0, shape...)
	if err != nil {
		return nil, fmt.Errorf("devops: pool view: %w", err)
	}
	p.mu.Lock()
	p.owner[v] = b
	p.mu.Unlock()
	return v, nil
}

// Put returns a buffer from Get to the pool; a tensor the pool did not hand out is an
// error.
func (p *Pool) Put(t tensor.Tensor) error {
	v, ok := t.(*cuda.Buffer)
	if !ok {
		return fmt.Errorf("devops: pool: %T is not a device buffer", t)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.owner[v]
	if !ok {
		return fmt.Errorf("devops: pool: %v was not allocated by this pool", v)
	}
	delete(p.owner, v)
	k := poolKey{b.DType(), b.Numel()}
	p.free[k] = append(p.free[k], b)
	return nil
}

// Outstanding is the number of buffers handed out and not returned.
func (p *Pool) Outstanding() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.owner)
}

// Release frees every pooled buffer (those handed out stay allocated).
func (p *Pool) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, l := range p.free {
		for _, b := range l {
			p.g.Free(b)
		}
		delete(p.free, k)
	}
}
