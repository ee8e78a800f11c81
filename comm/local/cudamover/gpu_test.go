//go:build gpu

package cudamover

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/local"
	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/tensor"
)

// TestCollectivesOnDevice runs the collectives the CP methods use on 4 in-process ranks
// with device tensors and compares every rank's result with the same collective on host
// tensors (local.HostMover), byte for byte (fp32 sums: to rounding).
func TestCollectivesOnDevice(t *testing.T) {
	const n = 4
	g, err := cuda.Open(0)
	if err != nil {
		t.Fatalf("no GPU: %v", err)
	}
	m, err := New(g, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	type result struct{ ring, a2a, ag, rs *tensor.Host }
	// run does the collectives on host tensors (dev false) or device copies of them.
	run := func(dev bool) [n]result {
		var res [n]result
		opts := []local.Option{}
		if dev {
			opts = append(opts, local.WithMover(m))
		}
		err := local.Run(n, func(c comm.Comm) error {
			r := c.Rank()
			rng := rand.New(rand.NewPCG(uint64(r), 5))
			in := func(dt tensor.DType, shape ...int) *tensor.Host {
				h := tensor.NewHost(dt, shape...)
				h.FillNormal(rng, 1)
				return h
			}
			put := func(h *tensor.Host) (tensor.Tensor, error) {
				if !dev {
					return h, nil
				}
				b, err := g.AllocBuffer(h.DType(), h.Shape()...)
				if err != nil {
					return nil, err
				}
				return b, g.CopyIn(b, h)
			}
			get := func(t tensor.Tensor, like *tensor.Host) (*tensor.Host, error) {
				if !dev {
					return t.(*tensor.Host), nil
				}
				h := tensor.NewHost(like.DType(), like.Shape()...)
				return h, g.CopyOut(h, t)
			}
			srcs := []*tensor.Host{in(tensor.BF16, 64, 2, 32), in(tensor.BF16, 4*16, 4, 32), in(tensor.BF16, 48, 2, 32), in(tensor.FP32, 4*40, 2, 32)}
			dsts := []*tensor.Host{tensor.NewHost(tensor.BF16, 64, 2, 32), tensor.NewHost(tensor.BF16, 4*16, 4, 32),
				tensor.NewHost(tensor.BF16, 4*48, 2, 32), tensor.NewHost(tensor.FP32, 40, 2, 32)}
			s := make([]tensor.Tensor, 4)
			d := make([]tensor.Tensor, 4)
			for i := range srcs {
				var err error
				if s[i], err = put(srcs[i]); err != nil {
					return err
				}
				if d[i], err = put(dsts[i]); err != nil {
					return err
				}
			}
			if err := c.Group(func() error {
				if err := c.Send(s[0], (r+1)%n); err != nil {
					return err
				}
				return c.Recv(d[0], (r+n-1)%n)
			}); err != nil {
				return err
			}
			if err := c.AllToAll(s[1], d[1]); err != nil {
				return err
			}
			if err := c.AllGather(s[2], d[2]); err != nil {
				return err
			}
			if err := c.ReduceScatter(s[3], d[3]); err != nil {
				return err
			}
			var out [4]*tensor.Host
			for i := range d {
				var err error
				if out[i], err = get(d[i], dsts[i]); err != nil {
					return err
				}
				if dev {
					g.Free(s[i])
					g.Free(d[i])
				}
			}
			res[r] = result{out[0], out[1], out[2], out[3]}
			return nil
		}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	host, dev := run(false), run(true)
	for r := range n {
		for i, pair := range [][2]*tensor.Host{{host[r].ring, dev[r].ring}, {host[r].a2a, dev[r].a2a}, {host[r].ag, dev[r].ag}} {
			if string(pair[0].Data) != string(pair[1].Data) {
				t.Fatalf("rank %d: collective %d differs between host and device movers", r, i)
			}
		}
		h, d := host[r].rs.Float64s(), dev[r].rs.Float64s()
		for i := range h {
			if diff := h[i] - d[i]; diff > 1e-5 || diff < -1e-5 {
				t.Fatalf("rank %d: reduce-scatter element %d: host %g, device %g", r, i, h[i], d[i])
			}
		}
	}
	if k := m.pool.Outstanding(); k != 0 {
		t.Fatalf("%d message buffers not returned to the pool", k)
	}
	fmt.Println("# cudamover: ring, all-to-all, all-gather, reduce-scatter match the host mover on 4 ranks")
}

// TestLaneRingOnDevice is the ring step of the CP methods on the event-ordered path
// (comm.Ordered): each of 4 ranks has its own compute stream, writes a block there,
// hands its event to GroupAfter (the transfer waits for it on the device), and makes its
// compute stream wait for the transfer's done event before reading what it received;
// no host thread waits in between. Repeated with the blocks overwritten each round, the
// received data must always be the previous rank's current round, and every message
// buffer must come back to the pool.
func TestLaneRingOnDevice(t *testing.T) {
	const n, rounds = 4, 20
	g, err := cuda.Open(0)
	if err != nil {
		t.Fatalf("no GPU: %v", err)
	}
	m, err := New(g, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	err = local.Run(n, func(c comm.Comm) error {
		r := c.Rank()
		dev, err := cuda.Open(0) // this rank's own compute stream
		if err != nil {
			return err
		}
		oc := c.(comm.Ordered)
		if !oc.StreamOrdered() {
			return fmt.Errorf("the device mover's communicator is not stream-ordered")
		}
		send, err := dev.AllocBuffer(tensor.FP32, 1<<16)
		if err != nil {
			return err
		}
		recv, err := dev.AllocBuffer(tensor.FP32, 1<<16)
		if err != nil {
			return err
		}
		h := tensor.NewHost(tensor.FP32, 1<<16)
		for round := range rounds {
			// The compute writes this round's block (a memset on its stream: 1000*round + rank).
			if err := dev.MemsetOn(dev.Stream(), send, 4, f32bits(float32(1000*round+r))); err != nil {
				return err
			}
			after, err := dev.Record(dev.Stream())
			if err != nil {
				return err
			}
			done, err := oc.GroupAfter(comm.Event(after), func() error {
				if err := c.Send(send, (r+1)%n); err != nil {
					return err
				}
				return c.Recv(recv, (r+n-1)%n)
			})
			_ = dev.DestroyEvent(after)
			if err != nil {
				return err
			}
			if err := dev.StreamWait(dev.Stream(), cuda.Event(done)); err != nil {
				return err
			}
			_ = dev.DestroyEvent(cuda.Event(done))
			if err := dev.CopyOut(h, recv); err != nil { // ordered after the wait on the stream
				return err
			}
			want := float32(1000*round + (r+n-1)%n)
			for i := 0; i < h.Numel(); i += 4099 {
				if got := float32(h.At(i)); got != want {
					return fmt.Errorf("rank %d round %d: element %d is %v, want %v", r, round, i, got, want)
				}
			}
		}
		return oc.Settle()
	}, local.WithMover(m))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
	m.reclaim()
	if k := m.pool.Outstanding(); k != 0 {
		t.Fatalf("%d message buffers not returned to the pool", k)
	}
	fmt.Println("# cudamover: event-ordered ring exchange on 4 ranks, 20 rounds: every block arrived, every buffer came back")
}

func f32bits(v float32) uint32 { return math.Float32bits(v) }
