package smallfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.json")
	if err := os.WriteFile(small, []byte(`{"a": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(small, 8); err != nil || string(b) != `{"a": 1}` {
		t.Errorf("a file of exactly the limit: %q, %v", b, err)
	}
	if _, err := Read(small, 7); err == nil || !strings.Contains(err.Error(), "more than 7 bytes") {
		t.Errorf("a file over the limit: %v, want an error naming the limit", err)
	}
	// An endless file ends at the limit, not in an out-of-memory crash.
	if _, err := Read("/dev/zero", 1<<20); err == nil || !strings.Contains(err.Error(), "/dev/zero holds more than") {
		t.Errorf("/dev/zero: %v, want an error naming it", err)
	}
	if _, err := Read(filepath.Join(dir, "none"), 8); !os.IsNotExist(err) {
		t.Errorf("a missing file: %v, want a not-exist error", err)
	}
}
