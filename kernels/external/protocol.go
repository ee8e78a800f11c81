package external

import (
	"bufio"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/longca/longca/internal/textcut"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// ProtocolVersion is the version of the worker protocol longca speaks
// (docs/external-kernels.md). A worker that answers hello with another version is not
// used.
const ProtocolVersion = 1

// The statuses of a reply.
const (
	statusOK          = "ok"
	statusUnsupported = "unsupported"
	statusOOM         = "oom"
	statusError       = "error"
)

// envelope starts every request.
type envelope struct {
	Op string `json:"op"`
	ID int64  `json:"id"`
}

// helloRequest opens a session.
type helloRequest struct {
	envelope
	Protocol int    `json:"protocol"`
	Device   int    `json:"device"`
	Longca   string `json:"longca"`
}

// problemRequest is supports, forward, backward and time: a kernel on a problem.
type problemRequest struct {
	envelope
	Kernel  string       `json:"kernel"`
	Problem *ProblemJSON `json:"problem"`
	// forward, backward: files in Dir.
	Dir     string            `json:"dir,omitempty"`
	Inputs  map[string]string `json:"inputs,omitempty"`
	Outputs map[string]string `json:"outputs,omitempty"`
	// time
	Pass       string  `json:"pass,omitempty"`
	Seed       *uint64 `json:"seed,omitempty"`
	Warmup     *int    `json:"warmup,omitempty"`
	Iters      int     `json:"iters,omitempty"`
	FlushBytes int64   `json:"flush_bytes,omitempty"`
}

// ProblemJSON is a kernels.Problem as a worker reads it. Exactly one of Mask (every
// head attends with it) and Grid (one mask per KV head, block-sparse) is set.
type ProblemJSON struct {
	SeqQ    int     `json:"seqlen_q"`
	SeqK    int     `json:"seqlen_k"`
	HeadsQ  int     `json:"heads_q"`
	HeadsKV int     `json:"heads_kv"`
	HeadDim int     `json:"head_dim"`
	DType   string  `json:"dtype"`
	Scale   float64 `json:"scale"`
	// Area is the allowed (q, k) pairs per query head (the mean over heads for a grid).
	Area float64    `json:"area"`
	Mask *mask.Spec `json:"mask,omitempty"`
	Grid *GridJSON  `json:"grid,omitempty"`
}

// GridJSON is a per-KV-head mask made of whole cells: the query positions cut at
// QEdges, the keys at KEdges, and Kept, a .npy file of uint8 [heads_kv, len(QEdges)-1,
// len(KEdges)-1], says which cells KV head h allows in full (1) or not at all (0).
type GridJSON struct {
	QEdges []int  `json:"q_edges"`
	KEdges []int  `json:"k_edges"`
	Kept   string `json:"kept"`
}

// reply is every answer; which fields are set depends on the request.
type reply struct {
	ID     *int64 `json:"id"`
	Status string `json:"status"`
	Reason string `json:"reason"`
	// hello
	Protocol int          `json:"protocol"`
	Worker   string       `json:"worker"`
	Device   string       `json:"device"`
	Versions Versions     `json:"versions"`
	Kernels  []kernelInfo `json:"kernels"`
	// supports; time (optional: the path that ran the timed pass)
	Variant string `json:"variant"`
	// time
	MedianMs     *float64  `json:"median_ms"`
	MinMs        *float64  `json:"min_ms"`
	MaxMs        *float64  `json:"max_ms"`
	MeanMs       *float64  `json:"mean_ms"`
	SamplesMs    []float64 `json:"samples_ms"`
	PeakMemBytes *int64    `json:"peak_mem_bytes"`
}

// Versions are library names and versions ({"torch": "2.11.0"}).
type Versions map[string]string

// kernelInfo is one kernel a worker serves, from its hello reply.
type kernelInfo struct {
	Name      string   `json:"name"`
	Doc       string   `json:"doc"`
	Available bool     `json:"available"`
	Reason    string   `json:"reason"`
	Masks     string   `json:"masks"`
	Versions  Versions `json:"versions"`
	// BackwardUsesGiven: its backward takes the out and lse of the request as they are
	// (it does not recompute a forward of its own), so the CP methods' steps, which pass
	// the whole row's out and lse with part of the keys, can call it.
	BackwardUsesGiven bool `json:"backward_uses_given"`
}

// check says what is wrong with a reply to a request of op, or nil.
func (r *reply) check(op string, id int64) error {
	switch {
	case r.ID == nil:
		return fmt.Errorf("reply has no id")
	case *r.ID != id:
		return fmt.Errorf("reply id %d answers no request (waiting for %d)", *r.ID, id)
	}
	switch r.Status {
	case statusOK:
	case statusUnsupported, statusOOM, statusError:
		if r.Reason == "" {
			return fmt.Errorf("%s reply without a reason", r.Status)
		}
		return nil
	default:
		return fmt.Errorf("status %q: want ok, unsupported, oom or error", r.Status)
	}
	switch op {
	case "hello":
		if r.Protocol == 0 {
			return fmt.Errorf("hello reply without a protocol version")
		}
		for i, k := range r.Kernels {
			if k.Name == "" {
				return fmt.Errorf("hello reply: kernel %d has no name", i)
			}
		}
	case "time":
		for _, f := range []struct {
			name string
			v    *float64
		}{{"median_ms", r.MedianMs}, {"min_ms", r.MinMs}, {"max_ms", r.MaxMs}, {"mean_ms", r.MeanMs}} {
			if f.v == nil {
				return fmt.Errorf("time reply without %s", f.name)
			}
			if math.IsNaN(*f.v) || math.IsInf(*f.v, 0) || *f.v <= 0 {
				return fmt.Errorf("time reply: %s = %v is not a positive time", f.name, *f.v)
			}
			// a time.Duration holds it: 1e300 wrapped negative, 5e-324 rounded to 0 (the
			// tenth hardening pass found both written as ok rows)
			if *f.v < minReplyMs || *f.v > maxReplyMs {
				return fmt.Errorf("time reply: %s = %v is not the time of one call (%g ms to %g ms)", f.name, *f.v, minReplyMs, maxReplyMs)
			}
		}
		if !(*r.MinMs <= *r.MedianMs && *r.MedianMs <= *r.MaxMs && *r.MinMs <= *r.MeanMs && *r.MeanMs <= *r.MaxMs) {
			return fmt.Errorf("time reply: min %g, median %g, mean %g, max %g are out of order", *r.MinMs, *r.MedianMs, *r.MeanMs, *r.MaxMs)
		}
		if r.PeakMemBytes != nil && *r.PeakMemBytes < 0 {
			return fmt.Errorf("time reply: negative peak_mem_bytes %d", *r.PeakMemBytes)
		}
	}
	return nil
}

// Bounds on the strings a worker sends (docs/external-kernels.md, "Strings from a
// worker"). A worker's strings go into every row it serves, into logs and into the
// tables: a 15 MB device name made an 818 MB results file of 56 rows, and a newline or an
// escape sequence in it broke the table's "# ran on:" line and cleared the terminal (the
// thirteenth probe). Each is made one printable line and clipped (sanitize).
const (
	// maxShort bounds device, worker, variant, a kernel's masks, and a version's name and
	// value, in bytes ("..." included), as a machine file's name is bounded.
	maxShort = 200
	// maxReason bounds reason and a kernel's doc and reason.
	maxReason = 1000
	// maxVersions bounds the entries of a versions object (and of the merged
	// kernel_versions): more keep the first by name and "..." saying how many more, as the
	// env column does.
	maxVersions = 64
	// maxNamesShown bounds the kernel names a message lists.
	maxNamesShown = 20
)

// sanitize makes every string of the reply that longca records or prints one printable
// line within its bound. The kernels' names are kept as sent (longca sends them back in
// its requests); messages that show them pass them through oneLine.
func (r *reply) sanitize() {
	if r.Reason != "" {
		if r.Reason = oneLine(r.Reason, maxReason); r.Reason == "" {
			r.Reason = "(a reason of white space only)" // check took it: it was not empty
		}
	}
	r.Worker = oneLine(r.Worker, maxShort)
	r.Device = oneLine(r.Device, maxShort)
	r.Variant = oneLine(r.Variant, maxShort)
	r.Versions = boundVersions(r.Versions)
	for i := range r.Kernels {
		k := &r.Kernels[i]
		k.Doc = oneLine(k.Doc, maxReason)
		k.Reason = oneLine(k.Reason, maxReason)
		k.Masks = oneLine(k.Masks, maxShort)
		k.Versions = boundVersions(k.Versions)
	}
}

// oneLine is s as one printable line of at most n bytes: line breaks become " | " (a
// Python traceback stays readable), other white space a space, and every other
// character that is not printable (an escape sequence's ESC, a bidi override) U+FFFD;
// a longer result is cut at a character boundary and ends in "...".
func oneLine(s string, n int) string {
	if len(s) <= n && strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	brk := false
	for _, r := range s {
		if b.Len() > n { // enough to cut: the rest is never read
			break
		}
		switch {
		case r == '\n' || r == '\r' || r == '\u2028' || r == '\u2029' || r == '\u0085':
			brk = b.Len() > 0
			continue
		case unicode.IsSpace(r):
			if brk || b.Len() == 0 {
				continue // a line's leading space
			}
			r = ' '
		case !unicode.IsPrint(r):
			r = utf8.RuneError
		}
		if brk {
			b.WriteString(" | ")
			brk = false
		}
		b.WriteRune(r)
	}
	out := strings.TrimRight(b.String(), " ")
	if len(out) <= n {
		return out
	}
	return textcut.Prefix(out, n-len("...")) + "..."
}

// boundVersions is v with each name and value one printable line of at most maxShort
// bytes, and at most maxVersions entries: the first by name, then "..." giving how many
// more there were. nil stays nil.
func boundVersions(v Versions) Versions {
	if v == nil {
		return nil
	}
	names := make([]string, 0, len(v))
	for k := range v {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make(Versions, min(len(names), maxVersions+1))
	for i, k := range names {
		if i == maxVersions {
			out["..."] = fmt.Sprintf("%d more", len(names)-maxVersions)
			break
		}
		out[oneLine(k, maxShort)] = oneLine(v[k], maxShort)
	}
	return out
}

// The times a worker's reply may give for one call, in ms: a nanosecond to a million
// seconds, inside what a time.Duration holds.
const minReplyMs, maxReplyMs = 1e-6, 1e9

// encodeProblem turns p into its JSON form; a per-KV-head problem writes its grid's
// kept cells into dir (named by their hash, so a repeated problem reuses the file).
func encodeProblem(p kernels.Problem, dir string) (*ProblemJSON, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	pj := &ProblemJSON{SeqQ: p.Mask.SeqQ, SeqK: p.Mask.SeqK, HeadsQ: p.HeadsQ, HeadsKV: p.HeadsKV, HeadDim: p.HeadDim,
		DType: p.DType.String(), Scale: p.SoftmaxScale(), Area: p.Area()}
	if len(p.HeadMasks) == 0 {
		if err := p.Mask.Validate(); err != nil {
			return nil, err
		}
		pj.Mask = &mask.Spec{Mask: p.Mask}
		return pj, nil
	}
	g, err := gridOf(p)
	if err != nil {
		return nil, err
	}
	h := fnv.New64a()
	h.Write(g.kept)
	for _, e := range [][]int{g.qEdges, g.kEdges} {
		for _, x := range e {
			fmt.Fprintf(h, "%d,", x)
		}
		h.Write([]byte{';'})
	}
	path := filepath.Join(dir, fmt.Sprintf("grid-%016x.npy", h.Sum64()))
	if _, err := os.Stat(path); err != nil {
		if err := writeNPYRaw(path, "|u1", []int{p.HeadsKV, len(g.qEdges) - 1, len(g.kEdges) - 1}, g.kept); err != nil {
			return nil, err
		}
	}
	pj.Grid = &GridJSON{QEdges: g.qEdges, KEdges: g.kEdges, Kept: path}
	return pj, nil
}

// grid is per-KV-head masks as kept cells.
type grid struct {
	qEdges, kEdges []int
	kept           []byte // [heads][q cells][k cells]
}

// gridOf cuts the per-KV-head masks of p into cells: the edges are every slice
// boundary of every head, so each slice (all Full, as block-sparse masks are) covers
// whole cells. A slice of another kind cannot be sent in protocol 1: unsupported.
func gridOf(p kernels.Problem) (grid, error) {
	qe := []int{0, p.Mask.SeqQ}
	ke := []int{0, p.Mask.SeqK}
	for h, m := range p.HeadMasks {
		if m.SeqQ != p.Mask.SeqQ || m.SeqK != p.Mask.SeqK {
			return grid{}, fmt.Errorf("head mask %d is %dx%d, the problem %dx%d", h, m.SeqQ, m.SeqK, p.Mask.SeqQ, p.Mask.SeqK)
		}
		if err := m.Validate(); err != nil {
			return grid{}, fmt.Errorf("head mask %d: %w", h, err)
		}
		for _, s := range m.Slices {
			if s.Kind != mask.Full {
				return grid{}, kernels.Unsupported(fmt.Errorf("per-KV-head masks travel to workers as grids of whole cells; head %d has a %s slice (protocol %d)", h, s.Kind, ProtocolVersion))
			}
			qe = append(qe, s.Q.Start, s.Q.End)
			ke = append(ke, s.K.Start, s.K.End)
		}
	}
	slices.Sort(qe)
	slices.Sort(ke)
	qe, ke = slices.Compact(qe), slices.Compact(ke)
	nq, nk := len(qe)-1, len(ke)-1
	if float64(p.HeadsKV)*float64(nq)*float64(nk) > 1<<30 {
		return grid{}, kernels.Unsupported(fmt.Errorf("per-KV-head grid of %d x %d x %d cells is over 1 GiB", p.HeadsKV, nq, nk))
	}
	g := grid{qEdges: qe, kEdges: ke, kept: make([]byte, p.HeadsKV*nq*nk)}
	for h, m := range p.HeadMasks {
		base := h * nq * nk
		for _, s := range m.Slices {
			q0, _ := slices.BinarySearch(qe, s.Q.Start)
			q1, _ := slices.BinarySearch(qe, s.Q.End)
			k0, _ := slices.BinarySearch(ke, s.K.Start)
			k1, _ := slices.BinarySearch(ke, s.K.End)
			for i := q0; i < q1; i++ {
				row := g.kept[base+i*nk:]
				for j := k0; j < k1; j++ {
					row[j] = 1
				}
			}
		}
	}
	return g, nil
}

// problemKey identifies a problem for caching the worker's answers about it.
func problemKey(pj *ProblemJSON) string {
	b, _ := json.Marshal(pj) // plain data: always marshals
	h := fnv.New128a()
	h.Write(b)
	return string(h.Sum(nil))
}

// DecodeProblem is the worker side of encodeProblem: the kernels.Problem a request
// describes (a Go worker can serve requests with it; the tests' fake worker does).
func DecodeProblem(pj *ProblemJSON) (kernels.Problem, error) {
	if pj == nil {
		return kernels.Problem{}, fmt.Errorf("request without a problem")
	}
	dt, err := tensor.ParseDType(pj.DType)
	if err != nil {
		return kernels.Problem{}, err
	}
	p := kernels.Problem{HeadsQ: pj.HeadsQ, HeadsKV: pj.HeadsKV, HeadDim: pj.HeadDim, DType: dt, Scale: pj.Scale,
		Mask: mask.Mask{SeqQ: pj.SeqQ, SeqK: pj.SeqK}}
	switch {
	case pj.Mask != nil && pj.Grid != nil:
		return p, fmt.Errorf("problem has both a mask and a grid")
	case pj.Mask != nil:
		if pj.Mask.Mask.SeqQ != pj.SeqQ || pj.Mask.Mask.SeqK != pj.SeqK {
			return p, fmt.Errorf("mask is %dx%d, the problem %dx%d", pj.Mask.Mask.SeqQ, pj.Mask.Mask.SeqK, pj.SeqQ, pj.SeqK)
		}
		p.Mask = pj.Mask.Mask
	case pj.Grid != nil:
		g := pj.Grid
		if err := checkEdges(g.QEdges, pj.SeqQ); err != nil {
			return p, fmt.Errorf("grid q_edges: %w", err)
		}
		if err := checkEdges(g.KEdges, pj.SeqK); err != nil {
			return p, fmt.Errorf("grid k_edges: %w", err)
		}
		nq, nk := len(g.QEdges)-1, len(g.KEdges)-1
		f, err := os.Open(g.Kept)
		if err != nil {
			return p, err
		}
		defer f.Close()
		r := bufio.NewReader(f)
		hd, err := ReadNPYHeader(r)
		if err != nil {
			return p, err
		}
		if hd.Descr != "|u1" || !equalShape(hd.Shape, []int{pj.HeadsKV, nq, nk}) {
			return p, fmt.Errorf("grid kept: %s %v, want |u1 [%d %d %d]", hd.Descr, hd.Shape, pj.HeadsKV, nq, nk)
		}
		kept := make([]byte, pj.HeadsKV*nq*nk)
		if _, err := io.ReadFull(r, kept); err != nil {
			return p, fmt.Errorf("grid kept: %w", err)
		}
		for h := 0; h < pj.HeadsKV; h++ {
			m := mask.Mask{SeqQ: pj.SeqQ, SeqK: pj.SeqK}
			for i := 0; i < nq; i++ {
				row := kept[(h*nq+i)*nk:][:nk]
				for j := 0; j < nk; j++ {
					if row[j] == 0 || (j > 0 && row[j-1] != 0) {
						continue
					}
					e := j
					for e < nk && row[e] != 0 {
						e++
					}
					m.Slices = append(m.Slices, mask.Slice{Q: mask.Range{Start: g.QEdges[i], End: g.QEdges[i+1]},
						K: mask.Range{Start: g.KEdges[j], End: g.KEdges[e]}, Kind: mask.Full})
				}
			}
			p.HeadMasks = append(p.HeadMasks, m)
		}
	default:
		return p, fmt.Errorf("problem has neither a mask nor a grid")
	}
	return p, p.Validate()
}

// checkEdges checks that edges rise strictly from 0 to n.
func checkEdges(e []int, n int) error {
	if len(e) < 2 || e[0] != 0 || e[len(e)-1] != n {
		return fmt.Errorf("edges must run from 0 to %d", n)
	}
	for i := 1; i < len(e); i++ {
		if e[i] <= e[i-1] {
			return fmt.Errorf("edges must rise (%d after %d)", e[i], e[i-1])
		}
	}
	return nil
}
