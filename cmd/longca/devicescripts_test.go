package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDeviceScriptsAreListed keeps scripts/device/README.md true: every file of
// scripts/device is in its table, every script the table names is there, and every shell
// script parses (`sh -n`), since none of them can run on a machine without a GPU.
func TestDeviceScriptsAreListed(t *testing.T) {
	dir := filepath.Join("..", "..", "scripts", "device")
	b, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	present := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if name == "README.md" {
			continue
		}
		present[name] = true
		if !strings.Contains(readme, "`"+name) {
			t.Errorf("scripts/device/%s is not in scripts/device/README.md's table", name)
		}
		if strings.HasSuffix(name, ".sh") {
			if out, err := exec.Command("sh", "-n", filepath.Join(dir, name)).CombinedOutput(); err != nil {
				t.Errorf("sh -n scripts/device/%s: %v\n%s", name, err, out)
			}
		}
	}
	// the table's rows (lines starting "| `"): each script they name must exist
	table := regexp.MustCompile("(?m)^\\| `[^|]*\\|")
	name := regexp.MustCompile("`([a-z0-9-]+\\.sh)")
	for _, row := range table.FindAllString(readme, -1) {
		for _, m := range name.FindAllStringSubmatch(row, -1) {
			if !present[m[1]] {
				t.Errorf("scripts/device/README.md lists %s, which is not in scripts/device", m[1])
			}
		}
	}
}
