package check

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// fault is a deliberate bug a wrapped reference kernel makes.
type fault int

const (
	none          fault = iota
	perturbOut          // one element of out off by 0.1
	perturbLSE          // one finite lse off by 0.01
	maskedLSEZero       // a fully masked row's lse written as 0, not -inf
	dropSliceFwd        // the forward ignores the mask's last slice
	unwrittenOut        // one element of out left as it was (NaN poison)
	unwrittenLSE        // one lse left unwritten
	perturbDK           // one element of dk off by 0.1
	dropSliceBwd        // the backward ignores the mask's last slice
	unwrittenDV         // one element of dv left unwritten
	unwrittenDQ         // one element of dq left unwritten
	nanDQ               // one element of dq written as NaN
	transposedGQA       // the backward maps query head h to KV head h % HeadsKV
)

// faulty is the reference kernel with one bug.
type faulty struct {
	*ref.Kernel
	f fault
}

func dropLast(p kernels.Problem) kernels.Problem {
	p.Mask.Slices = p.Mask.Slices[:len(p.Mask.Slices)-1]
	return p
}

func (k faulty) Forward(ctx context.Context, p kernels.Problem, q, kk, v, out, lse tensor.Tensor) error {
	o, l := out.(*tensor.Host), lse.(*tensor.Host)
	if k.f == dropSliceFwd {
		p = dropLast(p)
	}
	savedOut, savedLSE := o.At(17), l.At(5)
	if err := k.Kernel.Forward(ctx, p, q, kk, v, out, lse); err != nil {
		return err
	}
	switch k.f {
	case perturbOut:
		o.Set(17, o.At(17)+0.1)
	case perturbLSE:
		l.Set(5, l.At(5)+0.01)
	case maskedLSEZero:
		for i := 0; i < l.Numel(); i++ {
			if math.IsInf(l.At(i), -1) {
				l.Set(i, 0)
				break
			}
		}
	case unwrittenOut:
		o.Set(17, savedOut)
	case unwrittenLSE:
		l.Set(5, savedLSE)
	}
	return nil
}

func (k faulty) Backward(ctx context.Context, p kernels.Problem, q, kk, v, out, lse, dout, dq, dk, dv tensor.Tensor) error {
	dqh, dkh, dvh := dq.(*tensor.Host), dk.(*tensor.Host), dv.(*tensor.Host)
	if k.f == dropSliceBwd {
		p = dropLast(p)
	}
	if k.f == transposedGQA {
		return k.swappedHeads(ctx, p, q, kk, v, out, lse, dout, dq, dk, dv)
	}
	savedDV, savedDQ := dvh.At(3), dqh.At(40)
	if err := k.Kernel.Backward(ctx, p, q, kk, v, out, lse, dout, dq, dk, dv); err != nil {
		return err
	}
	switch k.f {
	case perturbDK:
		dkh.Set(9, dkh.At(9)+0.1)
	case unwrittenDV:
		dvh.Set(3, savedDV)
	case unwrittenDQ:
		dqh.Set(40, savedDQ)
	case nanDQ:
		dqh.Set(40, math.NaN())
	}
	return nil
}

// swappedHeads runs the backward with the KV heads permuted (a GQA indexing bug):
// query head h reads KV head (h/group + 1) % HeadsKV, then the gradients are permuted
// back to where a correct kernel would write them, so only the pairing is wrong.
func (k faulty) swappedHeads(ctx context.Context, p kernels.Problem, q, kk, v, out, lse, dout, dq, dk, dv tensor.Tensor) error {
	roll := func(t *tensor.Host, by int) *tensor.Host {
		s := t.Shape()
		r := t.Clone()
		row := s[2]
		for i := 0; i < s[0]; i++ {
			for h := 0; h < s[1]; h++ {
				dst := (i*s[1] + (h+by+s[1])%s[1]) * row
				for x := 0; x < row; x++ {
					r.Set(dst+x, t.At((i*s[1]+h)*row+x))
				}
			}
		}
		return r
	}
	kh, vh := roll(kk.(*tensor.Host), -1), roll(v.(*tensor.Host), -1)
	dk2, dv2 := tensor.NewHost(p.DType, dk.Shape()...), tensor.NewHost(p.DType, dv.Shape()...)
	if err := k.Kernel.Backward(ctx, p, q, kh, vh, out, lse, dout, dq, dk2, dv2); err != nil {
		return err
	}
	copy(dk.(*tensor.Host).Data, roll(dk2, 1).Data)
	copy(dv.(*tensor.Host).Data, roll(dv2, 1).Data)
	return nil
}

// testProblem has several slices of every kind and fully masked query rows (0-4).
func testProblem(dt tensor.DType) kernels.Problem {
	r := func(a, b int) mask.Range { return mask.Range{Start: a, End: b} }
	m := mask.Mask{SeqQ: 96, SeqK: 96, Slices: []mask.Slice{
		{Q: r(5, 40), K: r(0, 40), Kind: mask.Causal},
		{Q: r(40, 96), K: r(0, 20), Kind: mask.Full},
		{Q: r(40, 70), K: r(20, 70), Kind: mask.BiCausal},
		{Q: r(70, 96), K: r(40, 96), Kind: mask.InvCausal},
	}}
	return kernels.Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: 16, DType: dt, Mask: m}
}

func TestCheck(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name     string
		k        kernels.Kernel
		dt       tensor.DType
		backward bool
		pass     bool
		worst    string // the figure that must fail
	}{
		{"exact/fwd/bf16", ref.New(ref.Options{}), tensor.BF16, false, true, ""},
		{"exact/bwd/bf16", ref.New(ref.Options{}), tensor.BF16, true, true, ""},
		{"exact/fwd/fp16", ref.New(ref.Options{}), tensor.FP16, false, true, ""},
		{"exact/bwd/fp32", ref.New(ref.Options{}), tensor.FP32, true, true, ""},
		{"exact/fwd/fp64", ref.New(ref.Options{}), tensor.FP64, false, true, ""},
		{"naive-bf16/fwd", ref.New(ref.Options{Emulate: tensor.BF16}), tensor.BF16, false, true, ""},
		{"naive-bf16/bwd", ref.New(ref.Options{Emulate: tensor.BF16}), tensor.BF16, true, true, ""},
		{"naive-fp32/bwd", ref.New(ref.Options{Emulate: tensor.FP32}), tensor.FP32, true, true, ""},
		// a bf16 kernel judged as fp32 is too coarse
		{"naive-bf16-as-fp32/fwd", ref.New(ref.Options{Emulate: tensor.BF16}), tensor.FP32, false, false, "out"},
		{"perturbed-out", faulty{ref.New(ref.Options{}), perturbOut}, tensor.BF16, false, false, "out"},
		{"perturbed-lse", faulty{ref.New(ref.Options{}), perturbLSE}, tensor.BF16, false, false, "lse"},
		{"masked-lse-zero", faulty{ref.New(ref.Options{}), maskedLSEZero}, tensor.BF16, false, false, "lse"},
		{"dropped-slice/fwd", faulty{ref.New(ref.Options{}), dropSliceFwd}, tensor.BF16, false, false, ""},
		{"unwritten-out", faulty{ref.New(ref.Options{}), unwrittenOut}, tensor.BF16, false, false, "out"},
		{"unwritten-lse", faulty{ref.New(ref.Options{}), unwrittenLSE}, tensor.BF16, false, false, "lse"},
		{"perturbed-dk", faulty{ref.New(ref.Options{}), perturbDK}, tensor.BF16, true, false, "dk"},
		{"dropped-slice/bwd", faulty{ref.New(ref.Options{}), dropSliceBwd}, tensor.BF16, true, false, ""},
		{"unwritten-dv", faulty{ref.New(ref.Options{}), unwrittenDV}, tensor.BF16, true, false, "dv"},
		{"unwritten-dq", faulty{ref.New(ref.Options{}), unwrittenDQ}, tensor.BF16, true, false, "dq"},
		{"nan-dq", faulty{ref.New(ref.Options{}), nanDQ}, tensor.BF16, true, false, "dq"},
		{"gqa-heads-swapped/bwd", faulty{ref.New(ref.Options{}), transposedGQA}, tensor.BF16, true, false, ""},
		{"perturbed-dk/fp64", faulty{ref.New(ref.Options{}), perturbDK}, tensor.FP64, true, false, "dk"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			check := Forward
			if c.backward {
				check = Backward
			}
			r, err := check(ctx, c.k, testProblem(c.dt), uint64(i+1))
			if err != nil {
				t.Fatal(err)
			}
			if r.Pass != c.pass {
				t.Fatalf("pass = %v, want %v: %s", r.Pass, c.pass, r)
			}
			// Both sees every fault that Forward or Backward sees
			both, err := Both(ctx, c.k, testProblem(c.dt), uint64(i+1))
			if err != nil {
				t.Fatal(err)
			}
			if both.Pass != c.pass || len(both.Figures) != 5 {
				t.Fatalf("Both: pass = %v with %d figures, want %v: %s", both.Pass, len(both.Figures), c.pass, both)
			}
			if c.worst != "" && r.Worst.Name != c.worst {
				t.Errorf("worst figure %s, want %s: %s", r.Worst.Name, c.worst, r)
			}
			if len(r.Figures) != map[bool]int{false: 2, true: 3}[c.backward] {
				t.Errorf("%d figures", len(r.Figures))
			}
			line := r.String()
			if strings.Contains(line, "\n") || !strings.HasPrefix(line, map[bool]string{true: "PASS", false: "FAIL"}[c.pass]) {
				t.Errorf("report line %q", line)
			}
			t.Log(line)
		})
	}
}

func TestCompare(t *testing.T) {
	inf := math.Inf(-1)
	nan := math.NaN()
	cases := []struct {
		name             string
		cand, ref, naive []float64
		pass             bool
		nans             int
	}{
		{"exact", []float64{1, 2}, []float64{1, 2}, []float64{1, 2}, true, 0},
		{"within 3x naive", []float64{1.29, 2}, []float64{1, 2}, []float64{1.1, 2}, true, 0},
		{"beyond 3x naive", []float64{1.31, 2}, []float64{1, 2}, []float64{1.1, 2}, false, 0},
		{"tiny floor", []float64{1 + 1e-5, 2}, []float64{1, 2}, []float64{1, 2}, true, 0},
		{"above tiny floor", []float64{1 + 1e-4, 2}, []float64{1, 2}, []float64{1, 2}, false, 0},
		{"nan never passes", []float64{nan, 2}, []float64{1, 2}, []float64{5, 2}, false, 1},
		{"-inf matches -inf", []float64{inf, 3}, []float64{inf, 3}, []float64{inf, 3}, true, 0},
		{"finite for -inf", []float64{0, 3}, []float64{inf, 3}, []float64{inf, 3}, false, 0},
		{"-inf for finite", []float64{inf, 3}, []float64{1, 3}, []float64{1, 3}, false, 0},
		{"naive inf does not loosen", []float64{1.5, 3}, []float64{1, 3}, []float64{math.Inf(1), 3}, false, 0},
		{"length mismatch", []float64{1}, []float64{1, 2}, []float64{1, 2}, false, 0},
	}
	for _, c := range cases {
		f := Compare("x", c.cand, c.ref, c.naive)
		if f.Pass != c.pass || f.NaNs != c.nans {
			t.Errorf("%s: %+v, want pass %v with %d NaN", c.name, f, c.pass, c.nans)
		}
	}
}

func TestInputsSeeded(t *testing.T) {
	p := testProblem(tensor.BF16)
	a, _, _, _ := Inputs(p, 3)
	b, _, _, _ := Inputs(p, 3)
	c, _, _, _ := Inputs(p, 4)
	if string(a.Data) != string(b.Data) || string(a.Data) == string(c.Data) || a.DType() != tensor.BF16 {
		t.Fatal("Inputs is not a pure function of the seed in p.DType")
	}
	var sum, sq float64
	for _, x := range a.Float64s() {
		sum += x
		sq += x * x
	}
	n := float64(a.Numel())
	if m, v := sum/n, sq/n-(sum/n)*(sum/n); math.Abs(m) > 0.1 || math.Abs(v-1) > 0.1 {
		t.Fatalf("inputs mean %.3f variance %.3f, want standard normal", m, v)
	}
}

func TestNewReport(t *testing.T) {
	ok := Figure{Name: "a", Err: 1, Tol: 4, Pass: true}
	far := Figure{Name: "b", Err: 9, Tol: 3}
	near := Figure{Name: "c", Err: 4, Tol: 3}
	nan := Figure{Name: "d", Err: 0, Tol: 3, NaNs: 2}
	for _, c := range []struct {
		figs  []Figure
		pass  bool
		worst string
	}{
		{[]Figure{ok}, true, "a"},
		{[]Figure{ok, near, far}, false, "b"},
		{[]Figure{far, nan, near}, false, "d"},
		{nil, true, ""},
	} {
		r := NewReport(c.figs...)
		if r.Pass != c.pass || r.Worst.Name != c.worst || len(r.Figures) != len(c.figs) {
			t.Errorf("NewReport(%v) = %+v, want pass %v worst %q", c.figs, r, c.pass, c.worst)
		}
	}
}

// TestFigureWhyNamesNaNs (issue 23, item 19): a figure that fails by its NaNs says so,
// whatever its other elements' error.
func TestFigureWhyNamesNaNs(t *testing.T) {
	f := Compare("out", []float64{1, math.NaN(), 3}, []float64{1, 2, 3}, []float64{1.1, 2, 3})
	if f.Pass || f.NaNs != 1 || !strings.Contains(f.Why(), "out has 1 NaN element") || strings.Contains(f.Why(), "> tolerance") {
		t.Errorf("%+v: %q", f, f.Why())
	}
	f = Compare("dq", []float64{1, 5}, []float64{1, 2}, []float64{1, 2.1})
	if f.Pass || !strings.Contains(f.Why(), "dq error 3 > tolerance") {
		t.Errorf("%+v: %q", f, f.Why())
	}
}

// A pass's failure is labelled with the kernel and the pass once: an exec: worker's error
// already says "exec:...:k forward: ..." and used to read "k forward: k forward: ..." (the
// tenth hardening pass).
func TestPassErrorLabelsOnce(t *testing.T) {
	k := ref.New(ref.Options{})
	plain := passError(k, "forward", errors.New("out of memory"))
	if want := k.Name() + " forward: out of memory"; plain.Error() != want {
		t.Errorf("%q, want %q", plain, want)
	}
	labelled := errors.New(k.Name() + " forward: the worker's lse: a FIFO")
	if got := passError(k, "forward", labelled); got.Error() != labelled.Error() {
		t.Errorf("%q, want it as the kernel labelled it: %q", got, labelled)
	}
}
