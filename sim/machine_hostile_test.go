package sim

import (
	"strings"
	"testing"
)

// TestMachineFileTrailingData: a machine file with more after its object is refused for
// that; it was refused for "gpus_per_node 0: need at least 1" (the preset was not read),
// which named a field the file did not have. A file of one object, with spaces and CRLF
// line ends after it, is read as before.
func TestMachineFileTrailingData(t *testing.T) {
	for _, b := range []string{`{"preset":"h100-ib"} garbage`, `{"preset":"h100-ib"} {}`, `{"preset":"h100-ib"}]`} {
		_, err := ParseMachine([]byte(b), "m.json")
		if err == nil || !strings.Contains(err.Error(), "more after its JSON object") {
			t.Errorf("%s: %v, want an error naming what follows the object", b, err)
		}
	}
	m, err := ParseMachine([]byte("{\r\n\"preset\": \"h100-ib\"\r\n}\r\n  \n"), "m.json")
	if err != nil || m.GPUsPerNode != MachinePresets["h100-ib"].GPUsPerNode {
		t.Errorf("one object and white space: %+v, %v", m, err)
	}
}

// TestMachineFileNamesItsOwnFault: a file without a preset that lacks a field says that a
// preset can give it (it named ranks_per_gpu 0, a field the file does not have). (A file's
// unknown kernel model: TestMachineFileKernelModel in cmd/longca.)
func TestMachineFileNamesItsOwnFault(t *testing.T) {
	_, err := ParseMachine([]byte(`{"gpus_per_node":8}`), "m.json")
	if want := `start it from one: "preset": `; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%v, want an error saying %q", err, want)
	}
}

// TestMachineFileNameOneLine: a machine's name from its file is one printable line (a
// newline in it began one of simulate's table lines without its '#'); ESC and CR too.
func TestMachineFileNameOneLine(t *testing.T) {
	for _, n := range []string{`x\ny`, `x\u001b[31m`, `x\rY`} {
		if _, err := ParseMachine([]byte(`{"preset":"h100-ib","name":"`+n+`"}`), "m.json"); err == nil || !strings.Contains(err.Error(), "printable") {
			t.Errorf("name %s: %v, want it refused", n, err)
		}
	}
	if m, err := ParseMachine([]byte(`{"preset":"h100-ib","name":"our cluster, 2026"}`), "m.json"); err != nil || m.Name != "our cluster, 2026" {
		t.Errorf("a plain name: %q, %v", m.Name, err)
	}
}
