package present

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/longca/longca/results"
)

// A results folder can hold rows that share a mask, length, heads and pass but not the
// problem or the conditions: runs at two head dims, dtypes, document sources or devices
// merged into one folder, `--variant` runs of one kernel side by side, `cp` runs with
// other shardings, blocks, kernels or rank counts, balanced on two meshes of one run.
// Averaging those into one cell would print a rate that no run measured, so the reports
// tell them apart by what differs where rows would otherwise meet, and by that only: a
// folder of one run reads as before.

// setting is one of a row's settings: a name (the order it is shown in) and its value as a
// label part. Some may differ between the samples (seeds) of one case of one run (perSample):
// a mask parameter drawn per seed (prefix_lm's prefix, global_sliding_window's w and g), the
// path a kernel named for a sample (cuDNN's sdpa-op on a single document, composite on
// ragged ones); those tell rows apart only where they share a seed.
type setting struct{ name, part string }

// perSample says whether the setting named may differ between the samples of one case of
// one run: the mask's parameters and a kernel's variant.
func perSample(name string) bool { return strings.HasPrefix(name, "3 param ") || name == "variant" }

// perSampleParams are mask parameters that differ from one document sample to the next
// of the same case (the lengths drawn); a case's samples are averaged, as they always were.
// dist and max_doc are shown through doc_source and max_doc.
var perSampleParams = map[string]bool{"doc_lengths": true, "doc_count": true, "dist": true, "max_doc": true}

// rowSettings are r's settings beyond the mask, length, heads and pass that change what was
// measured, in a fixed order: the problem (head dim, dtype, batch, the mask's parameters by
// name, document source, length cap), the device, backend, kernel's versions (GOMAXPROCS for
// the reference), emulated links (model_params), the environment's settings (env) and settle, and a CP row's run (ranks, ranks
// a device, sharding, dispatch block, inner dimension).
func rowSettings(r results.Row) []setting {
	s := []setting{
		{"0 head_dim", fmt.Sprintf("d%d", r.HeadDim)},
		{"1 dtype", r.DType},
		{"2 batch", fmt.Sprintf("batch%d", r.Batch)},
	}
	var params map[string]any
	if r.MaskParams != "" && json.Unmarshal([]byte(r.MaskParams), &params) == nil {
		names := make([]string, 0, len(params))
		for k := range params {
			if !perSampleParams[k] {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		for _, k := range names {
			s = append(s, setting{"3 param " + k, k + fmt.Sprint(params[k])})
		}
	}
	s = append(s, setting{"4 doc_source", r.DocSource})
	if r.MaxDoc != nil {
		s = append(s, setting{"5 max_doc", fmt.Sprintf("maxdoc%d", *r.MaxDoc)})
	}
	s = append(s, setting{"6 device", ShortDevice(r.Device)}, setting{"6 backend", r.Backend}, setting{"6 versions", versionsPart(r.KernelVersions)})
	if r.ModelParams != "" && r.Backend != "sim" { // measured over emulated links (cp --links); simulate's rows name their model per GPU count
		s = append(s, setting{"6 model", fmt.Sprintf("model-%x", sha256.Sum256([]byte(r.ModelParams)))[:14]})
	}
	if e := envPart(r.Env); e != "" {
		s = append(s, setting{"6 env", e})
	}
	if r.SettleMs != nil {
		s = append(s, setting{"7 settle", fmt.Sprintf("settle%gms", *r.SettleMs)})
	}
	if r.Bench == "cp" {
		s = append(s, setting{"8 ranks", fmt.Sprintf("ranks%d", r.WorldSize)})
		if r.RanksPerDevice != nil {
			s = append(s, setting{"8 ranks_per_device", fmt.Sprintf("%dper-device", *r.RanksPerDevice)})
		}
		// (not cp_layout and cp_stages: with --cp-layout auto they are what each document
		// sample's plan took, which a case's samples average over)
		s = append(s, setting{"9 cp_sharding", r.CPSharding}, setting{"9 cp_inner_dim", r.InnerDim})
		if r.CPBlock != nil {
			s = append(s, setting{"9 cp_block", fmt.Sprintf("block%d", *r.CPBlock)})
		}
	}
	return s
}

// versionsPart is a row's kernel_versions as a label part: {"gomaxprocs":"1"} gives
// "gomaxprocs1", {"torch":"2.11.0","cuda":"12.8"} "cuda12.8-torch2.11.0".
func versionsPart(v string) string { return objectPart(v, "", "-") }

// objectPart is a JSON object's entries as "key<eq>value", sorted and joined by sep; v itself
// where it is not an object.
func objectPart(v, eq, sep string) string {
	var m map[string]any
	if json.Unmarshal([]byte(v), &m) != nil {
		return v
	}
	parts := make([]string, 0, len(m))
	for k, x := range m {
		parts = append(parts, k+eq+fmt.Sprint(x))
	}
	sort.Strings(parts)
	return strings.Join(parts, sep)
}

// envPart is a row's env column as a label part: {"NCCL_ALGO":"Ring"} gives
// "NCCL_ALGO=Ring"; "" for none set ("{}") and for rows written before the column existed
// (""), so that those read as one. A part longer than 48 characters is "env-" and a hash.
func envPart(v string) string {
	p := objectPart(v, "=", ",")
	if len(p) > 48 {
		return fmt.Sprintf("env-%x", sha256.Sum256([]byte(p)))[:12]
	}
	return p
}

// ShortDevice is a device name as a label part: "cuda:0 NVIDIA H100 80GB HBM3" gives
// "H100-80GB-HBM3".
func ShortDevice(d string) string { return strings.TrimPrefix(results.DeviceModel(d), "NVIDIA ") }

// labelPart keeps a value to characters that read well in a table and in a plot's file
// name: letters, digits, '.', '-' (anything else becomes '-').
func labelPart(v string) string {
	return strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' {
			return c
		}
		return '-'
	}, v)
}

// caseKey is a row's case before any setting (mask label, length, heads, pass) with a
// column's name: the group in which colliding asks whether a setting differs.
func caseKey(r results.Row, column string) string {
	return fmt.Sprintf("%s|%d|%d:%d|%s|%s", MaskLabel(r), r.SeqLen, r.HeadsQ, r.HeadsKV, r.Pass, column)
}

// colliding returns the names among settings(r) that take two or more values (a row
// without one counting as the value "") among measured rows of one group (of one seed, for
// a perSample setting): the settings that tell apart rows that would otherwise share a
// cell. Rows that were not measured (unsupported, oom, wrong, error: they lack the columns
// a timing writes, settle_ms, or a plan's) are left out of the question.
func colliding(rows []results.Row, group func(results.Row) string, settings func(results.Row) []setting) map[string]bool {
	type gn struct{ group, name string }
	per := make([]map[string]string, len(rows))
	names := map[string]bool{}
	for i, r := range rows {
		if r.Status != results.StatusOK && r.Status != results.StatusPredicted {
			continue
		}
		per[i] = map[string]string{}
		for _, st := range settings(r) {
			per[i][st.name] = st.part
			names[st.name] = true
		}
	}
	values := map[gn]map[string]bool{} // the values met
	out := map[string]bool{}
	for i, r := range rows {
		if per[i] == nil {
			continue
		}
		g := group(r)
		for n := range names {
			k := gn{g, n}
			if perSample(n) {
				k.group += fmt.Sprintf("|seed %d", r.Seed)
			}
			if values[k] == nil {
				values[k] = map[string]bool{}
			}
			values[k][per[i][n]] = true
			if len(values[k]) > 1 {
				out[n] = true
			}
		}
	}
	return out
}

// VariantKey is the part of a row's kernel_variant that names the code asked for: its
// first word other than a pass (cuda's variant, sm90 or sm80; cuDNN's implementation,
// sdpa-op or composite), and "deterministic" where that was asked for. The words after it
// name the path a case took (wide-fwd, pairs-bwd) and differ from case to case of one run.
func VariantKey(r results.Row) string {
	words := strings.FieldsFunc(r.KernelVariant, func(c rune) bool { return c == ' ' || c == ';' || c == ',' })
	key := ""
	det := false
	for _, w := range words {
		if key == "" && w != "fwd" && w != "bwd" {
			key = w
		}
		det = det || w == "deterministic"
	}
	if det {
		key += "+deterministic"
	}
	return key
}

// RowMeshKey is a CP row's method with its whole mesh, for keys and where two meshes of
// one method meet: balanced-1x8, balanced-8x1, loongtrain-2x4-w2 (RowMeshLabel names the
// first two "balanced").
func RowMeshKey(r results.Row) string { return meshLabel(r, true) }

// columnLabeler returns each row's column in the kernel table: the kernel, or the CP
// method with its mesh (RowMeshLabel); with the whole mesh where two meshes of one method
// would share a column (balanced 1x8 and 8x1, ring-p2p on 2 and on 4 ranks), and with the
// variant ("cuda[sm80]") or a CP row's kernel ("ring-p2p[cudnn]") where rows of one case
// and column differ in it.
//
// byGPUs also keeps CP rows of other GPU counts apart in that question (simulate's tables,
// whose lines are per GPU count: at a fixed --seqlen ring-p2p's 1x8 and 1x16 are not two
// meshes of one cell); the kernel table asks it without, where such rows share a cell.
func columnLabeler(rows []results.Row, byGPUs bool) func(results.Row) string {
	group := func(r results.Row) string {
		if byGPUs {
			return caseKey(r, fmt.Sprintf("%s|%d", kernelLabel(r), r.WorldSize))
		}
		return caseKey(r, kernelLabel(r))
	}
	show := colliding(rows, group, func(r results.Row) []setting {
		s := []setting{{"variant", VariantKey(r)}}
		if r.Method != "" {
			s = append(s, setting{"mesh", RowMeshKey(r)}, setting{"kernel", r.Kernel})
		}
		return s
	})
	if len(show) == 0 {
		return kernelLabel
	}
	return func(r results.Row) string {
		l := kernelLabel(r)
		if r.Method != "" && show["mesh"] {
			l = RowMeshKey(r)
		}
		return withTags(l, r, show)
	}
}

// withTags is label with, in brackets, a CP row's kernel where show["kernel"] and the
// row's variant where show["variant"]: ring-p2p[cudnn], cuda[sm80].
func withTags(label string, r results.Row, show map[string]bool) string {
	var tags []string
	if r.Method != "" && show["kernel"] {
		tags = append(tags, r.Kernel)
	}
	if v := VariantKey(r); show["variant"] && v != "" {
		tags = append(tags, v)
	}
	if len(tags) == 0 {
		return label
	}
	return label + "[" + strings.Join(tags, ",") + "]"
}

// caseLabeler returns the mask label of each row's case: MaskLabel, then, joined by '_',
// the value of every setting (rowSettings) that takes two or more values among rows of one
// case and one column (column: columnLabeler's), in rowSettings' order; a row without such
// a setting shows "none" in its place. A setting that only changes with the length (a
// window sized by it) or from one kernel or method to another of one run (a method's own
// sharding) is not shown.
func caseLabeler(rows []results.Row, column func(results.Row) string) func(results.Row) string {
	show := colliding(rows, func(r results.Row) string { return caseKey(r, column(r)) }, rowSettings)
	if len(show) == 0 {
		return MaskLabel
	}
	names := make([]string, 0, len(show))
	for n := range show {
		names = append(names, n)
	}
	sort.Strings(names)
	return func(r results.Row) string {
		parts := map[string]string{}
		for _, st := range rowSettings(r) {
			parts[st.name] = st.part
		}
		l := MaskLabel(r)
		for _, n := range names {
			p := parts[n]
			if p == "" {
				p = "none"
			}
			l += "_" + labelPart(p)
		}
		return l
	}
}

// CaseLabeler is the report's mask label of each of rows' cases (caseLabeler over the
// report's columns): MaskLabel, with the settings that tell rows of one case apart.
func CaseLabeler(rows []results.Row) func(results.Row) string {
	return caseLabeler(rows, columnLabeler(rows, false))
}
