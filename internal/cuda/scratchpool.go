package cuda

import (
	"fmt"
	"sync"

	"github.com/longca/longca/tensor"
)

// ScratchPool holds a kernel's reusable device buffers, one per role (dsum, workspace,
// acc_out, ...): a sweep over lengths keeps only the largest of each, grown when a larger
// problem comes. Its methods are safe for concurrent use.
type ScratchPool struct {
	dev  *Device
	mu   sync.Mutex
	bufs map[string]*Buffer
}

// NewScratchPool is an empty pool on dev.
func NewScratchPool(dev *Device) *ScratchPool {
	return &ScratchPool{dev: dev, bufs: map[string]*Buffer{}}
}

// Get is a view of at least n (at least 1) elements of dt for role: the role's buffer
// when it is large enough and of that dtype, else a new one, the old one freed after the
// device's work (which may still read it) has finished.
func (s *ScratchPool) Get(role string, dt tensor.DType, n int) (*Buffer, error) {
	n = max(n, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.bufs[role]; ok && b.DType() == dt && b.Numel() >= n {
		return b.View(0, n)
	}
	if old, ok := s.bufs[role]; ok {
		if err := s.dev.Sync(); err != nil {
			return nil, err
		}
		s.dev.Free(old)
		delete(s.bufs, role)
	}
	b, err := s.dev.AllocBuffer(dt, n)
	if err != nil {
		return nil, fmt.Errorf("%s scratch of %d %s: %w", role, n, dt, err)
	}
	s.bufs[role] = b
	return b.View(0, n)
}
