package cudnn

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/longca/longca/internal/hostcc"
)

//go:embed testdata/fakecudnn.c
var fakeSource []byte

// The fake libraries built from testdata/fakecudnn.c by TestMain: one with
// cudnnGetLastErrorString, one without.
var fakeLib, fakeLibNoLastError string

// fakeErr says why the fake libraries could not be built; the tests that need them fail.
var fakeErr error

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fakecudnn")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakeErr = buildFakes(dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildFakes compiles the embedded fake cuDNN through internal/hostcc.
func buildFakes(dir string) error {
	src := filepath.Join(dir, "fakecudnn.c")
	if err := os.WriteFile(src, fakeSource, 0o644); err != nil {
		return err
	}
	fakeLib = filepath.Join(dir, "libfakecudnn.so")
	fakeLibNoLastError = filepath.Join(dir, "libfakecudnn-nolasterror.so")
	for out, flags := range map[string][]string{fakeLib: {"-DWITH_LAST_ERROR"}, fakeLibNoLastError: nil} {
		if err := hostcc.SharedLibrary(out, src, append([]string{"-Wall"}, flags...)...); err != nil {
			return fmt.Errorf("building the fake cuDNN: %w", err)
		}
	}
	return nil
}

func openFake(t *testing.T, path string) *Lib {
	t.Helper()
	if fakeErr != nil {
		t.Fatal(fakeErr)
	}
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// fakeInt reads one of the fake's int counters (fake_live, fake_executes).
func fakeInt(t *testing.T, l *Lib, name string) int {
	t.Helper()
	p, err := l.dl.Sym(name)
	if err != nil {
		t.Fatal(err)
	}
	return int(*(*int32)(p))
}

// fakeDesc is one descriptor as the fake dumps it.
type fakeDesc struct {
	id, typ int
	fin     bool
	engine  int64
	attrs   map[int][]string // attribute -> its values as printed
	types   map[int]int      // attribute -> its value type
}

func (d *fakeDesc) ints(name int) []int64 {
	var out []int64
	for _, s := range d.attrs[name] {
		v, _ := strconv.ParseInt(s, 10, 64)
		out = append(out, v)
	}
	return out
}

func (d *fakeDesc) int(name int) int64 {
	v := d.ints(name)
	if len(v) != 1 {
		return -999
	}
	return v[0]
}

// ref is the id of the descriptor an attribute names ("d12" -> 12), or -1.
func (d *fakeDesc) ref(name int) int {
	v := d.attrs[name]
	if len(v) != 1 || !strings.HasPrefix(v[0], "d") {
		return -1
	}
	id, _ := strconv.Atoi(v[0][1:])
	return id
}

// fakeState is a parse of fake_cudnn_dump.
type fakeState struct {
	byID  map[int]*fakeDesc
	order []*fakeDesc
}

func dumpFake(t *testing.T, l *Lib) *fakeState {
	t.Helper()
	p, err := l.dl.Sym("fake_cudnn_dump")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeState{byID: map[int]*fakeDesc{}}
	var cur *fakeDesc
	for _, line := range strings.Split(callCString(p), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if strings.HasPrefix(line, "d") {
			cur = &fakeDesc{attrs: map[int][]string{}, types: map[int]int{}}
			fmt.Sscanf(line, "d%d type=%d fin=", &cur.id, &cur.typ)
			cur.fin = strings.Contains(line, "fin=1")
			if i := strings.Index(line, "engine="); i >= 0 {
				cur.engine, _ = strconv.ParseInt(line[i+7:], 10, 64)
			}
			s.byID[cur.id] = cur
			s.order = append(s.order, cur)
			continue
		}
		name, _ := strconv.Atoi(strings.TrimPrefix(f[0], "a"))
		typ, _ := strconv.Atoi(strings.TrimPrefix(f[1], "t"))
		cur.attrs[name] = f[2:]
		cur.types[name] = typ
	}
	return s
}

// tensorsByUID are the dumped tensor descriptors by unique id (the latest of each).
func (s *fakeState) tensorsByUID() map[int64]*fakeDesc {
	out := map[int64]*fakeDesc{}
	for _, d := range s.order {
		if d.typ == int(descTensor) {
			out[d.int(int(attrTensorUniqueID))] = d
		}
	}
	return out
}

// last is the newest descriptor of a type.
func (s *fakeState) last(typ descType) *fakeDesc {
	var out *fakeDesc
	for _, d := range s.order {
		if d.typ == int(typ) {
			out = d
		}
	}
	return out
}
