// Package dataset holds the document-length distributions of the benchmark (the three
// published ones, embedded), the seeded packing sampler that turns a distribution into
// the document lengths of one packed sequence, and readers for real token counts.
package dataset

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/longca/longca/internal/jsonkeys"
	"github.com/longca/longca/internal/smallfile"
)

//go:embed seqlen/*.json
var builtinFS embed.FS

// Names of the built-in distributions.
const (
	Pile        = "pile"
	ProLong64K  = "prolong64k"
	ProLong512K = "prolong512k"
)

// Builtins lists the embedded distributions' names (the three of MASKS.md and the
// magiattention preset).
func Builtins() []string { return []string{Pile, ProLong64K, ProLong512K, MagiAttention} }

// Bin is the length interval [Lo, Hi) and its probability.
type Bin struct {
	Lo, Hi int
	P      float64
}

// Dist is a document-length distribution: bins sorted by Lo, probabilities summing to 1.
type Dist struct {
	Name string
	// ID names the distribution in result rows: the preset's name, or for a file its base
	// name and a hash of its content (so two files of one name never read as one input).
	ID   string
	Bins []Bin
	// Packing is how PackDocs packs a sequence from it: PackingClip (MASKS.md) or
	// PackingStream (the magiattention preset).
	Packing string
	// Cap is the document-length cap the distribution brings (the magiattention preset's
	// quarter of the pack); a --max-doc given replaces it.
	Cap Cap
}

// Builtin returns one of the embedded distributions: pile, prolong64k or prolong512k.
func Builtin(name string) (*Dist, error) {
	b, err := builtinFS.ReadFile("seqlen/" + name + ".json")
	if err != nil {
		return nil, fmt.Errorf("dataset: unknown distribution %q: use %s or a JSON file", name, strings.Join(Builtins(), ", "))
	}
	d, err := ParseDist(name, b)
	if err != nil {
		return nil, err
	}
	d.ID = name
	if name == MagiAttention {
		d.Packing, d.Cap = PackingStream, Cap{Fraction: 0.25}
	}
	return d, nil
}

// maxDistBytes bounds a distribution file (the built-in ones are a few KB).
const maxDistBytes = 4 << 20

// LoadDist reads a distribution from a JSON file of "[a,b)" -> weight.
func LoadDist(path string) (*Dist, error) {
	b, err := smallfile.Read(path, maxDistBytes)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	d, err := ParseDist(path, b)
	if err != nil {
		return nil, err
	}
	name := fileName(path)
	d.Name = strings.TrimSuffix(name, filepath.Ext(name))
	d.ID = "file:" + name + "@" + shortHash(b)
	return d, nil
}

// Open returns the built-in distribution of that name, or else reads the file at that
// path; a name that is no file is matched to a built-in one in any case (README writes
// "Pile" and "ProLong64K", which were refused).
func Open(nameOrPath string) (*Dist, error) {
	for _, n := range Builtins() {
		if nameOrPath == n {
			return Builtin(n)
		}
	}
	if _, err := os.Stat(nameOrPath); err != nil {
		for _, n := range Builtins() {
			if strings.EqualFold(strings.TrimSpace(nameOrPath), n) {
				return Builtin(n)
			}
		}
		return nil, fmt.Errorf("dataset: %q is neither a built-in distribution (%s) nor a readable file", nameOrPath, strings.Join(Builtins(), ", "))
	}
	return LoadDist(nameOrPath)
}

// ParseDist parses the JSON form {"[a,b)": weight, ...}; the weights are normalised.
func ParseDist(name string, data []byte) (*Dist, error) {
	data = bytes.TrimPrefix(data, utf8BOM) // (a file saved by Notepad: "invalid character 'ï'")
	var raw map[string]float64
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("dataset: distribution %s: not a JSON object of \"[a,b)\": weight: %v", name, err)
	}
	if key := jsonkeys.Duplicate(data); key != "" {
		return nil, fmt.Errorf("dataset: distribution %s: bin %q is given twice: give each bin once", name, key)
	}
	d := &Dist{Name: name}
	var sum float64
	for key, w := range raw {
		lo, hi, err := parseBin(key)
		if err != nil {
			return nil, fmt.Errorf("dataset: distribution %s: %w", name, err)
		}
		if w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("dataset: distribution %s: bin %q has weight %v: weights must be finite and >= 0", name, key, w)
		}
		d.Bins = append(d.Bins, Bin{lo, hi, w})
	}
	// summed in the bins' order, not the map's (whose order changes run to run, and with it
	// the sum's last bits: the same seed then drew differently at a bin's edge)
	sort.Slice(d.Bins, func(i, j int) bool { return d.Bins[i].Lo < d.Bins[j].Lo })
	for _, b := range d.Bins {
		sum += b.P
	}
	if !(sum > 0) {
		return nil, fmt.Errorf("dataset: distribution %s: the weights sum to 0", name)
	}
	if math.IsInf(sum, 1) {
		// weights near the float64 maximum (1e308, 1e308) sum to +Inf, and every bin but
		// the last drew with probability 0: scale them by the largest first
		top := 0.0
		for _, b := range d.Bins {
			top = max(top, b.P)
		}
		sum = 0
		for i := range d.Bins {
			d.Bins[i].P /= top
			sum += d.Bins[i].P
		}
	}
	for i := range d.Bins {
		d.Bins[i].P /= sum
		if i > 0 && d.Bins[i].Lo < d.Bins[i-1].Hi {
			return nil, fmt.Errorf("dataset: distribution %s: bins [%d,%d) and [%d,%d) overlap", name,
				d.Bins[i-1].Lo, d.Bins[i-1].Hi, d.Bins[i].Lo, d.Bins[i].Hi)
		}
	}
	return d, nil
}

// parseBin reads "[a,b)" with 0 <= a < b and b > 1 (a bin of lengths 1 and more; a bin
// from 0 draws its 0 as 1).
func parseBin(key string) (int, int, error) {
	s := strings.TrimSpace(key)
	if !strings.HasPrefix(s, "[") || !strings.HasSuffix(s, ")") {
		return 0, 0, fmt.Errorf("bin key %q is not of the form \"[a,b)\"", key)
	}
	parts := strings.Split(s[1:len(s)-1], ",")
	if len(parts) != 2 {
		return 0, 0, fmt.Errorf("bin key %q is not of the form \"[a,b)\"", key)
	}
	lo, err1 := strconv.Atoi(strings.TrimSpace(parts[0]))
	hi, err2 := strconv.Atoi(strings.TrimSpace(parts[1]))
	if err1 != nil || err2 != nil || lo < 0 || hi <= lo {
		return 0, 0, fmt.Errorf("bin key %q is not of the form \"[a,b)\" with integers 0 <= a < b", key)
	}
	if hi <= 1 { // (Length would draw its 0 as 1 without a word)
		return 0, 0, fmt.Errorf("bin %q holds only documents of 0 tokens: a document has at least 1: give its weight to \"[1,2)\", or leave it out", key)
	}
	return lo, hi, nil
}

// Length draws one document length: a bin by weight, then uniform in [Lo, Hi-1], at least 1.
func (d *Dist) Length(rng *rand.Rand) int {
	u := rng.Float64()
	i := 0
	for acc := 0.0; i < len(d.Bins)-1; i++ {
		acc += d.Bins[i].P
		if u < acc {
			break
		}
	}
	b := d.Bins[i]
	return max(1, b.Lo+rng.IntN(b.Hi-b.Lo))
}

// Mean is the distribution's mean length (counting lengths of 0 as 1, as Length does).
func (d *Dist) Mean() float64 {
	var m float64
	for _, b := range d.Bins {
		n := float64(b.Hi - b.Lo)
		mean := (float64(b.Lo) + float64(b.Hi-1)) / 2
		if b.Lo == 0 {
			mean += 1 / n // the 0 drawn with probability 1/n becomes 1
		}
		m += b.P * mean
	}
	return m
}

// KernelThreshold is the longest S that kernel and CP runs sample from Pile (12K).
const KernelThreshold = 12288

// CPLongThreshold is the S from which CP runs sample from ProLong512K (64K).
const CPLongThreshold = 65536

// ForKernel names the distribution kernel runs use at sequence length S (MASKS.md):
// pile for S <= 12K, prolong64k above.
func ForKernel(seqlen int) string {
	if seqlen <= KernelThreshold {
		return Pile
	}
	return ProLong64K
}

// ForCP names the distribution CP runs use at global sequence length S (MASKS.md): pile
// for S <= 12K, prolong64k for S < 64K, prolong512k above.
func ForCP(seqlen int) string {
	switch {
	case seqlen <= KernelThreshold:
		return Pile
	case seqlen < CPLongThreshold:
		return ProLong64K
	}
	return ProLong512K
}
