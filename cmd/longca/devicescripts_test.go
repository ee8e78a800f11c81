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

// Slurm opens a job's --output before its script runs, so a log under a folder the script
// makes (out/, which git ignores) failed every sbatch of a fresh clone with no log at
// all (JobLaunchFailure, exit 0:53): each script's log goes where sbatch runs.
func TestSlurmLogsNeedNoFolder(t *testing.T) {
	scripts, err := filepath.Glob("../../slurm/*.sh")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no slurm scripts: %v", err)
	}
	for _, p := range scripts {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			for _, flag := range []string{"#SBATCH --output=", "#SBATCH --error=", "#SBATCH -o ", "#SBATCH -e "} {
				if v, ok := strings.CutPrefix(line, flag); ok && strings.Contains(v, "/") {
					t.Errorf("%s: %q: a folder Slurm may not find at submission", filepath.Base(p), line)
				}
			}
		}
	}
}
