package kernels

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

func TestFLOPsFollowTheAreaRule(t *testing.T) {
	m := mask.Mask{SeqQ: 100, SeqK: 100, Slices: []mask.Slice{{Q: mask.Range{Start: 0, End: 100}, K: mask.Range{Start: 0, End: 100}, Kind: mask.Causal}}}
	p := Problem{HeadsQ: 8, HeadsKV: 2, HeadDim: 64, Mask: m}
	fwd := 4.0 * 5050 * 8 * 64
	for pass, f := range map[Pass]float64{Fwd: 1, Bwd: 2.5, FwdBwd: 3.5} {
		if got := p.FLOPs(pass); got != fwd*f {
			t.Fatalf("%s FLOPs %g, want %g", pass, got, fwd*f)
		}
	}
	// Per-KV-head masks: FLOPs average the heads' areas.
	full := mask.Mask{SeqQ: 100, SeqK: 100, Slices: []mask.Slice{{Q: mask.Range{Start: 0, End: 100}, K: mask.Range{Start: 0, End: 100}}}}
	p.HeadMasks = []mask.Mask{m, full}
	if got, want := p.FLOPs(Fwd), 4.0*(5050+10000)/2*8*64; got != want {
		t.Fatalf("head-mask FLOPs %g, want %g", got, want)
	}
	if p.MaskFor(3).Area() != 5050 || p.MaskFor(4).Area() != 10000 {
		t.Fatal("query heads 0-3 use KV head 0's mask, 4-7 KV head 1's")
	}
	if math.Abs(p.SoftmaxScale()-0.125) > 1e-15 {
		t.Fatalf("default scale %g", p.SoftmaxScale())
	}
}

func TestValidateNamesTheFlag(t *testing.T) {
	m := mask.Mask{SeqQ: 4, SeqK: 4}
	for _, c := range []struct {
		p    Problem
		want string
	}{
		{Problem{HeadsQ: 6, HeadsKV: 4, HeadDim: 8, Mask: m}, "--heads"},
		{Problem{HeadsQ: 0, HeadsKV: 1, HeadDim: 8, Mask: m}, "--heads"},
		{Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: 0, Mask: m}, "--head-dim"},
		{Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: 8, Mask: m, HeadMasks: []mask.Mask{m}}, "head masks"},
	} {
		err := c.p.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%+v: error %v, want one naming %s", c.p, err, c.want)
		}
	}
	if _, err := ParsePass("sideways"); err == nil {
		t.Fatal("bad pass parsed")
	}
}

func TestRegistryPrefixesOptionsAndMarks(t *testing.T) {
	var got Options
	RegisterPrefix("test-exec:", "test family", func(rest string, o Options) (Kernel, error) {
		got = o
		return nil, Unsupported(errors.New("no worker " + rest))
	})
	if !Known("test-exec:/bin/x:name") || Known("test-exec:") || Known("nope") {
		t.Fatal("Known: a family member is known, a bare prefix and an unknown name are not")
	}
	if !slices.Contains(Names(), "test-exec:PATH") || Doc("test-exec:PATH") != "test family" {
		t.Fatalf("family not listed: %v", Names())
	}
	_, err := New("test-exec:/bin/x", Options{Device: 2, Variant: "v", Python: "py"})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "no worker /bin/x") {
		t.Fatalf("prefix factory error: %v", err)
	}
	if got.Device != 2 || got.Variant != "v" || got.Python != "py" {
		t.Fatalf("options not passed: %+v", got)
	}
	if _, err := New("nope", Options{}); err == nil || !strings.Contains(err.Error(), "--kernels") {
		t.Fatalf("unknown kernel: %v", err)
	}
	if e := OOM(errors.New("x")); !errors.Is(e, ErrOOM) || errors.Is(e, ErrUnsupported) || e.Error() != "x" {
		t.Fatalf("OOM mark: %v", e)
	}
}

func TestDeviceArgsCheckDTypeAndShape(t *testing.T) {
	h := tensor.NewHost(tensor.BF16, 4, 2, 8)
	if bs, err := DeviceArgs[*tensor.Host]("k", Want("q", h, tensor.BF16, []int{4, 2, 8})); err != nil || bs[0] != h {
		t.Fatalf("a matching argument: %v", err)
	}
	for _, w := range []Arg{Want("q", h, tensor.FP16, []int{4, 2, 8}), Want("q", h, tensor.BF16, []int{4, 2, 9})} {
		if _, err := DeviceArgs[*tensor.Host]("k", w); err == nil || !strings.Contains(err.Error(), "k: q is bf16[4 2 8], want") {
			t.Errorf("a mismatched argument: %v", err)
		}
	}
}
