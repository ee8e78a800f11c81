package cp

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/longca/longca/tensor"
)

// stepInputs are n random partials [t, h, d] in part with their lse [h, t]: in partial j
// the rows r with r % (n+1) == j have no keys (lse -inf, out 0, as the kernels write
// them), and rows r % (n+1) == n have keys in none.
func stepInputs(rng *rand.Rand, n, t, h, d int, part tensor.DType) (outs, lses []*tensor.Host) {
	for j := range n {
		o, l := tensor.NewHost(part, t, h, d), tensor.NewHost(tensor.FP32, h, t)
		o.FillNormal(rng, 1)
		l.FillNormal(rng, 2)
		for row := range t * h {
			if r := row % (n + 1); r == j || r == n {
				l.Set((row%h)*t+row/h, math.Inf(-1))
				for e := range d {
					o.Set(row*d+e, 0)
				}
			}
		}
		outs, lses = append(outs, o), append(lses, l)
	}
	return outs, lses
}

// TestStepMerge runs stepMerge on the emulated device (bf16 out; bf16 or fp32 partials)
// and on the host, for 2 to 5 partials, against LSEMerger in float64: out to bf16's
// rounding, lse to fp32's, rows without keys anywhere out 0 and lse -inf, no NaN; and
// the device merger of an unknown number of partials (deviceMerger) the same way.
func TestStepMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const tk, h, d = 7, 3, 16
	for n := 2; n <= 5; n++ {
		for _, part := range []tensor.DType{tensor.BF16, tensor.FP32} {
			outs, lses := stepInputs(rng, n, tk, h, d, part)
			ref := NewLSEMerger(tk, h, d)
			for j := range n {
				if err := ref.Add(outs[j], lses[j]); err != nil {
					t.Fatal(err)
				}
			}
			wantO, wantL := tensor.NewHost(tensor.FP64, tk, h, d), tensor.NewHost(tensor.FP64, h, tk)
			if err := ref.Write(wantO, wantL); err != nil {
				t.Fatal(err)
			}
			check := func(name string, o, l *tensor.Host) {
				t.Helper()
				for i := range o.Numel() {
					got, want := o.At(i), wantO.At(i)
					if math.IsNaN(got) || math.Abs(got-want) > max(1, math.Abs(want))/128 {
						t.Fatalf("%s, %d %s partials: out %d is %g, want %g", name, n, part, i, got, want)
					}
				}
				for i := range l.Numel() {
					got, want := l.At(i), wantL.At(i)
					if !(got == want || math.Abs(got-want) <= 1e-5*max(1, math.Abs(want))) {
						t.Fatalf("%s, %d %s partials: lse %d is %g, want %g", name, n, part, i, got, want)
					}
				}
			}
			f := newFakePrims(nil)
			for _, o := range []ops{deviceOps{p: f, part: part}, hostOps{cpu: &tensor.CPU{}}} {
				name := fmt.Sprintf("%T", o)
				a := &arena{o: o}
				out, lse := tensor.NewHost(tensor.BF16, tk, h, d), tensor.NewHost(tensor.FP32, h, tk)
				out.Fill(math.NaN())
				lse.Fill(math.NaN())
				sm, err := newStepMerge(o, a, out, lse, n, o.partDType(tensor.BF16))
				if err != nil {
					t.Fatal(err)
				}
				for j := range n {
					po, pl := sm.next()
					// the kernel's writes: the partial in the buffers' dtypes
					if err := convert(po.(*tensor.Host), outs[j]); err != nil {
						t.Fatal(err)
					}
					if err := convert(pl.(*tensor.Host), lses[j]); err != nil {
						t.Fatal(err)
					}
					if err := sm.add(); err != nil {
						t.Fatal(err)
					}
				}
				if err := sm.done(); err != nil {
					t.Fatal(err)
				}
				if err := sm.add(); err == nil {
					t.Fatalf("%s: a merge of %d partials took one more", name, n)
				}
				a.release()
				check(name+" stepMerge", out, lse)
			}
			if f.live != 0 {
				t.Fatalf("%d emulated device bytes left allocated", f.live)
			}
			dm, err := deviceOps{p: f, part: part}.merger(tk, h, d)
			if err != nil {
				t.Fatal(err)
			}
			for j := range n {
				if err := dm.add(outs[j], lses[j]); err != nil {
					t.Fatal(err)
				}
			}
			out, lse := tensor.NewHost(tensor.BF16, tk, h, d), tensor.NewHost(tensor.FP32, h, tk)
			if err := dm.write(out, lse); err != nil {
				t.Fatal(err)
			}
			dm.close()
			check("deviceMerger", out, lse)
		}
	}
}

// TestStepSum runs stepSum on the emulated device and on the host for 2 to 5 partials
// against the float64 sum, to bf16's rounding of the result.
func TestStepSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for n := 2; n <= 5; n++ {
		for _, part := range []tensor.DType{tensor.BF16, tensor.FP32} {
			parts := make([]*tensor.Host, n)
			want := make([]float64, 60)
			for j := range parts {
				parts[j] = tensor.NewHost(part, 5, 3, 4)
				parts[j].FillNormal(rng, 1)
				for i := range want {
					want[i] += parts[j].At(i)
				}
			}
			for _, o := range []ops{deviceOps{p: newFakePrims(nil), part: part}, hostOps{cpu: &tensor.CPU{}}} {
				a := &arena{o: o}
				dst := tensor.NewHost(tensor.BF16, 5, 3, 4)
				dst.Fill(math.NaN())
				s, err := newStepSum(o, a, dst, n, o.partDType(tensor.BF16))
				if err != nil {
					t.Fatal(err)
				}
				for j := range n {
					if err := convert(s.next().(*tensor.Host), parts[j]); err != nil {
						t.Fatal(err)
					}
					if err := s.add(); err != nil {
						t.Fatal(err)
					}
				}
				if err := s.done(); err != nil {
					t.Fatal(err)
				}
				a.release()
				for i, w := range want {
					if got := dst.At(i); math.IsNaN(got) || math.Abs(got-w) > max(1, math.Abs(w))/128 {
						t.Fatalf("%T, %d %s partials: element %d is %g, want %g", o, n, part, i, got, w)
					}
				}
			}
		}
	}
}
