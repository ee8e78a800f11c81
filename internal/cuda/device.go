package cuda

import (
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/longca/longca/tensor"
)

// Device is one GPU as a tensor.Device: its primary context, one stream every launch and
// copy of longca goes on, and the bookkeeping of live and peak bytes.
type Device struct {
	Props
	dv     *lib
	dev    uint64
	ctx    uint64
	stream Stream

	mu         sync.Mutex
	live, peak int64
	flush      *Buffer // a buffer larger than L2, written to evict it
	util       *Module // the fill kernels, compiled on first use
}

var _ tensor.Device = (*Device)(nil)

// Buffer is a tensor in device memory.
type Buffer struct {
	dt    tensor.DType
	shape []int
	ptr   uint64
	bytes int64
}

var _ tensor.DeviceBuffer = (*Buffer)(nil)

// DType, Shape, Numel and Bytes describe the buffer.
func (b *Buffer) DType() tensor.DType { return b.dt }

// Shape is the buffer's shape.
func (b *Buffer) Shape() []int { return b.shape }

// Numel is the element count.
func (b *Buffer) Numel() int { return tensor.Numel(b.shape) }

// Bytes is the size in bytes.
func (b *Buffer) Bytes() int64 { return b.bytes }

// DevicePtr is the device address.
func (b *Buffer) DevicePtr() uintptr { return uintptr(b.ptr) }

func (b *Buffer) String() string { return fmt.Sprintf("cuda %s%v", b.dt, b.shape) }

// View returns a buffer sharing b's memory from element offset off with another shape
// (for per-step windows of a larger tensor); it owns nothing and must not be freed.
func (b *Buffer) View(off int, shape ...int) (*Buffer, error) {
	n := tensor.Numel(shape)
	if off < 0 || off+n > b.Numel() {
		return nil, fmt.Errorf("cuda: view of %d elements at %d outside a buffer of %d", n, off, b.Numel())
	}
	sz := int64(b.dt.Size())
	return &Buffer{dt: b.dt, shape: append([]int(nil), shape...), ptr: b.ptr + uint64(off)*uint64(sz), bytes: int64(n) * sz}, nil
}

// Open retains device index's primary context and creates the device's stream.
func Open(index int) (*Device, error) {
	d, err := driver()
	if err != nil {
		return nil, err
	}
	n, err := DeviceCount()
	if err != nil {
		return nil, err
	}
	if index < 0 || index >= n {
		return nil, fmt.Errorf("cuda: device %d does not exist (%d devices)", index, n)
	}
	props, err := deviceProps(d, index)
	if err != nil {
		return nil, err
	}
	g := &Device{Props: props, dv: d}
	s := newScratch()
	defer s.free()
	if err := d.call("cuDeviceGet", s.ptr(0), uint64(index)); err != nil {
		return nil, err
	}
	g.dev = uint64(s.i32(0))
	if err := d.call("cuDevicePrimaryCtxRetain", s.ptr(1), g.dev); err != nil {
		return nil, err
	}
	g.ctx = s.u64(1)
	err = g.with(func() error {
		if err := d.call("cuStreamCreate", s.ptr(2), 0); err != nil {
			return err
		}
		g.stream = Stream(s.u64(2))
		if err := d.call("cuMemGetInfo_v2", s.ptr(3), s.ptr(4)); err != nil {
			return err
		}
		g.FreeMem = int64(s.u64(3))
		return nil
	})
	if err != nil {
		return nil, err
	}
	if v, err := DriverVersion(); err == nil {
		g.DriverVersionCUDA = v
	}
	return g, nil
}

// with runs fn on one OS thread with the device's context current (the driver's current
// context is per thread, and goroutines move between threads).
func (g *Device) with(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := g.dv.call("cuCtxSetCurrent", g.ctx); err != nil {
		return err
	}
	return fn()
}

// Do runs fn with the device's context current on the calling thread: wrap driver work
// (module loads, launches) done outside this package in it.
func (g *Device) Do(fn func() error) error { return g.with(fn) }

// Stream is the stream every launch and copy of this device goes on.
func (g *Device) Stream() Stream { return g.stream }

// Name is the device's name and index.
func (g *Device) Name() string { return fmt.Sprintf("cuda:%d %s", g.Index, g.Props.Name) }

// Alloc allocates an uninitialised device tensor.
func (g *Device) Alloc(dt tensor.DType, shape ...int) (tensor.Tensor, error) {
	return g.AllocBuffer(dt, shape...)
}

// AllocBuffer is Alloc returning the concrete type.
func (g *Device) AllocBuffer(dt tensor.DType, shape ...int) (*Buffer, error) {
	b := &Buffer{dt: dt, shape: append([]int(nil), shape...)}
	b.bytes = int64(tensor.Numel(shape)) * int64(dt.Size())
	if b.bytes == 0 {
		return b, nil
	}
	err := g.with(func() error {
		s := newScratch()
		defer s.free()
		if err := g.dv.call("cuMemAlloc_v2", s.ptr(0), uint64(b.bytes)); err != nil {
			return err
		}
		b.ptr = s.u64(0)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: allocating %s%v (%d bytes): %w", dt, shape, b.bytes, err)
	}
	g.mu.Lock()
	g.live += b.bytes
	g.peak = max(g.peak, g.live)
	g.mu.Unlock()
	return b, nil
}

// Free releases a tensor from Alloc (views and foreign tensors are ignored).
func (g *Device) Free(t tensor.Tensor) {
	b, ok := t.(*Buffer)
	if !ok || b.ptr == 0 {
		return
	}
	// A failed free leaves nothing to recover; the bookkeeping still drops it.
	_ = g.with(func() error { return g.dv.call("cuMemFree_v2", b.ptr) })
	b.ptr = 0
	g.mu.Lock()
	g.live -= b.bytes
	g.mu.Unlock()
}

func buffer(t tensor.Tensor) (*Buffer, error) {
	b, ok := t.(*Buffer)
	if !ok {
		return nil, fmt.Errorf("cuda: tensor %T is not in device memory", t)
	}
	return b, nil
}

func sameLayout(b *Buffer, h *tensor.Host) error {
	if b.dt != h.DType() || b.bytes != h.Bytes() {
		return fmt.Errorf("cuda: copy between %s%v and host %s%v", b.dt, b.shape, h.DType(), h.Shape())
	}
	return nil
}

// CopyIn copies a host tensor into a device tensor of the same type and size.
func (g *Device) CopyIn(dst tensor.Tensor, src *tensor.Host) error {
	b, err := buffer(dst)
	if err != nil {
		return err
	}
	if err := sameLayout(b, src); err != nil {
		return err
	}
	if b.bytes == 0 {
		return nil
	}
	defer runtime.KeepAlive(src)
	return g.with(func() error {
		if err := g.dv.call("cuStreamSynchronize", uint64(g.stream)); err != nil {
			return err
		}
		return g.dv.call("cuMemcpyHtoD_v2", b.ptr, uint64(uintptr(unsafe.Pointer(&src.Data[0]))), uint64(b.bytes))
	})
}

// CopyOut copies a device tensor into a host tensor of the same type and size, after the
// stream's work is done.
func (g *Device) CopyOut(dst *tensor.Host, src tensor.Tensor) error {
	b, err := buffer(src)
	if err != nil {
		return err
	}
	if err := sameLayout(b, dst); err != nil {
		return err
	}
	if b.bytes == 0 {
		return nil
	}
	defer runtime.KeepAlive(dst)
	return g.with(func() error {
		if err := g.dv.call("cuStreamSynchronize", uint64(g.stream)); err != nil {
			return err
		}
		return g.dv.call("cuMemcpyDtoH_v2", uint64(uintptr(unsafe.Pointer(&dst.Data[0]))), b.ptr, uint64(b.bytes))
	})
}

// CopyDevice copies src into dst (same size) on the stream.
func (g *Device) CopyDevice(dst, src tensor.Tensor) error {
	d, err := buffer(dst)
	if err != nil {
		return err
	}
	s, err := buffer(src)
	if err != nil {
		return err
	}
	if d.bytes != s.bytes {
		return fmt.Errorf("cuda: device copy of %d bytes into %d", s.bytes, d.bytes)
	}
	return g.with(func() error {
		return g.dv.call("cuMemcpyDtoDAsync_v2", d.ptr, s.ptr, uint64(d.bytes), uint64(g.stream))
	})
}

// Memset fills t with a repeated 1-, 2- or 4-byte pattern on the stream.
func (g *Device) Memset(t tensor.Tensor, width int, pattern uint32) error {
	b, err := buffer(t)
	if err != nil {
		return err
	}
	if b.bytes%int64(width) != 0 {
		return fmt.Errorf("cuda: memset of %d bytes in %d-byte words", b.bytes, width)
	}
	fn := map[int]string{1: "cuMemsetD8Async", 2: "cuMemsetD16Async", 4: "cuMemsetD32Async"}[width]
	if fn == "" {
		return fmt.Errorf("cuda: memset width %d (use 1, 2 or 4)", width)
	}
	if b.bytes == 0 {
		return nil
	}
	return g.with(func() error {
		return g.dv.call(fn, b.ptr, uint64(pattern), uint64(b.bytes/int64(width)), uint64(g.stream))
	})
}

// nanPattern is a NaN bit pattern for the dtype and the memset width to write it with
// (fp64 gets 0x7ff80000 repeated, which is a NaN too).
func nanPattern(dt tensor.DType) (width int, pattern uint32) {
	switch dt {
	case tensor.BF16:
		return 2, 0x7fc0
	case tensor.FP16:
		return 2, 0x7e00
	case tensor.FP32:
		return 4, 0x7fc00000
	}
	return 4, 0x7ff80000
}

// Poison fills t with NaN.
func (g *Device) Poison(t tensor.Tensor) error {
	w, p := nanPattern(t.DType())
	return g.Memset(t, w, p)
}

// Sync waits for the stream's work and reports any asynchronous error.
func (g *Device) Sync() error {
	return g.with(func() error { return g.dv.call("cuStreamSynchronize", uint64(g.stream)) })
}

// Time runs fn between two events recorded on the stream and returns the time between
// them.
func (g *Device) Time(fn func() error) (time.Duration, error) {
	var ms float32
	var start, end uint64
	err := g.with(func() error {
		s := newScratch()
		defer s.free()
		if err := g.dv.call("cuEventCreate", s.ptr(0), 0); err != nil {
			return err
		}
		start = s.u64(0)
		if err := g.dv.call("cuEventCreate", s.ptr(1), 0); err != nil {
			return err
		}
		end = s.u64(1)
		return g.dv.call("cuEventRecord", start, uint64(g.stream))
	})
	defer func() {
		_ = g.with(func() error {
			for _, e := range []uint64{start, end} {
				if e != 0 {
					_ = g.dv.call("cuEventDestroy_v2", e)
				}
			}
			return nil
		})
	}()
	if err != nil {
		return 0, err
	}
	if err := fn(); err != nil {
		return 0, err
	}
	err = g.with(func() error {
		if err := g.dv.call("cuEventRecord", end, uint64(g.stream)); err != nil {
			return err
		}
		if err := g.dv.call("cuEventSynchronize", end); err != nil {
			return err
		}
		s := newScratch()
		defer s.free()
		if err := g.dv.call("cuEventElapsedTime", s.ptr(0), start, end); err != nil {
			return err
		}
		ms = s.f32(0)
		return nil
	})
	return time.Duration(float64(ms) * 1e6), err
}

// FlushCache writes a buffer of 256 MB (or four times L2, if larger) on the stream, so
// the next timed repetition starts with a cold L2.
func (g *Device) FlushCache() error {
	if g.flush == nil {
		n := max(256<<20, 4*g.L2Bytes)
		g.mu.Lock()
		peak := g.peak
		g.mu.Unlock()
		b, err := g.AllocBuffer(tensor.FP32, n/4)
		if err != nil {
			return err
		}
		g.mu.Lock()
		g.live -= b.bytes // the flush buffer is the harness's, not the kernel's
		g.peak = peak
		g.mu.Unlock()
		g.flush = b
	}
	return g.Memset(g.flush, 4, 0)
}

// PeakMemory is the most bytes held by Alloc at once since ResetPeak.
func (g *Device) PeakMemory() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.peak
}

// ResetPeak starts a new peak from the bytes held now.
func (g *Device) ResetPeak() {
	g.mu.Lock()
	g.peak = g.live
	g.mu.Unlock()
}

// MemInfo is the free and total device memory.
func (g *Device) MemInfo() (free, total int64, err error) {
	err = g.with(func() error {
		s := newScratch()
		defer s.free()
		if err := g.dv.call("cuMemGetInfo_v2", s.ptr(0), s.ptr(1)); err != nil {
			return err
		}
		free, total = int64(s.u64(0)), int64(s.u64(1))
		return nil
	})
	return free, total, err
}
