// Package check is the correctness rule of MASKS.md: a kernel's outputs on random inputs
// are compared with the exact float64 reference (kernels/ref), and the error allowed is
// three times the error of a naive kernel in the same low precision (ref in emulation
// mode, FlashAttention's attention_ref(upcast=False)) plus a tiny floor. NaN never
// passes, and every output element must be written: the candidate's outputs are
// poisoned with NaN before it runs.
package check

import (
	"fmt"
	"math"
	"strings"
)

// TinyRel and TinyAbs make the floor added to the tolerance:
// tiny = TinyRel*max|ref| + TinyAbs.
//
// The floor only matters where the naive kernel is (nearly) exact: an fp64 or fp32
// problem, or an lse, which even a naive bf16 kernel computes in fp32. It is relative to
// the tensor's largest reference value because gradients grow with the number of
// queries a key sees, and at 1e-5 it is ~400x below one bf16 rounding (2^-8) and ~80x
// above one fp32 rounding (2^-24) of that value, so it forgives the summation order of
// an fp32 kernel but not a wrong element. TinyAbs keeps all-zero tensors (a fully
// masked problem) from requiring bit-exact zeros.
const (
	TinyRel = 1e-5
	TinyAbs = 1e-6
)

// Factor is how many times the naive kernel's error a candidate may make.
const Factor = 3

// Figure is the check of one output tensor.
type Figure struct {
	// Name is the tensor: out, lse, dq, dk or dv.
	Name string
	// Err is the candidate's largest absolute error against the reference (+Inf where an
	// infinity is not matched); NaiveErr the naive kernel's.
	Err, NaiveErr float64
	// Tol is Factor*NaiveErr + tiny.
	Tol float64
	// NaNs counts the candidate's NaN elements (unwritten or invalid).
	NaNs int
	// Pass says Err <= Tol and NaNs == 0.
	Pass bool
}

func (f Figure) String() string {
	rel := "<="
	if f.Err > f.Tol || math.IsNaN(f.Err) {
		rel = ">"
	}
	s := fmt.Sprintf("%s err %.2e %s tol %.2e (naive %.2e)", f.Name, f.Err, rel, f.Tol, f.NaiveErr)
	if f.NaNs > 0 {
		s += fmt.Sprintf(", %d NaN", f.NaNs)
	}
	return s
}

// Why says why a failing figure failed, in one phrase for a row's reason: its NaNs
// first (a NaN fails whatever the error of the other elements), else its error over the
// tolerance.
func (f Figure) Why() string {
	if f.NaNs > 0 {
		s := "s"
		if f.NaNs == 1 {
			s = ""
		}
		return fmt.Sprintf("%s has %d NaN element%s (unwritten or invalid; NaN never passes); the other elements' error %.3g, tolerance %.3g", f.Name, f.NaNs, s, f.Err, f.Tol)
	}
	return fmt.Sprintf("%s error %.3g > tolerance %.3g (naive %.3g)", f.Name, f.Err, f.Tol, f.NaiveErr)
}

// Compare checks one tensor: cand, ref and naive are its elements as float64.
// Elements where ref is infinite (the lse of a fully masked row, -inf) must be the same
// infinity in cand; elsewhere the error is max |cand - ref|. The naive kernel's
// non-finite elements are left out of NaiveErr, so they can never loosen the tolerance.
func Compare(name string, cand, ref, naive []float64) Figure {
	f := Figure{Name: name}
	if len(cand) != len(ref) || len(naive) != len(ref) {
		f.Err, f.Tol = math.Inf(1), 0
		return f
	}
	var scale float64
	for i, r := range ref {
		c := cand[i]
		switch {
		case math.IsNaN(c):
			f.NaNs++
		case math.IsInf(r, 0) || math.IsInf(c, 0) || math.IsNaN(r):
			if c != r {
				f.Err = math.Inf(1)
			}
		default:
			f.Err = math.Max(f.Err, math.Abs(c-r))
		}
		if !math.IsInf(r, 0) && !math.IsNaN(r) {
			scale = math.Max(scale, math.Abs(r))
			if n := naive[i]; !math.IsInf(n, 0) && !math.IsNaN(n) {
				f.NaiveErr = math.Max(f.NaiveErr, math.Abs(n-r))
			}
		}
	}
	f.Tol = Factor*f.NaiveErr + TinyRel*scale + TinyAbs
	f.Pass = f.NaNs == 0 && f.Err <= f.Tol
	return f
}

// Report is the check of one kernel on one problem and pass.
type Report struct {
	// Pass says every figure passed.
	Pass bool
	// Figures are the tensors checked, in order.
	Figures []Figure
	// Worst is the failing figure with the most NaNs, or else the figure with the
	// largest Err/Tol.
	Worst Figure
}

// NewReport summarises figures (for callers that compare outputs they gathered
// themselves, such as the context-parallel check): Pass when all pass, Worst the figure
// furthest from its tolerance.
func NewReport(figs ...Figure) Report {
	r := Report{Pass: true, Figures: figs}
	best := 0.0
	for i, f := range figs {
		r.Pass = r.Pass && f.Pass
		s := score(f)
		if i == 0 || s > best || (s == best && f.NaNs > r.Worst.NaNs) {
			best, r.Worst = s, f
		}
	}
	return r
}

// score is how far a figure is from passing: Err/Tol, +Inf with NaNs.
func score(f Figure) float64 {
	switch {
	case f.NaNs > 0 || math.IsNaN(f.Err):
		return math.Inf(1)
	case f.Tol == 0 && f.Err == 0:
		return 0
	}
	return f.Err / f.Tol
}

// String is one line: PASS or FAIL, the worst figure, then the others' err/tol.
func (r Report) String() string {
	var b strings.Builder
	if r.Pass {
		b.WriteString("PASS ")
	} else {
		b.WriteString("FAIL ")
	}
	b.WriteString(r.Worst.String())
	for _, f := range r.Figures {
		if f.Name != r.Worst.Name {
			fmt.Fprintf(&b, "; %s %.1e/%.1e", f.Name, f.Err, f.Tol)
			if f.NaNs > 0 {
				fmt.Fprintf(&b, " %d NaN", f.NaNs)
			}
		}
	}
	return b.String()
}
