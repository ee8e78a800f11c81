package sim

import (
	"fmt"
	"math"
	"strings"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/results"
)

// Sample is one measured kernel time on a mask, as a fit uses it.
type Sample struct {
	Label   string // mask and length, for reports
	Pass    kernels.Pass
	Tiles   Tiles
	Heads   int
	Dim     int
	Seconds float64
}

// SamplesFromRows turns measured kernel rows (bench kernel, status ok, fwd or bwd) of
// the named kernel ("" for any) into samples, rebuilding each row's mask from its name,
// length and seed. A row whose rebuilt mask has another area (built with non-default
// mask options) or that is block-sparse is skipped, and said so.
func SamplesFromRows(rows []results.Row, kernel string, bq, bk int) (samples []Sample, skipped []string) {
	built := map[string]Tiles{}
	for _, r := range rows {
		if r.Bench != "kernel" || r.Status != results.StatusOK || r.MedianMs == nil || (kernel != "" && r.Kernel != kernel) {
			continue
		}
		pass, err := kernels.ParsePass(r.Pass)
		if err != nil || pass == kernels.FwdBwd {
			continue
		}
		key := fmt.Sprintf("%s/%d/%d", r.Mask, r.SeqLen, r.Seed)
		t, ok := built[key]
		if !ok {
			spec, err := mask.Build(r.Mask, int(r.SeqLen), mask.Options{Seed: r.Seed})
			if err != nil {
				skipped = append(skipped, fmt.Sprintf("%s: %v", key, err))
				continue
			}
			if spec.Mask.Area() != r.MaskArea {
				skipped = append(skipped, fmt.Sprintf("%s: the rebuilt mask has area %d, the row %d (non-default mask options)", key, spec.Mask.Area(), r.MaskArea))
				continue
			}
			t = TilesOf(spec.Mask, bq, bk)
			built[key] = t
		}
		samples = append(samples, Sample{Label: fmt.Sprintf("%s %d %s", r.Mask, r.SeqLen, r.Pass), Pass: pass, Tiles: t,
			Heads: int(r.HeadsQ), Dim: int(r.HeadDim), Seconds: *r.MedianMs / 1e3})
	}
	return samples, skipped
}

// FitReport says how well a fitted model reproduces its samples.
type FitReport struct {
	Samples [2]int     // fwd, bwd
	RMSRel  [2]float64 // root mean square relative error, fwd and bwd
}

func (f FitReport) String() string {
	return fmt.Sprintf("fwd %d rows (rms error %.1f%%), bwd %d rows (rms error %.1f%%)", f.Samples[0], 100*f.RMSRel[0], f.Samples[1], 100*f.RMSRel[1])
}

// fitPrior is the weight of the prior against the data: each coefficient is pulled
// toward the prior's as much as this many samples off by 100%.
const fitPrior = 0.05

// Fit calibrates a kernel model to measured samples: per pass, the launch, full-tile,
// partial-tile and row costs that minimise the squared relative error of the predicted
// times, each coefficient held near the prior's by a weak ridge (so a pass with few or
// uninformative rows stays near the prior) and kept positive. A pass with no samples
// keeps the prior's coefficients.
func Fit(prior KernelModel, samples []Sample, source string) (KernelModel, FitReport, error) {
	km := prior
	var rep FitReport
	for pi, pass := range []kernels.Pass{kernels.Fwd, kernels.Bwd} {
		var ss []Sample
		for _, s := range samples {
			if s.Pass == pass && s.Seconds > 0 && s.Tiles.Total() > 0 {
				ss = append(ss, s)
			}
		}
		rep.Samples[pi] = len(ss)
		if len(ss) == 0 {
			continue
		}
		pm := fitPass(levelled(km, pass, ss), ss)
		if pass == kernels.Fwd {
			km.Fwd = pm
		} else {
			km.Bwd = pm
		}
		var sq float64
		for _, s := range ss {
			e := km.timeOf(pass, s.Tiles, s.Heads, s.Dim)/s.Seconds - 1
			sq += e * e
		}
		rep.RMSRel[pi] = math.Sqrt(sq / float64(len(ss)))
	}
	if rep.Samples[0]+rep.Samples[1] == 0 {
		return prior, rep, fmt.Errorf("no usable kernel rows to calibrate from")
	}
	km.Name = prior.Name + "+fit"
	km.Source = fmt.Sprintf("%s; fitted to %s: %s", prior.Name, source, rep)
	return km, rep, nil
}

// levelBand is how far (as a factor) the samples' level may lie from the prior's before
// levelled moves the prior toward them.
const levelBand = 1.25

// levelled is the prior's model of one pass, scaled as a whole toward the samples' level
// where that level lies outside levelBand of the prior's: the level is the one factor f
// minimising sum (f * predicted / measured - 1)^2, and the prior is scaled to the band's
// edge nearest it (f / 1.25 or f * 1.25), so that priors within the band are kept as given
// and the scale is continuous in f. A model's times are linear in its coefficients, so
// scaling moves its level and keeps its shape. Rows 6x slower than the prior (another
// card, another kernel) had been fitted 40% fast: the ridge, relative to the prior, had
// outweighed four rows' misfit.
func levelled(km KernelModel, pass kernels.Pass, ss []Sample) PassModel {
	pm := km.pass(pass)
	var num, den float64
	for _, s := range ss {
		r := km.timeOf(pass, s.Tiles, s.Heads, s.Dim) / s.Seconds
		num, den = num+r, den+r*r
	}
	f := num / den
	if !(f > 0) || math.IsInf(f, 0) { // no samples' level (den 0), or none to trust (NaN, <= 0, Inf)
		return pm
	}
	switch {
	case f > levelBand:
		f /= levelBand
	case f < 1/levelBand:
		f *= levelBand
	default:
		return pm
	}
	return PassModel{LaunchUs: f * pm.LaunchUs, FullTileNs: f * pm.FullTileNs, PartialTileNs: f * pm.PartialTileNs, RowNs: f * pm.RowNs}
}

// fitPass solves the ridge-regularised least squares of one pass in the coefficients
// relative to the prior's (u = theta / prior), clamping any that would go below 5% of the
// prior and solving again for the rest.
func fitPass(prior PassModel, ss []Sample) PassModel {
	p := [4]float64{prior.LaunchUs * 1e-6, prior.FullTileNs * 1e-9, prior.PartialTileNs * 1e-9, prior.RowNs * 1e-9}
	for i := range p {
		if p[i] <= 0 {
			p[i] = 1e-9
		}
	}
	// Row i: features over the measured time, so the residual is relative.
	a := make([][4]float64, len(ss))
	for i, s := range ss {
		h := float64(s.Heads) * float64(s.Dim) / 128
		f := [4]float64{1, h * float64(s.Tiles.Full), h * float64(s.Tiles.Partial), h * float64(s.Tiles.Rows)}
		for j := range f {
			a[i][j] = f[j] * p[j] / s.Seconds
		}
	}
	fixed := [4]bool{}
	var u [4]float64
	for range 4 {
		var m [4][5]float64
		for j := range 4 {
			for k := range 4 {
				for i := range a {
					m[j][k] += a[i][j] * a[i][k]
				}
			}
			for i := range a {
				m[j][4] += a[i][j]
			}
			m[j][j] += fitPrior
			m[j][4] += fitPrior
		}
		for j := range 4 { // a clamped coefficient: u_j = 0.05
			if fixed[j] {
				for k := range 5 {
					m[j][k] = 0
				}
				m[j][j], m[j][4] = 1, 0.05
			}
		}
		u = solve4(m)
		again := false
		for j := range 4 {
			if !fixed[j] && u[j] < 0.05 {
				fixed[j], again = true, true
			}
		}
		if !again {
			break
		}
	}
	return PassModel{LaunchUs: u[0] * p[0] * 1e6, FullTileNs: u[1] * p[1] * 1e9, PartialTileNs: u[2] * p[2] * 1e9, RowNs: u[3] * p[3] * 1e9}
}

// solve4 solves a 4x4 system given as an augmented matrix (Gaussian elimination with
// partial pivoting; the ridge keeps it regular).
func solve4(m [4][5]float64) [4]float64 {
	for c := range 4 {
		piv := c
		for r := c + 1; r < 4; r++ {
			if math.Abs(m[r][c]) > math.Abs(m[piv][c]) {
				piv = r
			}
		}
		m[c], m[piv] = m[piv], m[c]
		for r := range 4 {
			if r == c || m[c][c] == 0 {
				continue
			}
			f := m[r][c] / m[c][c]
			for k := c; k < 5; k++ {
				m[r][k] -= f * m[c][k]
			}
		}
	}
	var x [4]float64
	for i := range 4 {
		if m[i][i] != 0 {
			x[i] = m[i][4] / m[i][i]
		}
	}
	return x
}

// ModelParams is what a predicted row records of its model (JSON): the machine, the
// kernel model and the approximations made.
func ModelParams(m Machine, km KernelModel, sampled bool, traced int) string {
	approx := "every rank traced and simulated"
	if sampled {
		approx = fmt.Sprintf("%d ranks traced (ring positions incl. node boundaries), each simulated with mirrored peers; slowest taken", traced)
	}
	return fmt.Sprintf(`{"machine":%s,"kernel_model":%s,"ranks":%q}`, m.JSON(), km.JSON(), strings.ReplaceAll(approx, `"`, `'`))
}
