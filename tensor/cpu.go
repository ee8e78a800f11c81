package tensor

import (
	"fmt"
	"sync"
	"time"
)

// CPU is the host as a Device: tensors are *Host, time is the wall clock.
type CPU struct {
	mu         sync.Mutex
	live, peak int64
}

var _ Device = (*CPU)(nil)

func (c *CPU) Name() string { return "cpu" }

func (c *CPU) Alloc(dt DType, shape ...int) (Tensor, error) {
	h := NewHost(dt, shape...)
	c.mu.Lock()
	c.live += h.Bytes()
	if c.live > c.peak {
		c.peak = c.live
	}
	c.mu.Unlock()
	return h, nil
}

func (c *CPU) Free(t Tensor) {
	c.mu.Lock()
	c.live -= t.Bytes()
	c.mu.Unlock()
}

// AsHost returns t as a host tensor, or an error saying it is not in host memory.
func AsHost(t Tensor) (*Host, error) {
	h, ok := t.(*Host)
	if !ok {
		return nil, fmt.Errorf("tensor %T is not in host memory", t)
	}
	return h, nil
}

func host(t Tensor) (*Host, error) {
	h, err := AsHost(t)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	return h, nil
}

func (c *CPU) CopyIn(dst Tensor, src *Host) error {
	d, err := host(dst)
	if err != nil {
		return err
	}
	if d.dt != src.dt || len(d.Data) != len(src.Data) {
		return fmt.Errorf("cpu: copy of %s%v into %s%v", src.dt, src.shape, d.dt, d.shape)
	}
	copy(d.Data, src.Data)
	return nil
}

func (c *CPU) CopyOut(dst *Host, src Tensor) error {
	s, err := host(src)
	if err != nil {
		return err
	}
	return c.CopyIn(dst, s)
}

func (c *CPU) Poison(t Tensor) error {
	h, err := host(t)
	if err != nil {
		return err
	}
	h.Fill(nan)
	return nil
}

func (c *CPU) Time(fn func() error) (time.Duration, error) {
	t0 := time.Now()
	err := fn()
	return time.Since(t0), err
}

// FlushCache is a no-op: CPU timings are of the reference, not a tuned kernel.
func (c *CPU) FlushCache() error { return nil }

func (c *CPU) PeakMemory() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peak
}

func (c *CPU) ResetPeak() {
	c.mu.Lock()
	c.peak = c.live
	c.mu.Unlock()
}
