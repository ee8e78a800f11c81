package external

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/longca/longca/internal/smallfile"
	"github.com/longca/longca/tensor"
)

// The .npy files exchanged with a worker (NumPy's format, version 1.0): a magic string,
// a header naming the element type, the order and the shape, then the elements in C
// order. NumPy has no bfloat16, so a bf16 tensor is stored as '<u2', its raw bit
// patterns, and the request names the dtype (docs/external-kernels.md).

var npyMagic = []byte("\x93NUMPY")

// npyDescr is the NumPy type string of a longca element type.
func npyDescr(dt tensor.DType) (string, error) {
	switch dt {
	case tensor.BF16:
		return "<u2", nil
	case tensor.FP16:
		return "<f2", nil
	case tensor.FP32:
		return "<f4", nil
	case tensor.FP64:
		return "<f8", nil
	}
	return "", fmt.Errorf("npy: no NumPy type for %s", dt)
}

// WriteNPY writes h to path as a version 1.0 .npy file.
func WriteNPY(path string, h *tensor.Host) error {
	descr, err := npyDescr(h.DType())
	if err != nil {
		return err
	}
	return writeNPYRaw(path, descr, h.Shape(), h.Data)
}

// writeNPYRaw writes elements already in the layout descr names.
func writeNPYRaw(path, descr string, shape []int, data []byte) error {
	var sh strings.Builder
	sh.WriteString("(")
	for i, n := range shape {
		if i > 0 {
			sh.WriteString(" ")
		}
		fmt.Fprintf(&sh, "%d,", n)
	}
	sh.WriteString(")")
	header := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, sh.String())
	// magic (6) + version (2) + header length (2) + header + padding + '\n', a multiple of 64
	total := 10 + len(header) + 1
	header += strings.Repeat(" ", (64-total%64)%64) + "\n"
	if len(header) > 65535 {
		return fmt.Errorf("npy: header of %d bytes", len(header))
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.Write(npyMagic) // bufio keeps the first error; Flush reports it
	w.Write([]byte{1, 0})
	binary.Write(w, binary.LittleEndian, uint16(len(header)))
	w.WriteString(header)
	w.Write(data)
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("npy: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("npy: writing %s: %w", path, err)
	}
	return nil
}

var (
	npyDescrRE   = regexp.MustCompile(`'descr'\s*:\s*'([^']*)'`)
	npyFortranRE = regexp.MustCompile(`'fortran_order'\s*:\s*(True|False)`)
	npyShapeRE   = regexp.MustCompile(`'shape'\s*:\s*\(([^)]*)\)`)
)

// NPYHeader is what a .npy header says.
type NPYHeader struct {
	Descr string
	Shape []int
	// Offset is where the elements start.
	Offset int64
}

// ReadNPYHeader reads and checks the header of a .npy file (versions 1.0 to 3.0).
func ReadNPYHeader(r io.Reader) (NPYHeader, error) {
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return NPYHeader{}, fmt.Errorf("npy: short file: %w", err)
	}
	if !bytes.Equal(pre[:6], npyMagic) {
		return NPYHeader{}, fmt.Errorf("npy: not a .npy file (bad magic %q)", pre[:6])
	}
	var hlen int
	var off int64
	switch pre[6] {
	case 1:
		var n uint16
		if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
			return NPYHeader{}, fmt.Errorf("npy: short header: %w", err)
		}
		hlen, off = int(n), 10
	case 2, 3:
		var n uint32
		if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
			return NPYHeader{}, fmt.Errorf("npy: short header: %w", err)
		}
		if n > 1<<20 {
			return NPYHeader{}, fmt.Errorf("npy: header of %d bytes", n)
		}
		hlen, off = int(n), 12
	default:
		return NPYHeader{}, fmt.Errorf("npy: unknown format version %d.%d", pre[6], pre[7])
	}
	hb := make([]byte, hlen)
	if _, err := io.ReadFull(r, hb); err != nil {
		return NPYHeader{}, fmt.Errorf("npy: short header: %w", err)
	}
	h := string(hb)
	m := npyDescrRE.FindStringSubmatch(h)
	if m == nil {
		return NPYHeader{}, fmt.Errorf("npy: header has no descr: %q", h)
	}
	out := NPYHeader{Descr: m[1], Offset: off + int64(hlen)}
	if f := npyFortranRE.FindStringSubmatch(h); f == nil || f[1] != "False" {
		return NPYHeader{}, fmt.Errorf("npy: only C order is read (header %q)", strings.TrimSpace(h))
	}
	s := npyShapeRE.FindStringSubmatch(h)
	if s == nil {
		return NPYHeader{}, fmt.Errorf("npy: header has no shape: %q", h)
	}
	for _, f := range strings.Split(s[1], ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(f, "L"))
		if err != nil || n < 0 {
			return NPYHeader{}, fmt.Errorf("npy: bad shape %q", s[1])
		}
		out.Shape = append(out.Shape, n)
	}
	return out, nil
}

// ReadNPYInto reads the .npy file at path into h, which fixes the element type and the
// shape the file must have: a file of another type or shape is an error naming both.
// The element type must match exactly ('<u2' for bf16, '<f2', '<f4', '<f8'; '|' or '='
// byte orders of one-byte-order types are taken as little-endian).
func ReadNPYInto(path string, h *tensor.Host) error {
	// Opened without blocking, then held to a regular file: a worker's output that is a
	// FIFO would otherwise wait in open(2) for a writer forever, past --worker-timeout and
	// the first SIGINT (the tenth hardening pass).
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return fmt.Errorf("npy: %w", err)
	} else if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: %s, not a regular file: the worker must write its outputs as files", path, smallfile.Kind(fi.Mode()))
	}
	r := bufio.NewReaderSize(f, 1<<20)
	hd, err := ReadNPYHeader(r)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	want, err := npyDescr(h.DType())
	if err != nil {
		return err
	}
	got := hd.Descr
	if strings.HasPrefix(got, "=") {
		got = "<" + got[1:]
	}
	if got != want {
		return fmt.Errorf("%s: holds %q, want %q (%s)", path, hd.Descr, want, h.DType())
	}
	if !equalShape(hd.Shape, h.Shape()) {
		return fmt.Errorf("%s: shape %v, want %v", path, hd.Shape, h.Shape())
	}
	if _, err := io.ReadFull(r, h.Data); err != nil {
		return fmt.Errorf("%s: %d bytes of elements expected: %w", path, len(h.Data), err)
	}
	if n, _ := r.Read(make([]byte, 1)); n != 0 {
		return fmt.Errorf("%s: bytes past the %d elements", path, h.Numel())
	}
	return nil
}

func equalShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
