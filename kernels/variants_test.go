package kernels

import (
	"context"
	"strings"
	"testing"

	"github.com/longca/longca/tensor"
)

// variantKernel is a test kernel that keeps the variant it was made with.
type variantKernel struct{ name, variant string }

func (k variantKernel) Name() string           { return k.name }
func (variantKernel) Device() tensor.Device    { return &tensor.CPU{} }
func (variantKernel) Supports(p Problem) error { return nil }
func (variantKernel) Forward(_ context.Context, _ Problem, _, _, _, _, _ tensor.Tensor) error {
	return nil
}
func (variantKernel) Backward(_ context.Context, _ Problem, _, _, _, _, _, _, _, _, _ tensor.Tensor) error {
	return nil
}

func init() {
	for _, name := range []string{"vt-gpu", "vt-dnn"} {
		RegisterVariants(name, []string{"fast: the fast path", "slow: the slow path", "auto: the default"})
		Register(name, "test only: keeps its variant", func(o Options) (Kernel, error) { return variantKernel{name, o.Variant}, nil })
	}
	Register("vt-plain", "test only: no variants", func(o Options) (Kernel, error) { return variantKernel{"vt-plain", o.Variant}, nil })
}

// --variant's per-kernel form gives each named kernel its own variant, and the plain
// form (alone, or as one item among named ones) every other kernel's, as before.
func TestVariantPerKernel(t *testing.T) {
	for _, c := range []struct {
		spec                string
		gpu, dnn, plainWant string
	}{
		{"", "", "", ""},
		{"fast", "fast", "fast", "fast"}, // the plain form: every kernel, as before
		{"vt-gpu=fast,vt-dnn=slow", "fast", "slow", ""},
		{"vt-gpu=fast", "fast", "", ""},
		{" vt-dnn = auto , slow", "slow", "auto", "slow"},
	} {
		got := map[string]string{}
		for _, name := range []string{"vt-gpu", "vt-dnn", "vt-plain"} {
			k, err := New(name, Options{Variant: c.spec})
			if err != nil {
				t.Fatalf("%q: New(%s): %v", c.spec, name, err)
			}
			got[name] = k.(variantKernel).variant
		}
		want := map[string]string{"vt-gpu": c.gpu, "vt-dnn": c.dnn, "vt-plain": c.plainWant}
		for name := range want {
			if got[name] != want[name] {
				t.Errorf("--variant %q: %s made with variant %q, want %q", c.spec, name, got[name], want[name])
			}
		}
	}
}

// A bad per-kernel form is refused with a reason that names what is wrong.
func TestVariantPerKernelErrors(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{"vt-gpuu=fast", `unknown kernel "vt-gpuu"`},
		{"vt-plain=fast", "kernel vt-plain has no variants"},
		{"vt-gpu=fastest", `kernel vt-gpu has no variant "fastest": use one of fast, slow, auto`},
		{"vt-gpu=fast,vt-gpu=slow", "kernel vt-gpu given twice"},
		{"fast,slow", "two variants without a kernel"},
		{"vt-gpu=fast,,vt-dnn=slow", "empty item"},
		{"vt-gpu=", "needs a kernel and a variant"},
		{"=fast", "needs a kernel and a variant"},
	} {
		_, err := ParseVariants(c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseVariants(%q): %v, want an error containing %q", c.spec, err, c.want)
		}
	}
}

// A plain variant that a kernel of the sweep does not have is refused before the sweep
// (it used to reach the kernel's constructor and turn every row unsupported), naming the
// kernel, its variants and the per-kernel form; kernels without variants ignore it.
func TestCheckVariant(t *testing.T) {
	RegisterVariants("vt-odd", []string{"odd: another kernel's own"})
	// kernels the machine chose (a default, a suite's peers): a per-kernel item for a
	// kernel not there and a plain item no kernel has variants for are left alone, a plain
	// item one kernel has is enough, and a typo (no kernel has it) is still refused
	for _, c := range []struct {
		spec  string
		names []string
		ok    bool
	}{
		{"vt-gpu=fast", []string{"vt-plain"}, true},
		{"fast", []string{"vt-plain"}, true},
		{"fast", []string{"vt-gpu", "vt-odd"}, true},
		{"fsat", []string{"vt-gpu", "vt-odd"}, false},
	} {
		if err := CheckVariant(c.spec, c.names, false); (err == nil) != c.ok {
			t.Errorf("CheckVariant(%q, %v, not listed) = %v, want ok %v", c.spec, c.names, err, c.ok)
		}
	}
	Register("vt-odd", "test only: other variants", func(o Options) (Kernel, error) { return variantKernel{"vt-odd", o.Variant}, nil })
	for _, c := range []struct {
		spec  string
		names []string
		bad   string // a part of the error, "" for none
	}{
		{"", []string{"vt-gpu", "vt-odd"}, ""},
		{"fast", []string{"vt-gpu", "vt-dnn", "vt-plain"}, ""},
		{"fast", []string{"vt-gpu", "vt-odd"}, `kernel vt-odd has no variant "fast": use one of odd, or name the kernel`},
		{"fsat", []string{"vt-gpu"}, `kernel vt-gpu has no variant "fsat": use one of fast, slow, auto`},
		{"fast", []string{"vt-plain"}, "no kernel of this sweep (vt-plain) has variants"},
		{"vt-odd=odd,fast", []string{"vt-gpu", "vt-odd"}, ""},
		{"vt-gpu=fast,slow", []string{"vt-gpu", "vt-odd"}, `kernel vt-odd has no variant "slow"`},
		{"vt-gpu=fsat", []string{"vt-gpu"}, `no variant "fsat"`},
		{"vt-gpu=fast", []string{"vt-plain"}, "names kernel vt-gpu, which this run does not have (vt-plain)"},
	} {
		err := CheckVariant(c.spec, c.names, true)
		switch {
		case c.bad == "" && err != nil:
			t.Errorf("CheckVariant(%q, %v): %v", c.spec, c.names, err)
		case c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad)):
			t.Errorf("CheckVariant(%q, %v) = %v, want an error with %q", c.spec, c.names, err, c.bad)
		}
	}
}

// A plain variant that no kernel of the run has is let through where the machine chose the
// kernels (CheckVariant), and VariantUnused says so for the warning the command prints.
func TestVariantUnused(t *testing.T) {
	for _, c := range []struct {
		spec  string
		names []string
		want  bool
	}{
		{"fast", []string{"vt-plain"}, true},
		{"fast", []string{"vt-plain", "vt-gpu"}, false},
		{"vt-gpu=fast", []string{"vt-plain"}, false},
		{"", []string{"vt-plain"}, false},
		{"vt-gpu=fast,fast", []string{"vt-gpu"}, true}, // the plain item overridden
		{"fast", nil, false},
	} {
		if got := VariantUnused(c.spec, c.names); got != c.want {
			t.Errorf("VariantUnused(%q, %v) = %v, want %v", c.spec, c.names, got, c.want)
		}
	}
}
