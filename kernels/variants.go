package kernels

import (
	"fmt"
	"slices"
	"strings"
)

// VariantSpec is Options.Variant read: a variant for every kernel (Default, the plain
// form "sm90"), and variants of named kernels (the per-kernel form
// "cuda=sm90,cudnn=composite"), which take precedence for their kernel.
type VariantSpec struct {
	Default   string
	PerKernel map[string]string
}

// ParseVariants reads a variant option: "" (every kernel's own default), a plain name
// (every kernel that has variants takes it, as before the per-kernel form), or
// comma-separated KERNEL=VARIANT items, with at most one plain item among them for the
// kernels not named. Kernel names are checked against the registry, and a variant against
// the kernel's registered variants (RegisterVariants); a kernel without variants cannot
// be given one.
func ParseVariants(s string) (VariantSpec, error) {
	var v VariantSpec
	if !strings.ContainsAny(s, ",=") {
		v.Default = strings.TrimSpace(s)
		return v, nil
	}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		name, variant, named := strings.Cut(item, "=")
		name, variant = strings.TrimSpace(name), strings.TrimSpace(variant)
		switch {
		case item == "":
			return v, fmt.Errorf("%q has an empty item: give KERNEL=VARIANT items separated by commas", s)
		case !named:
			if v.Default != "" {
				return v, fmt.Errorf("%q has two variants without a kernel (%s, %s): name the kernel of each, as cuda=%s", s, v.Default, item, item)
			}
			v.Default = item
			continue
		case name == "" || variant == "":
			return v, fmt.Errorf("%q needs a kernel and a variant, as cuda=sm90", item)
		case !Known(name):
			return v, fmt.Errorf("unknown kernel %q in %q: registered are %s", name, item, strings.Join(Names(), ", "))
		}
		if _, dup := v.PerKernel[name]; dup {
			return v, fmt.Errorf("kernel %s given twice in %q", name, s)
		}
		known := variantNames(name)
		if len(known) == 0 {
			return v, fmt.Errorf("kernel %s has no variants (%q; longca list names each kernel's)", name, item)
		}
		if !slices.Contains(known, variant) {
			return v, fmt.Errorf("kernel %s has no variant %q: use one of %s", name, variant, strings.Join(known, ", "))
		}
		if v.PerKernel == nil {
			v.PerKernel = map[string]string{}
		}
		v.PerKernel[name] = variant
	}
	return v, nil
}

// variantNames are the names of a kernel's registered variants (the part of each
// RegisterVariants line before its colon).
func variantNames(kernel string) []string {
	var out []string
	for _, line := range Variants(kernel) {
		name, _, _ := strings.Cut(line, ":")
		out = append(out, strings.TrimSpace(name))
	}
	return out
}

// For is the variant kernel takes: its own entry, else the default.
func (v VariantSpec) For(kernel string) string {
	if x, ok := v.PerKernel[kernel]; ok {
		return x
	}
	return v.Default
}

// For is o as kernel name is made with: Variant resolved to that kernel's own (a
// per-kernel Variant such as "cuda=sm90,cudnn=composite" gives cudnn "composite"). A
// Variant that does not parse is left as it is, for the kernel to refuse by name.
func (o Options) For(name string) Options {
	if v, err := ParseVariants(o.Variant); err == nil {
		o.Variant = v.For(name)
	}
	return o
}

// CheckVariant says whether a variant option can be given to the kernels named (a run's):
// every kernel with registered variants that the option's plain item reaches must have that
// variant (a plain item goes to every kernel not named); a per-kernel item needs no more
// than ParseVariants checked. Where the user listed the kernels (listed: --kernels,
// --kernel, --calibrate), a per-kernel item for a kernel not among them is refused, and so
// is a plain item that no kernel of the run has variants for (nothing would take it); where
// the machine chose them (the default kernel, a suite's peers), those are left alone and a
// plain item needs only one kernel that has it (a peer without it answers unsupported
// rows), so that one command line serves machines with and without the kernel. The error
// names the kernel, its variants and the per-kernel form.
func CheckVariant(s string, names []string, listed bool) error {
	v, err := ParseVariants(s)
	if err != nil {
		return err
	}
	for name := range v.PerKernel {
		if listed && !slices.Contains(names, name) {
			return fmt.Errorf("%q names kernel %s, which this run does not have (%s): leave its item out, or add the kernel", s, name, strings.Join(names, ", "))
		}
	}
	if v.Default == "" {
		return nil
	}
	taken := false
	var refused error
	for _, name := range names {
		if _, own := v.PerKernel[name]; own {
			continue
		}
		known := variantNames(name)
		if len(known) == 0 {
			continue
		}
		if !slices.Contains(known, v.Default) {
			if refused == nil {
				refused = fmt.Errorf("kernel %s has no variant %q: use one of %s, or name the kernel the variant is for (KERNEL=%s)", name, v.Default, strings.Join(known, ", "), v.Default)
			}
			continue
		}
		taken = true
	}
	// listed kernels must each have it; the machine's choice needs one that has it (a
	// typo is refused either way; a suite's peer without it keeps its unsupported rows)
	if refused != nil && (listed || !taken) {
		return refused
	}
	if !taken && listed {
		return fmt.Errorf("%q: no kernel of this sweep (%s) has variants; longca list names each kernel's", v.Default, strings.Join(names, ", "))
	}
	return nil
}

// VariantUnused says whether a plain variant in s applies to none of names (each has no
// variants, or a per-kernel item of its own): allowed where the machine chose the kernels (a script's --variant on a
// machine without the kernel it is for), but worth a warning, since a typo passes too.
func VariantUnused(s string, names []string) bool {
	v, err := ParseVariants(s)
	if err != nil || v.Default == "" || len(names) == 0 {
		return false
	}
	for _, name := range names {
		if _, own := v.PerKernel[name]; !own && len(variantNames(name)) > 0 {
			return false
		}
	}
	return true
}
