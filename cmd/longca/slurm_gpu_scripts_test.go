package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The two GPU job scripts shared their steps by copy (docs/hardening.md, fifteenth pass's
// "seen and left"), so a fix to one missed the other. The shared steps are in slurm/lib.sh,
// which each script finds by the same lines (sbatch runs a copy of the script from its spool
// folder, so not beside $0); these tests fail when the file is missing, when the scripts
// copy a step again, and when the steps' commands or exit statuses change.

var slurmGPUScripts = []string{"run_8gpu.sh", "run_64gpu.sh"}

const (
	slurmLibBegin = "# -- find slurm/lib.sh,"
	slurmLibEnd   = "# -- end of the lines the same in each"
)

// slurmCodeLines returns a script's lines that are neither blank nor comments.
func slurmCodeLines(s string) []string {
	var code []string
	for _, l := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			code = append(code, t)
		}
	}
	return code
}

func TestSlurmGPUScriptsShareLib(t *testing.T) {
	dir := filepath.Join("..", "..", "slurm")
	lib, err := os.ReadFile(filepath.Join(dir, "lib.sh"))
	if err != nil {
		t.Fatalf("the GPU scripts' shared steps: %v", err)
	}
	for _, fn := range []string{"longca_gpu_job_start()", "longca_gpu_cp_and_merge()"} {
		if !strings.Contains(string(lib), "\n"+fn+" {") {
			t.Errorf("slurm/lib.sh does not define %s", fn)
		}
	}
	for _, f := range append([]string{"lib.sh"}, slurmGPUScripts...) {
		for _, sh := range []string{"sh", "bash"} {
			if out, err := exec.Command(sh, "-n", filepath.Join(dir, f)).CombinedOutput(); err != nil {
				t.Errorf("%s -n slurm/%s: %v\n%s", sh, f, err, out)
			}
		}
	}
	if sc, err := exec.LookPath("shellcheck"); err == nil {
		cmd := exec.Command(sc, "-x", "slurm/lib.sh", "slurm/run_8gpu.sh", "slurm/run_64gpu.sh")
		cmd.Dir = filepath.Join("..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("shellcheck: %v\n%s", err, out)
		}
	}

	blocks := map[string]string{}
	rest := map[string][]string{}
	for _, f := range slurmGPUScripts {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		// sbatch reads #SBATCH lines only up to the first command
		if code := slurmCodeLines(s); len(code) == 0 || code[0] != "set -euo pipefail" {
			t.Errorf("%s: the first command is not set -euo pipefail", f)
		}
		first := strings.Index(s, "\nset -euo pipefail\n")
		if i := strings.LastIndex(s, "#SBATCH"); i < 0 || i > first {
			t.Errorf("%s: #SBATCH lines must all come before the first command", f)
		}
		i, j := strings.Index(s, slurmLibBegin), strings.Index(s, slurmLibEnd)
		if i < 0 || j < i {
			t.Errorf("%s: no lines finding slurm/lib.sh (%q ... %q)", f, slurmLibBegin, slurmLibEnd)
			continue
		}
		blocks[f] = s[i:j]
		if !strings.Contains(blocks[f], "\n. \"$lib\"\n") {
			t.Errorf("%s: its lines finding slurm/lib.sh do not source it", f)
		}
		rest[f] = slurmCodeLines(s[:i] + s[j:])
		if !strings.HasPrefix(rest[f][1], "longca_gpu_job_start ") {
			t.Errorf("%s: the first step after lib.sh is %q, want longca_gpu_job_start", f, rest[f][1])
		}
		if last := rest[f][len(rest[f])-1]; !strings.HasPrefix(last, "longca_gpu_cp_and_merge") {
			t.Errorf("%s: the last command is %q, want longca_gpu_cp_and_merge", f, last)
		}
		for _, l := range rest[f] {
			if regexp.MustCompile(`"\$LONGCA" (cp|merge)\b|cp_status|merge_status|LONGCA_JOB_TOKEN|MASTER_PORT|SLURM_RESTART_COUNT`).MatchString(l) {
				t.Errorf("%s: %q is one of lib.sh's steps, copied", f, l)
			}
		}
	}
	if len(blocks) == 2 && blocks["run_8gpu.sh"] != blocks["run_64gpu.sh"] {
		t.Errorf("the lines finding slurm/lib.sh differ between run_8gpu.sh and run_64gpu.sh:\n%s\n---\n%s",
			blocks["run_8gpu.sh"], blocks["run_64gpu.sh"])
	}
	if len(rest) == 2 {
		in8 := map[string]bool{}
		for _, l := range rest["run_8gpu.sh"] {
			in8[l] = true
		}
		for _, l := range rest["run_64gpu.sh"] {
			if in8[l] && l != "set -euo pipefail" {
				t.Errorf("%q is in both GPU scripts: a shared step belongs in slurm/lib.sh", l)
			}
		}
	}
}

// slurmStubs writes srun, longca and scontrol stand-ins into a folder of their own: each
// call is a line of $STUB_LOG; srun runs its command once; longca exits with
// $STUB_FAIL_<command> and logs the settings the job exports; scontrol prints $STUB_COMMAND
// as `scontrol show job` prints the submitted script (Command=), or fails when it is unset.
func slurmStubs(t *testing.T) string {
	bin := t.TempDir()
	stubs := map[string]string{
		"srun": `#!/usr/bin/env bash
echo "srun $*" >>"$STUB_LOG"
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
exec "$@"
`,
		"longca": `#!/usr/bin/env bash
echo "longca $*" >>"$STUB_LOG"
echo "MASTER_PORT=$MASTER_PORT NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE NCCL_DEBUG=$NCCL_DEBUG NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-} token=$LONGCA_JOB_TOKEN" >>"$STUB_LOG.env"
echo "longca $1 output"
v=STUB_FAIL_$1
exit "${!v:-0}"
`,
		"scontrol": `#!/bin/sh
[ -n "${STUB_COMMAND:-}" ] || exit 1
printf 'JobId=%s JobName=x\n   Command=%s\n   WorkDir=/\n' "$3" "$STUB_COMMAND"
`,
	}
	for name, body := range stubs {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// slurmRepo copies slurm/ into a folder standing for the repository, and the job script
// into a spool folder as sbatch does (.../slurm_script); it returns both paths.
func slurmRepo(t *testing.T, script string) (repo, spooled string) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("bash is needed to run the Slurm scripts: ", err)
	}
	repo, spool := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(repo, "slurm"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range append([]string{"lib.sh"}, slurmGPUScripts...) {
		b, err := os.ReadFile(filepath.Join("..", "..", "slurm", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, "slurm", f), b, 0o755); err != nil {
			t.Fatal(err)
		}
		if f == script {
			spooled = filepath.Join(spool, "slurm_script")
			if err := os.WriteFile(spooled, b, 0o700); err != nil {
				t.Fatal(err)
			}
		}
	}
	return repo, spooled
}

// slurmJob runs a script as the batch step: in dir, with the stubs first on PATH and env.
func slurmJob(t *testing.T, bin, dir, script string, env ...string) (code int, log []string, envLog, stderr string) {
	return slurmJobArgs(t, bin, dir, script, nil, env...)
}

// slurmJobArgs is slurmJob with the script's arguments (as `sbatch script ARG...` passes them).
func slurmJobArgs(t *testing.T, bin, dir, script string, args []string, env ...string) (code int, log []string, envLog, stderr string) {
	logf := filepath.Join(t.TempDir(), "calls")
	cmd := exec.Command("bash", append([]string{script}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "STUB_LOG=" + logf, "LONGCA=longca",
		"SLURM_JOB_ID=77", "SLURM_JOB_NODELIST=node1"}
	for _, kv := range os.Environ() { // none of the test's own job settings
		if !regexp.MustCompile(`^(PATH|SLURM_\w*|LONGCA\w*|NCCL_\w*|MASTER_\w*|STUB_\w*)=`).MatchString(kv) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	b, _ := os.ReadFile(logf)
	if s := strings.TrimSpace(string(b)); s != "" {
		log = strings.Split(s, "\n")
	}
	e, _ := os.ReadFile(logf + ".env")
	return code, log, string(e), errb.String()
}

func TestSlurmGPUScriptsRunTheSharedTail(t *testing.T) {
	const (
		common   = "srun --gpus-per-task=1 --gpu-bind=single:1 --cpu-bind=cores "
		defaults = "--methods ring-p2p,ring-allgather,ulysses,usp,loongtrain --masks full,causal,causal_document_long,full_document_long --tokens-per-rank 16K --kernel cuda --samples 5 --heads 64:8"
	)
	bin := slurmStubs(t)
	for _, script := range slurmGPUScripts {
		name := strings.TrimSuffix(strings.TrimPrefix(script, "run_"), ".sh") // 8gpu, 64gpu
		envCmd, cpOpts := "longca env --backend nccl", ""
		if name == "64gpu" {
			envCmd, cpOpts = "longca env --format json --backend nccl", "--kill-on-bad-exit=1 "
		}
		out := "out/cp-" + name + "-77"
		calls := func(run, args string, merge bool) []string {
			c := []string{common + envCmd, envCmd,
				common + cpOpts + "longca cp --backend nccl --out " + out + " --run-id " + run + " " + args,
				"longca cp --backend nccl --out " + out + " --run-id " + run + " " + args}
			if merge {
				c = append(c, "longca merge --parquet "+out)
			}
			return c
		}
		for _, c := range []struct {
			name  string
			env   []string
			code  int
			calls []string
		}{
			{"ok", nil, 0, calls("job77", defaults, true)},
			// merged even when cp fails; the job exits with cp's status
			{"cp fails", []string{"STUB_FAIL_cp=3"}, 3, calls("job77", defaults, true)},
			{"merge fails", []string{"STUB_FAIL_merge=2"}, 2, calls("job77", defaults, true)},
			{"both fail", []string{"STUB_FAIL_cp=3", "STUB_FAIL_merge=2"}, 3, calls("job77", defaults, true)},
			// set -e: a failed env step ends the job with its status, before cp
			{"env fails", []string{"STUB_FAIL_env=5"}, 5, calls("job77", defaults, false)[:2]},
			{"requeued", []string{"SLURM_RESTART_COUNT=2"}, 0, calls("job77-requeue2", defaults, true)},
			{"own args", []string{"LONGCA_CP_ARGS=--methods ulysses  --masks causal"}, 0, calls("job77", "--methods ulysses --masks causal", true)},
		} {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				repo, spooled := slurmRepo(t, script)
				env := append([]string{"SLURM_SUBMIT_DIR=" + repo}, c.env...)
				code, log, envLog, stderr := slurmJob(t, bin, repo, spooled, env...)
				if code != c.code || strings.Join(log, "\n") != strings.Join(c.calls, "\n") {
					t.Errorf("exit %d, want %d; calls:\n%s\nwant:\n%s\nstderr:\n%s", code, c.code,
						strings.Join(log, "\n"), strings.Join(c.calls, "\n"), stderr)
				}
				if fi, err := os.Stat(filepath.Join(repo, out)); err != nil || !fi.IsDir() {
					t.Errorf("results folder %s not made: %v", out, err)
				}
				for _, l := range strings.Split(strings.TrimSpace(envLog), "\n") {
					if !regexp.MustCompile(`^MASTER_PORT=20077 NCCL_NVLS_ENABLE=0 NCCL_DEBUG=WARN NCCL_SOCKET_IFNAME= token=[0-9a-f]{48}$`).MatchString(l) {
						t.Errorf("longca ran with %q", l)
					}
				}
				if name == "64gpu" {
					run := "job77"
					if c.name == "requeued" {
						run = "job77-requeue2"
					}
					b, err := os.ReadFile(filepath.Join(repo, out, run+".env.jsonl"))
					if err != nil || string(b) != "longca env output\n" {
						t.Errorf("%s.env.jsonl: %q, %v", run, b, err)
					}
				}
			})
		}
	}
	t.Run("64gpu/fabric", func(t *testing.T) {
		repo, spooled := slurmRepo(t, "run_64gpu.sh")
		code, _, envLog, stderr := slurmJob(t, bin, repo, spooled, "SLURM_SUBMIT_DIR="+repo,
			"LONGCA_IFNAME=ib0", "MASTER_PORT=1234", "LONGCA_JOB_TOKEN=abc")
		if code != 0 || !strings.Contains(envLog, "MASTER_PORT=1234 NCCL_NVLS_ENABLE=0 NCCL_DEBUG=WARN NCCL_SOCKET_IFNAME=ib0 token=abc\n") {
			t.Errorf("exit %d, longca ran with %q\n%s", code, envLog, stderr)
		}
	})
}

// Where the job scripts find slurm/lib.sh: sbatch's copy in its spool folder has no lib.sh
// beside it.
func TestSlurmGPUScriptsFindLib(t *testing.T) {
	bin := slurmStubs(t)
	for _, script := range slurmGPUScripts {
		repo, spooled := slurmRepo(t, script)
		elsewhere := t.TempDir()
		// A copy of the script kept beside another project's lib.sh (submitted from the
		// repository, or from that project): longca's lib.sh is sourced, or none. The other
		// had been sourced: it ran its own commands, then the job died of a missing function
		// (exit 127), or ended with the other file's exit status having run no step.
		jobs := filepath.Join(t.TempDir(), "my jobs") // and a space in its path
		if err := os.MkdirAll(jobs, 0o755); err != nil {
			t.Fatal(err)
		}
		copied := filepath.Join(jobs, script)
		foreign := "# another project's\necho foreign lib.sh sourced >&2\nexit 0\n"
		for f, body := range map[string]string{script: "", "lib.sh": foreign} {
			if f == script {
				b, _ := os.ReadFile(spooled)
				body = string(b)
			}
			if err := os.WriteFile(filepath.Join(jobs, f), []byte(body), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			name, dir, script string
			env               []string
		}{
			{"submitted from the repository", repo, spooled, []string{"SLURM_SUBMIT_DIR=" + repo}},
			{"submitted by its absolute path", elsewhere, spooled,
				[]string{"SLURM_SUBMIT_DIR=" + elsewhere, "STUB_COMMAND=" + filepath.Join(repo, "slurm", script)}},
			{"submitted by a relative path", elsewhere, spooled,
				[]string{"SLURM_SUBMIT_DIR=" + repo + "/slurm", "STUB_COMMAND=" + script}},
			{"LONGCA_SLURM_LIB_DIR", elsewhere, spooled,
				[]string{"SLURM_SUBMIT_DIR=" + elsewhere, "LONGCA_SLURM_LIB_DIR=" + filepath.Join(repo, "slurm")}},
			// scripts/slurm-up.sh's state folder (scripts/test.sh exports it) is not looked in
			{"LONGCA_SLURM_DIR is slurm-up.sh's", repo, spooled,
				[]string{"SLURM_SUBMIT_DIR=" + repo, "LONGCA_SLURM_DIR=" + jobs}},
			{"run by bash", elsewhere, filepath.Join(repo, "slurm", script), nil},
		} {
			t.Run(script+"/"+c.name, func(t *testing.T) {
				code, log, _, stderr := slurmJob(t, bin, c.dir, c.script, c.env...)
				if code != 0 || len(log) != 5 || !strings.HasPrefix(log[4], "longca merge --parquet ") {
					t.Errorf("exit %d, calls:\n%s\nstderr:\n%s", code, strings.Join(log, "\n"), stderr)
				}
			})
		}
		// Slurm's Command= is the script as submitted and then its arguments, joined by
		// spaces (Slurm 22.05: "Command=/x y/slurm/run_8gpu.sh a/b c d"); a symbolic link
		// submitted is shown as given (Command=./link.sh). An argument with a / had sent the
		// search to "/x y/slurm/run_8gpu.sh a", and a link to the link's folder: submitted
		// from another folder, both jobs exited 2 saying lib.sh was not found (shown on a
		// one-node Slurm cluster, scripts/slurm-up.sh).
		linkDir := filepath.Join(t.TempDir(), "my links")
		if err := os.MkdirAll(linkDir, 0o755); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(linkDir, "job.sh")
		if err := os.Symlink(filepath.Join(repo, "slurm", script), link); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name, dir, script string
			args, env         []string
		}{
			{"submitted by its absolute path with arguments", elsewhere, spooled, []string{"a/b", "c d"},
				[]string{"SLURM_SUBMIT_DIR=" + elsewhere, "STUB_COMMAND=" + filepath.Join(repo, "slurm", script) + " a/b c d"}},
			{"submitted by a relative path with arguments", elsewhere, spooled, []string{"/", "x/"},
				[]string{"SLURM_SUBMIT_DIR=" + repo, "STUB_COMMAND=slurm/" + script + " / x/"}},
			{"submitted through a symbolic link", linkDir, spooled, nil,
				[]string{"SLURM_SUBMIT_DIR=" + linkDir, "STUB_COMMAND=./job.sh"}},
			{"submitted through a symbolic link with arguments", linkDir, spooled, []string{"p/q"},
				[]string{"SLURM_SUBMIT_DIR=" + linkDir, "STUB_COMMAND=" + link + " p/q"}},
			{"run by bash through a symbolic link", elsewhere, link, nil, nil},
			// scontrol's line ends at an argument's line break
			{"submitted with an argument of two lines", elsewhere, spooled, []string{"x", "a/b\nc/d"},
				[]string{"SLURM_SUBMIT_DIR=" + elsewhere, "STUB_COMMAND=" + filepath.Join(repo, "slurm", script) + " x a/b\nc/d"}},
			// an older Slurm shows the script alone
			{"submitted with arguments, Command= without them", elsewhere, spooled, []string{"a/b"},
				[]string{"SLURM_SUBMIT_DIR=" + elsewhere, "STUB_COMMAND=" + filepath.Join(repo, "slurm", script)}},
		} {
			t.Run(script+"/"+c.name, func(t *testing.T) {
				code, log, _, stderr := slurmJobArgs(t, bin, c.dir, c.script, c.args, c.env...)
				if code != 0 || len(log) != 5 || !strings.HasPrefix(log[4], "longca merge --parquet ") {
					t.Errorf("exit %d, calls:\n%s\nstderr:\n%s", code, strings.Join(log, "\n"), stderr)
				}
			})
		}
		t.Run(script+"/beside another lib.sh", func(t *testing.T) {
			code, log, _, stderr := slurmJob(t, bin, repo, spooled, "SLURM_SUBMIT_DIR="+repo, "STUB_COMMAND="+copied)
			if code != 0 || len(log) != 5 || strings.Contains(stderr, "foreign") {
				t.Errorf("exit %d, calls:\n%s\nstderr:\n%s\nwant the repository's lib.sh, not the one beside the copy", code, strings.Join(log, "\n"), stderr)
			}
		})
		t.Run(script+"/run by bash beside another lib.sh", func(t *testing.T) {
			code, log, _, stderr := slurmJob(t, bin, repo, copied, "SLURM_SUBMIT_DIR="+repo)
			if code != 0 || len(log) != 5 || strings.Contains(stderr, "foreign") {
				t.Errorf("exit %d, calls:\n%s\nstderr:\n%s\nwant the repository's lib.sh, not the one beside the copy", code, strings.Join(log, "\n"), stderr)
			}
		})

		// Not found: one line naming the setting that finds it, exit 2 (a usage error, as
		// longca's), before any step. LONGCA_SLURM_LIB_DIR set to a folder without it is named,
		// and no other folder is taken for it.
		notFound := func(t *testing.T, dir string, env ...string) string {
			code, log, _, stderr := slurmJob(t, bin, dir, spooled, env...)
			if code != 2 || len(log) != 0 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 ||
				!strings.Contains(stderr, "slurm/lib.sh") || !strings.Contains(stderr, "LONGCA_SLURM_LIB_DIR=/path/to/longca/slurm") {
				t.Errorf("exit %d, calls %q, stderr %q: want exit 2 before any step, in one line naming lib.sh and LONGCA_SLURM_LIB_DIR=/path/to/longca/slurm", code, log, stderr)
			}
			if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
				t.Error("out/ made before lib.sh was found")
			}
			return stderr
		}
		t.Run(script+"/not found", func(t *testing.T) {
			elsewhere := t.TempDir()
			notFound(t, elsewhere, "SLURM_SUBMIT_DIR="+elsewhere)
		})
		t.Run(script+"/only another lib.sh", func(t *testing.T) {
			notFound(t, jobs, "SLURM_SUBMIT_DIR="+jobs, "STUB_COMMAND="+copied)
		})
		t.Run(script+"/not in LONGCA_SLURM_LIB_DIR", func(t *testing.T) {
			// the repository's lib.sh would be found were the setting not given
			repo, _ := slurmRepo(t, script)
			if stderr := notFound(t, repo, "SLURM_SUBMIT_DIR="+repo, "LONGCA_SLURM_LIB_DIR="+jobs); !strings.Contains(stderr, "LONGCA_SLURM_LIB_DIR="+jobs+":") {
				t.Errorf("stderr %q does not name LONGCA_SLURM_LIB_DIR's folder, %s", stderr, jobs)
			}
		})
	}
}

// The GPU jobs' settings are none of scripts/slurm-up.sh's and slurm-down.sh's: the jobs had
// found lib.sh through LONGCA_SLURM_DIR, which those scripts (and scripts/test.sh, which
// exports it) take for the one-node cluster's state, logs and pid files, so the jobs' advice
// (LONGCA_SLURM_DIR=/path/to/longca/slurm) put a cluster's state into the repository's
// slurm/ and left slurm-down.sh looking there for its pid files.
func TestSlurmGPUScriptsSettingsAreTheirOwn(t *testing.T) {
	names := func(files ...string) map[string]bool {
		set := map[string]bool{}
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join("..", "..", f))
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range slurmCodeLines(string(b)) { // (a comment may name the other's)
				for _, n := range regexp.MustCompile(`\bLONGCA_\w+`).FindAllString(l, -1) {
					set[n] = true
				}
			}
		}
		return set
	}
	cluster := names("scripts/slurm-up.sh", "scripts/slurm-down.sh")
	if !cluster["LONGCA_SLURM_DIR"] {
		t.Fatalf("scripts/slurm-up.sh no longer reads LONGCA_SLURM_DIR (%v): update this test", cluster)
	}
	for n := range names("slurm/lib.sh", "slurm/run_8gpu.sh", "slurm/run_64gpu.sh") {
		if cluster[n] {
			t.Errorf("%s is read by the GPU job scripts and by scripts/slurm-up.sh or slurm-down.sh, for another thing", n)
		}
	}
}
