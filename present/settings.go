package present

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/longca/longca/results"
)

// A results file can hold rows that share a mask, length, heads and pass but not the
// problem: runs at two head dims, dtypes or batch sizes merged into one folder, two window
// widths, two document sources. Averaging those into one cell would print a rate that no
// run measured, so the reports tell such cases apart by the settings that differ, and by
// those only: a file of one setting reads as before.

// setting is one of a row's settings that change the problem: a name (the order it is
// shown in) and its value as a label part.
type setting struct{ name, part string }

// perSampleParams are mask parameters that differ from one document sample to the next
// of the same case (the lengths drawn); a case's samples are averaged, as they always were.
// dist and max_doc are shown through doc_source and max_doc.
var perSampleParams = map[string]bool{"doc_lengths": true, "doc_count": true, "dist": true, "max_doc": true}

// rowSettings are r's problem settings beyond the mask, length, heads and pass, in a fixed
// order: head dim, dtype, batch, the mask's parameters (by name), document source, length cap.
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
	maxDoc := ""
	if r.MaxDoc != nil {
		maxDoc = fmt.Sprintf("maxdoc%d", *r.MaxDoc)
	}
	return append(s, setting{"5 max_doc", maxDoc})
}

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

// caseLabeler returns the mask label of each of rows' cases: MaskLabel, then, joined by
// '_', the value of every setting that takes two or more values among rows of one mask
// label, length, heads and pass (a setting that only changes with the length, such as a
// window sized by it, is not one), in rowSettings' order; a row without such a setting
// (a parameter of another run's mask) shows "none" in its place.
func caseLabeler(rows []results.Row) func(results.Row) string {
	type base struct {
		mask            string
		seqlen, hq, hkv int64
		pass            string
	}
	settings := make([]map[string]string, len(rows))
	names := map[string]bool{}
	for i, r := range rows {
		settings[i] = map[string]string{}
		for _, st := range rowSettings(r) {
			settings[i][st.name] = st.part
			names[st.name] = true
		}
	}
	// each case's values of each setting ("" where a row lacks it)
	values := map[base]map[string]map[string]bool{}
	for i, r := range rows {
		b := base{MaskLabel(r), r.SeqLen, r.HeadsQ, r.HeadsKV, r.Pass}
		if values[b] == nil {
			values[b] = map[string]map[string]bool{}
		}
		for n := range names {
			if values[b][n] == nil {
				values[b][n] = map[string]bool{}
			}
			values[b][n][settings[i][n]] = true
		}
	}
	var shown []string
	for n := range names {
		for _, v := range values {
			if len(v[n]) > 1 {
				shown = append(shown, n)
				break
			}
		}
	}
	if len(shown) == 0 {
		return MaskLabel
	}
	sort.Strings(shown)
	return func(r results.Row) string {
		parts := map[string]string{}
		for _, st := range rowSettings(r) {
			parts[st.name] = st.part
		}
		l := MaskLabel(r)
		for _, n := range shown {
			p := parts[n]
			if p == "" {
				p = "none"
			}
			l += "_" + labelPart(p)
		}
		return l
	}
}
