package cp

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/local"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/check"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// fakePrims emulate the device primitives on host tensors with the device kernels'
// arithmetic (fp32 accumulators and merge, 16-bit word copies). Memory from Alloc starts
// as NaN and freed memory is overwritten with NaN, so a missing zero-fill or a use
// after free shows in the check; live bytes are counted to catch leaks.
//
// With deferred set, the emulation is a stream: every operation (the helper kernels,
// the zero-fill and NaN poisoning of pooled memory, and the attention kernel through
// queuedKernel) is queued and runs only when Sync, a Mark's wait, CopyIn or CopyOut
// drains the queue (or another queue waits for one of its events), while the
// communicator moves bytes at once, as the device mover does, unless it is the ordered
// fake mover, whose lanes are queues too. A transfer that is not ordered after the
// compute (a missing fence, mark or event) then reads or overwrites the wrong data, and
// the check fails.
type fakePrims struct {
	cpu      *tensor.CPU
	mu       sync.Mutex
	live     int64
	noRuns   bool  // RunsReady fails (the methods copy run by run)
	peak     int64 // the most live bytes
	deferred bool
	q        *fakeQueue
	marks    int // Mark calls (a transfer's host wait for the compute): none when event-ordered
	pool     map[[2]int][]*tensor.Host
	// calls counts what the methods asked of the device, by name: alloc, fill, convert,
	// merge, add, accumulate, copy-rows, heads-sum, sync, mark, record, wait-event, and
	// the kernel's forward and backward (queuedKernel); and helper-bytes (moved).
	calls map[string]int
}

// count records one call of the named primitive.
func (f *fakePrims) count(name string) {
	f.mu.Lock()
	f.calls[name]++
	f.mu.Unlock()
}

// moved counts, under the key "helper-bytes", the bytes a helper kernel reads and
// writes (every row; the merge kernel skips some, the count is the most).
func (f *fakePrims) moved(ts ...tensor.Tensor) {
	var b int64
	for _, t := range ts {
		b += int64(t.Numel() * t.DType().Size())
	}
	f.mu.Lock()
	f.calls["helper-bytes"] += int(b)
	f.mu.Unlock()
}

// takeCalls returns the calls counted since the last takeCalls and starts afresh.
func (f *fakePrims) takeCalls() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = map[string]int{}
	return c
}

func newFakePrims(e *emulator) *fakePrims {
	if e == nil {
		e = newEmulator()
	}
	return &fakePrims{cpu: &tensor.CPU{}, pool: map[[2]int][]*tensor.Host{}, q: e.queue(), calls: map[string]int{}}
}

// emulator is the device of the deferred emulation: every queue (each rank's compute
// stream, each transfer lane) and every event, under one lock, so a queue may drain
// another (an event wait) from inside one of its operations.
type emulator struct {
	mu     sync.Mutex
	events map[comm.Event]evRef
	next   comm.Event
}

// evRef is an event: the work of q up to (not including) operation pos.
type evRef struct {
	q   *fakeQueue
	pos int
}

func newEmulator() *emulator { return &emulator{events: map[comm.Event]evRef{}} }

func (e *emulator) queue() *fakeQueue { return &fakeQueue{e: e} }

// fakeQueue is a stream: operations run in order, when something waits for them.
type fakeQueue struct {
	e       *emulator
	ops     []func() error
	ran     int // operations started so far
	running bool
	err     error
}

func (q *fakeQueue) push(op func() error) {
	q.e.mu.Lock()
	q.ops = append(q.ops, op)
	q.e.mu.Unlock()
}

// drainTo runs operations until the first n have finished (every one when n < 0); the
// emulator's lock is held. Waiting for an operation that has started but not finished
// is a cycle: the device would deadlock.
func (q *fakeQueue) drainTo(n int) error {
	if q.running && (n < 0 || n >= q.ran) {
		return fmt.Errorf("fake device: a queue waits for itself (the device would deadlock)")
	}
	for len(q.ops) > 0 && (n < 0 || q.ran < n) {
		op := q.ops[0]
		q.ops = q.ops[1:]
		q.ran++
		q.running = true
		err := op()
		q.running = false
		if err != nil && q.err == nil {
			q.err = err
		}
	}
	return q.err
}

func (q *fakeQueue) drain(n int) error {
	q.e.mu.Lock()
	defer q.e.mu.Unlock()
	return q.drainTo(n)
}

// record returns an event marking the queue's work so far.
func (q *fakeQueue) record() comm.Event {
	e := q.e
	e.mu.Lock()
	defer e.mu.Unlock()
	e.next++
	e.events[e.next] = evRef{q, q.ran + len(q.ops)}
	return e.next
}

// ref looks an event up (the zero event is always complete).
func (e *emulator) ref(ev comm.Event) (evRef, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ev == 0 {
		return evRef{}, nil
	}
	r, ok := e.events[ev]
	if !ok {
		return r, fmt.Errorf("fake device: event %d destroyed or never recorded", ev)
	}
	return r, nil
}

// wait is the operation "the work of r has finished" (the emulator's lock is held).
func (r evRef) wait() error {
	if r.q == nil {
		return nil
	}
	return r.q.drainTo(r.pos)
}

// do runs op now, or queues it in deferred mode.
func (f *fakePrims) do(op func() error) error {
	if !f.deferred {
		return op()
	}
	f.q.push(op)
	return nil
}

// drain runs the queued operations up to the n-th ever queued (all when n < 0).
func (f *fakePrims) drain(n int) error { return f.q.drain(n) }

func (f *fakePrims) Device() tensor.Device { return f.cpu }

// Trim empties the pool.
func (f *fakePrims) Trim() {
	f.mu.Lock()
	f.pool = map[[2]int][]*tensor.Host{}
	f.mu.Unlock()
}

// Alloc hands out pooled memory first, as the device pool does, so a buffer freed by
// one step is reused by a later one.
func (f *fakePrims) Alloc(dt tensor.DType, shape ...int) (tensor.Tensor, error) {
	f.count("alloc")
	k := [2]int{int(dt), tensor.Numel(shape)}
	f.mu.Lock()
	var h *tensor.Host
	if l := f.pool[k]; len(l) > 0 {
		h, f.pool[k] = l[len(l)-1].Reshape(shape...), l[:len(l)-1]
	}
	f.live += int64(k[1] * dt.Size())
	f.peak = max(f.peak, f.live)
	f.mu.Unlock()
	if h == nil {
		h = tensor.NewHost(dt, shape...)
	}
	_ = f.do(func() error { h.Fill(math.NaN()); return nil })
	return h, nil
}

// Free returns memory to the pool; the NaN poisoning runs in stream order.
func (f *fakePrims) Free(ts ...tensor.Tensor) {
	for _, t := range ts {
		if t == nil {
			continue
		}
		h := t.(*tensor.Host)
		_ = f.do(func() error { h.Fill(math.NaN()); return nil })
		k := [2]int{int(h.DType()), h.Numel()}
		f.mu.Lock()
		f.pool[k] = append(f.pool[k], h)
		f.live -= h.Bytes()
		f.mu.Unlock()
	}
}

func (f *fakePrims) Sync() error {
	f.count("sync")
	return f.drain(-1)
}

func (f *fakePrims) Mark() (func() error, error) {
	f.count("mark")
	f.mu.Lock()
	f.marks++
	f.mu.Unlock()
	f.q.e.mu.Lock()
	n := f.q.ran + len(f.q.ops)
	f.q.e.mu.Unlock()
	return func() error { return f.drain(n) }, nil
}

func (f *fakePrims) Record() (comm.Event, error) {
	f.count("record")
	return f.q.record(), nil
}

func (f *fakePrims) WaitEvent(ev comm.Event) error {
	f.count("wait-event")
	r, err := f.q.e.ref(ev)
	if err != nil {
		return err
	}
	if !f.deferred {
		f.q.e.mu.Lock()
		defer f.q.e.mu.Unlock()
		return r.wait()
	}
	f.q.push(r.wait)
	return nil
}

func (f *fakePrims) DestroyEvent(ev comm.Event) {
	f.q.e.mu.Lock()
	delete(f.q.e.events, ev)
	f.q.e.mu.Unlock()
}

// fakeMover is the device mover of the emulation as an OrderedMover: collectives and
// plain transfers move host bytes at once (local.HostMover), and every lane is a queue
// of the emulator, so GroupAfter's copies run only when an event wait reaches them.
type fakeMover struct {
	local.HostMover
	e *emulator
}

func (m fakeMover) NewLane() (local.Lane, error) { return &fakeLane{q: m.e.queue()}, nil }

// fakeLane is one rank's transfer queue in one group.
type fakeLane struct{ q *fakeQueue }

// laneMsg is a message a lane's copy fills, with the event of that copy.
type laneMsg struct {
	data  []byte
	ready comm.Event
}

func (m laneMsg) Len() int64 { return int64(len(m.data)) }

func (l *fakeLane) Wait(ev comm.Event) error {
	r, err := l.q.e.ref(ev)
	if err != nil {
		return err
	}
	l.q.push(r.wait)
	return nil
}

func (l *fakeLane) Stage(src tensor.Tensor, off, n int64) (local.Message, error) {
	h := src.(*tensor.Host)
	m := laneMsg{data: make([]byte, n)}
	l.q.push(func() error { copy(m.data, h.Data[off:off+n]); return nil })
	m.ready = l.q.record()
	return m, nil
}

func (l *fakeLane) Put(dst tensor.Tensor, off int64, x local.Message) error {
	m, ok := x.(laneMsg)
	if !ok {
		return fmt.Errorf("fake lane: a %T message", x)
	}
	r, err := l.q.e.ref(m.ready)
	if err != nil {
		return err
	}
	h := dst.(*tensor.Host)
	l.q.push(func() error {
		if err := r.wait(); err != nil {
			return err
		}
		copy(h.Data[off:off+int64(len(m.data))], m.data)
		return nil
	})
	return nil
}

func (l *fakeLane) Mark() (comm.Event, error) { return l.q.record(), nil }

func (l *fakeLane) Close() error { return nil }

func (f *fakePrims) CopyIn(dst tensor.Tensor, src *tensor.Host) error {
	if err := f.drain(-1); err != nil {
		return err
	}
	return f.cpu.CopyIn(dst, src)
}

func (f *fakePrims) CopyOut(dst *tensor.Host, src tensor.Tensor) error {
	if err := f.drain(-1); err != nil {
		return err
	}
	return f.cpu.CopyOut(dst, src)
}

// queuedKernel runs a host kernel on the fake's stream.
type queuedKernel struct {
	kernels.Kernel
	f *fakePrims
}

func (k queuedKernel) Forward(ctx context.Context, p kernels.Problem, q, kk, v, out, lse tensor.Tensor) error {
	k.f.count("forward")
	return k.f.do(func() error { return k.Kernel.Forward(ctx, p, q, kk, v, out, lse) })
}

func (k queuedKernel) Backward(ctx context.Context, p kernels.Problem, q, kk, v, out, lse, dout, dq, dk, dv tensor.Tensor) error {
	k.f.count("backward")
	return k.f.do(func() error { return k.Kernel.Backward(ctx, p, q, kk, v, out, lse, dout, dq, dk, dv) })
}

func (f *fakePrims) CopyRows(dst, src tensor.Tensor, rows int, rowBytes, dstOff, dstStride, srcOff, srcStride int64) error {
	f.count("copy-rows")
	return f.do(func() error {
		d, s := dst.(*tensor.Host), src.(*tensor.Host)
		for _, v := range []int64{rowBytes, dstOff, dstStride, srcOff, srcStride} {
			if v%2 != 0 || v < 0 {
				return fmt.Errorf("fake: odd or negative byte count %d", v)
			}
		}
		for r := range int64(rows) {
			do, so := dstOff+r*dstStride, srcOff+r*srcStride
			if do+rowBytes > int64(len(d.Data)) || so+rowBytes > int64(len(s.Data)) {
				return fmt.Errorf("fake: row %d outside the buffers", r)
			}
			copy(d.Data[do:do+rowBytes], s.Data[so:so+rowBytes])
		}
		return nil
	})
}

// RunsReady fails when noRuns is set: a device without the batched kernels.
func (f *fakePrims) RunsReady() error {
	if f.noRuns {
		return fmt.Errorf("fake: no batched row kernels")
	}
	return nil
}

// runsOf reads a runs table (devops.RunsTable) back: (to, from, rows) per run.
func runsOf(table tensor.Tensor, n int) ([][3]int, error) {
	h := table.(*tensor.Host)
	if len(h.Data) < 8*(4*n+1) {
		return nil, fmt.Errorf("fake: a table of %d bytes for %d runs", len(h.Data), n)
	}
	at := func(i int) int {
		var v uint64
		for b := range 8 {
			v |= uint64(h.Data[8*i+b]) << (8 * b)
		}
		return int(int64(v))
	}
	rs := make([][3]int, n)
	for j := range n {
		rs[j] = [3]int{at(3 * j), at(3*j + 1), at(3*j + 2)}
	}
	return rs, nil
}

func (f *fakePrims) CopyRuns(dst, src, table tensor.Tensor, n, total int, rowBytes int64) error {
	f.count("copy-runs")
	return f.do(func() error {
		rs, err := runsOf(table, n)
		if err != nil {
			return err
		}
		d, s := dst.(*tensor.Host), src.(*tensor.Host)
		rb := int(rowBytes)
		got := 0
		for _, r := range rs {
			if (r[0]+r[2])*rb > len(d.Data) || (r[1]+r[2])*rb > len(s.Data) {
				return fmt.Errorf("fake: run %v outside the buffers", r)
			}
			copy(d.Data[r[0]*rb:(r[0]+r[2])*rb], s.Data[r[1]*rb:(r[1]+r[2])*rb])
			got += r[2]
		}
		if got != total {
			return fmt.Errorf("fake: runs of %d rows, told %d", got, total)
		}
		return nil
	})
}

func (f *fakePrims) AddRuns(dst, src, table tensor.Tensor, n, total int, rowElems int64) error {
	f.count("add-runs")
	return f.do(func() error {
		rs, err := runsOf(table, n)
		if err != nil {
			return err
		}
		d, s := dst.(*tensor.Host), src.(*tensor.Host)
		if d.DType() != tensor.FP32 {
			return fmt.Errorf("fake: row sums into %s", d.DType())
		}
		e := int(rowElems)
		seen := map[int]bool{}
		for _, r := range rs {
			if (r[0]+r[2])*e > d.Numel() || (r[1]+r[2])*e > s.Numel() {
				return fmt.Errorf("fake: run %v outside the buffers", r)
			}
			for row := r[0]; row < r[0]+r[2]; row++ {
				if seen[row] { // the device adds them at once: a race
					return fmt.Errorf("fake: two runs of one launch add into row %d", row)
				}
				seen[row] = true
			}
			for i := range r[2] * e {
				d.Set(r[0]*e+i, float64(float32(d.At(r[0]*e+i))+float32(s.At(r[1]*e+i))))
			}
		}
		return nil
	})
}

func (f *fakePrims) HeadsSum(x, in tensor.Tensor, u int) error {
	f.count("heads-sum")
	return f.do(func() error {
		xh, ih := x.(*tensor.Host), in.(*tensor.Host)
		sh := xh.Shape()
		t, h, d := sh[0], sh[1], sh[2]
		if ih.Numel() != u*t*d {
			return fmt.Errorf("fake: head sum of %v into %v", ih.Shape(), sh)
		}
		for i := range xh.Numel() {
			tok, hh, e := i/(h*d), (i/d)%h, i%d
			var s float32
			for j := range u {
				if j*h/u == hh {
					s += float32(ih.At((j*t+tok)*d + e))
				}
			}
			xh.Set(i, float64(s))
		}
		return nil
	})
}

func (f *fakePrims) Accumulate(dst, src tensor.Tensor) error {
	f.count("accumulate")
	f.moved(dst, dst, src)
	return f.do(func() error {
		d, s := dst.(*tensor.Host), src.(*tensor.Host)
		if d.DType() != tensor.FP32 || d.Numel() != s.Numel() {
			return fmt.Errorf("fake: accumulating %s%v into %s%v", s.DType(), s.Shape(), d.DType(), d.Shape())
		}
		for i := range d.Numel() {
			d.Set(i, float64(float32(d.At(i))+float32(s.At(i))))
		}
		return nil
	})
}

func (f *fakePrims) Convert(dst, src tensor.Tensor) error {
	f.count("convert")
	f.moved(dst, src)
	return f.do(func() error {
		d, s := dst.(*tensor.Host), src.(*tensor.Host)
		if d.DType() != s.DType() && d.DType() != tensor.FP32 && s.DType() != tensor.FP32 {
			return fmt.Errorf("fake: no conversion from %s to %s", s.DType(), d.DType())
		}
		return convert(d, s)
	})
}

func (f *fakePrims) Fill(t tensor.Tensor, v float64) error {
	f.count("fill")
	return f.do(func() error {
		t.(*tensor.Host).Fill(v)
		return nil
	})
}

func (f *fakePrims) Add(dst, a, b tensor.Tensor) error {
	f.count("add")
	f.moved(dst, a, b)
	return f.do(func() error {
		d, x, y := dst.(*tensor.Host), a.(*tensor.Host), b.(*tensor.Host)
		if x.Numel() != d.Numel() || y.Numel() != d.Numel() {
			return fmt.Errorf("fake: adding %v and %v into %v", x.Shape(), y.Shape(), d.Shape())
		}
		for i := range d.Numel() {
			d.Set(i, float64(float32(x.At(i))+float32(y.At(i))))
		}
		return nil
	})
}

// Merge is the merge kernel's arithmetic (fp32, the weights from float64 exp and log of
// fp32 values): a side with lse -inf is not read. Like the kernel it refuses an lse
// output that aliases an input lse, and an out that aliases b.
func (f *fakePrims) Merge(dst, ldst, a, la, b, lb tensor.Tensor) error {
	f.count("merge")
	f.moved(dst, ldst, a, la, b, lb)
	if ldst == la || ldst == lb || dst == b {
		return fmt.Errorf("fake: merge with aliased outputs")
	}
	return f.do(func() error {
		o, lo, x, lx, y, ly := dst.(*tensor.Host), ldst.(*tensor.Host), a.(*tensor.Host), la.(*tensor.Host), b.(*tensor.Host), lb.(*tensor.Host)
		sh := o.Shape()
		t, h, d := sh[0], sh[1], sh[2]
		if x.Numel() != o.Numel() || y.Numel() != o.Numel() || lo.Numel() != t*h || lx.Numel() != t*h || ly.Numel() != t*h {
			return fmt.Errorf("fake: merge of %v and %v into %v", x.Shape(), y.Shape(), sh)
		}
		ninf := float32(math.Inf(-1))
		for row := range t * h {
			li := (row%h)*t + row/h
			p, q := float32(lx.At(li)), float32(ly.At(li))
			wa, wb, lv := float32(0), float32(0), ninf
			switch {
			case p != ninf && q != ninf:
				hi := max(p, q)
				lv = hi + float32(math.Log(math.Exp(float64(p-hi))+math.Exp(float64(q-hi))))
				wa, wb = float32(math.Exp(float64(p-lv))), float32(math.Exp(float64(q-lv)))
			case p != ninf:
				wa, lv = 1, p
			case q != ninf:
				wb, lv = 1, q
			}
			lo.Set(li, float64(lv))
			for i := row * d; i < (row+1)*d; i++ {
				var v float32
				if wa != 0 {
					v = wa * float32(x.At(i))
				}
				if wb != 0 {
					v += wb * float32(y.At(i))
				}
				o.Set(i, float64(v))
			}
		}
		return nil
	})
}

// TestDeviceOpsMatchReference runs every method through the device path (deviceOps:
// fp32 accumulators and merge, row-copy rearrangements, uploads and downloads through
// Execute) on the emulated device, on the four CP masks at 2, 4 and 8 ranks, checked
// against the reference by the rule; the ranks' bytes equal CommBytes and every buffer
// the methods allocated is freed. Partial outputs are fp32 here (a kernel that writes
// fp32 gradients); TestDeviceOpsBF16Partials measures kernels/cuda's bf16 partials.
func TestDeviceOpsMatchReference(t *testing.T) {
	worst := deviceTable(t, tensor.FP32, 1, eager)
	t.Logf("worst error / tolerance with fp32 partials: %.3f", worst)
}

// TestDeviceOpsBF16Partials is the same table with the per-step outputs rounded to bf16,
// as kernels/cuda writes them (its dq, dk, dv and out are in the problem's dtype). The
// rounding of each rank's partial dK/dV costs precision: on this table one case
// (causal_document_long, 4 ranks, zigzag) reaches 1.002x the rule's tolerance, so this
// test bounds the ratio at 1.1, a regression guard, not the rule.
func TestDeviceOpsBF16Partials(t *testing.T) {
	worst := deviceTable(t, tensor.BF16, 1.1, eager)
	t.Logf("worst error / tolerance with bf16 partials: %.3f", worst)
}

// TestDeviceOpsStreamOrder is the table on the deferred emulation: compute runs only
// when the methods wait for it (fence, a transfer's mark, copies in and out), the
// communicator moves bytes at once, and freed buffers are reused. It passes only if
// every transfer is ordered after the compute that wrote or still reads its buffers.
func TestDeviceOpsStreamOrder(t *testing.T) {
	worst := deviceTable(t, tensor.FP32, 1, deferred)
	t.Logf("worst error / tolerance on the deferred device: %.3f", worst)
}

// TestDeviceOpsEventOrder is the table on the deferred emulation with a stream-ordered
// communicator (comm.Ordered, as the device mover of ranks sharing a GPU and NCCL are):
// each transfer is a queue of its own that runs only when an event wait reaches it, and
// the compute runs only when something waits for it. It passes only if every ring
// transfer (K/V and the dK/dV accumulators) waits, on the device, for the compute that
// frees its buffers, and the compute waits for the transfers it reads; and no transfer
// waits for the compute on the host (no Mark at all).
func TestDeviceOpsEventOrder(t *testing.T) {
	worst := deviceTable(t, tensor.FP32, 1, ordered)
	t.Logf("worst error / tolerance on the event-ordered device: %.3f", worst)
}

// deviceMode is how the emulated device runs: every operation at once, or deferred
// with the transfers at once (host-ordered), or deferred with event-ordered transfers.
type deviceMode int

const (
	eager deviceMode = iota
	deferred
	ordered
)

// deviceTable runs the table with partials in part and fails a case whose worst
// figure's error exceeds limit x its tolerance (or has NaNs); it returns the worst ratio.
func deviceTable(t *testing.T, part tensor.DType, limit float64, mode deviceMode) float64 {
	var cache refCache
	worst := 0.0
	forEachDeviceCase(t, testSeq, 16, func(mi int) mask.Options { return testMaskOptions(uint64(7 + mi)) },
		func(t *testing.T, mi, ci int, m Method, pl *Plan, p kernels.Problem) {
			q, k, v, dout := inputs(p, uint64(5000+100*mi+ci))
			exact, naive := cache.get(t, fmt.Sprint(mi, ci), p, q, k, v, dout)
			got, counted, leaked, marks := runFakeDevice(t, m, pl, part, mode, q, k, v, dout)
			if mode == ordered && marks != 0 {
				t.Fatalf("%d transfers waited on the host for the compute (Mark) on a stream-ordered communicator", marks)
			}
			rep := check.CompareOutputs(got, exact, naive, kernels.FwdBwd)
			for _, f := range rep.Figures {
				ratio := f.Err / f.Tol
				if f.NaNs > 0 || !(ratio <= limit) {
					t.Fatalf("%s: %s error %.3g is %.3fx its tolerance %.3g (limit %.2fx); %s", part, f.Name, f.Err, ratio, f.Tol, limit, rep)
				}
				worst = max(worst, ratio)
			}
			for r, c := range counted {
				if want := RankCommBytesOf(pl, r, kernels.FwdBwd); c != want {
					t.Fatalf("rank %d sent %d bytes; CommBytes says %d", r, c, want)
				}
			}
			for r, l := range leaked {
				if l != 0 {
					t.Fatalf("rank %d: %d device bytes still allocated after the run", r, l)
				}
			}
		})
	return worst
}

// forEachDeviceCase runs fn as the subtest "mask/method/mesh" for every CP mask x method
// x mesh of more than one rank, with the plan for a mask of seq tokens (mask mi built
// with opts(mi)) and GQA 8:2 heads of headDim in bf16.
func forEachDeviceCase(t *testing.T, seq, headDim int, opts func(mi int) mask.Options, fn func(t *testing.T, mi, ci int, m Method, pl *Plan, p kernels.Problem)) {
	for mi, maskName := range mask.CPMasks() {
		spec, err := mask.Build(maskName, seq, opts(mi))
		if err != nil {
			t.Fatal(err)
		}
		docs, err := spec.Docs()
		if err != nil {
			t.Fatal(err)
		}
		p := kernels.Problem{HeadsQ: 8, HeadsKV: 2, HeadDim: headDim, DType: tensor.BF16, Mask: spec.Mask}
		for _, name := range Names() {
			m, _ := New(name)
			for ci, mc := range meshes(m) {
				if mc.Ranks == 1 {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s/%s", maskName, name, meshName(mc)), func(t *testing.T) {
					cfg := mc
					cfg.Docs = docs
					pl, err := m.Plan(cfg, p)
					if err != nil {
						t.Fatal(err)
					}
					fn(t, mi, ci, m, pl, p)
				})
			}
		}
	}
}

// runFakeDevice is Execute on the emulated device on n in-process ranks: gathered
// outputs, each rank's bytes sent, each rank's device bytes left allocated, and the
// Mark calls of all ranks.
func runFakeDevice(t *testing.T, m Method, pl *Plan, part tensor.DType, mode deviceMode, q, k, v, dout *tensor.Host) (Outputs, []int64, []int64, int) {
	t.Helper()
	got, counted, leaked, marks, _ := runFakeDeviceWith(t, m, pl, part, mode, false, false, q, k, v, dout)
	return got, counted, leaked, marks
}

// runFakeDeviceWith is runFakeDevice with the runs tables kept for the run (keep) or
// uploaded per call, and the batched kernels missing (noBatch); it also returns the
// calls of the helper kernels, summed over the ranks.
func runFakeDeviceWith(t *testing.T, m Method, pl *Plan, part tensor.DType, mode deviceMode, keep, noBatch bool, q, k, v, dout *tensor.Host) (Outputs, []int64, []int64, int, map[string]int) {
	t.Helper()
	n := pl.Config.Ranks
	var got Outputs
	counted, leaked := make([]int64, n), make([]int64, n)
	e := newEmulator()
	var opts []local.Option
	if mode == ordered {
		opts = append(opts, local.WithMover(fakeMover{e: e}))
	}
	var mu sync.Mutex
	marks, calls := 0, map[string]int{}
	err := local.Run(n, func(c comm.Comm) error {
		f := newFakePrims(e)
		f.deferred, f.noRuns = mode != eager, noBatch
		defer func() {
			mu.Lock()
			marks += f.marks
			for name, k := range f.takeCalls() {
				calls[name] += k
			}
			mu.Unlock()
		}()
		r, err := NewRun(pl, queuedKernel{ref.New(ref.Options{}), f}, c)
		if err != nil {
			return err
		}
		ops := deviceOps{p: f, part: part}
		if keep {
			ops.tables = &runTables{}
		}
		r.ops = ops
		if _, ok := r.Device().(*tensor.CPU); !ok {
			return fmt.Errorf("fake device is %T", r.Device())
		}
		o, err := Execute(context.Background(), m, r, q, k, v, dout, true)
		if err != nil {
			return err
		}
		counted[c.Rank()] = r.Counters().BytesSent
		if err := r.Close(); err != nil {
			return err
		}
		leaked[c.Rank()] = f.live
		g, err := GatherOutputs(c, pl, o, true)
		if c.Rank() == 0 {
			got = g
		}
		return err
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return got, counted, leaked, marks, calls
}
