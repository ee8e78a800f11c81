//go:build gpu

package cudamover

import (
	"fmt"
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
