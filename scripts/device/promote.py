#!/usr/bin/env python3
"""DONE 2026-12-05 (32497d1: sm90n sm90mo sm90bl; the others removed in 4fdd6ad, so only
those three names still match kernel.go; kept as the record of the edit). Calls 61-63's promotion (prepared 2026-12-05, eleventh and twelfth sessions): make the
winners among the experiments sm90fr, sm90f3, sm90bl, sm90mo (call 61), sm90n (call 62),
sm90p and sm90pr (call 63) part of sm90 in kernels/cuda/kernel.go.

    python3 scripts/device/promote.py sm90f3 sm90bl     (then: go test ./kernels/cuda; make device)

- their defines join sm90Defines (sm90fr: LONGCA_FWD_RA; sm90f3: LONGCA_FWD_RA and
  LONGCA_FWD_S3; sm90bl: LONGCA_BWD_LV2), so every variant on sm90Defines (sm90 and the
  rule sides) compiles them;
- with sm90f3, every variant on sm90Defines (a remaining experiment too) whose forward is
  fwdSM90OMO asks for the three-stage forward's shared memory (fwdSM90OMO3;
  TestForwardSharedMatchesLayout checks it);
- the promoted experiments' own variants are removed, and a remaining experiment keeps only
  the defines sm90 lacks (removed when none is left);
- with sm90mo, every variant on sm90Defines ordered by the rule weighs L2 too (orderL2);
- with sm90n, every variant on sm90Defines with the 64-key tile rule runs the wide forward
  on long rows where it pays (wide: 1), and sm90n-plain goes (sm90's GPU tests then check
  the wide forward on TestLongRows' head-dim-128 rows);
- with sm90p (or sm90pr), every variant on sm90Defines with the 64-key tile rule runs the
  head-dim-64 forward over 192 x 192 tiles with P in shared memory where its rule says so
  (psm: 1, widerTilesPay), and sm90p-all goes (sm90's GPU tests then check it on TestLongRows'
  head-dim-64 rows and wherever the rule takes it); a narrower rule (192 x 128 on causal masks, as FlashAttention-3 does)
  is code of its own, to write if call 63 asks for one;
- sm90's doc names what it took.
The kernel source's comments that call them experiments are reworded by hand."""
import re
import sys

ADDS = {"sm90fr": ["LONGCA_FWD_RA"], "sm90f3": ["LONGCA_FWD_RA", "LONGCA_FWD_S3"], "sm90bl": ["LONGCA_BWD_LV2"], "sm90mo": [],
        "sm90n": ["LONGCA_FWD_WIDE"], "sm90p": ["LONGCA_FWD_PSM"], "sm90pr": ["LONGCA_FWD_PSM", "LONGCA_FWD_RA"]}
FLAG_ONLY = {"sm90mo"}  # experiments that are a host flag, no define: kept until promoted
DOCS = {
    "sm90fr": "; the overlapped forward reads the work list's entry a turn ahead (call 61's sm90fr)",
    "sm90f3": "; at head dim 64 the forward's K/V ring three stages deep (call 61's sm90f3)",
    "sm90bl": "; at head dim 128 the unpaired backward reads lse and Dsum as 8-byte pairs (call 61's sm90bl)",
    "sm90mo": "; the backward's block order weighs L2 at head dim 128 (orderThrashes: call 61's sm90mo)",
    "sm90n": "; at head dim 128 the forward over 128 x 176 tiles where it is not persistent (call 62's sm90n; rows say wide-fwd)",
    "sm90p": "; at head dim 64 the forward over 192 x 192 tiles with P through shared memory (call 63's sm90p)",
    "sm90pr": "; at head dim 64 the forward over 192 x 192 tiles with P through shared memory (call 63's sm90pr)",
}


def main(argv):
    winners = argv[1:]
    if not winners or any(w not in ADDS for w in winners):
        sys.exit("usage: promote.py WINNER... (of " + ", ".join(ADDS) + ")")
    if "sm90p" in winners and "sm90pr" in winners:
        sys.exit("promote.py: sm90p or sm90pr, not both")
    path = "kernels/cuda/kernel.go"
    src = open(path).read()
    m = re.search(r'^var sm90Defines = \[\]string\{(.*)\}$', src, re.M)
    if not m:
        sys.exit("kernel.go: no sm90Defines line")
    have = re.findall(r'"([A-Z0-9_]+)"', m.group(1))
    for w in winners:
        for d in ADDS[w]:
            if d not in have:
                have.append(d)
    src = src[:m.start()] + "var sm90Defines = []string{" + ", ".join('"%s"' % d for d in have) + "}" + src[m.end():]
    out = []
    for line in src.split("\n"):
        v = re.match(r'\t\{name: "([^"]+)", ', line)
        if not v:
            out.append(line)
            continue
        name = v.group(1)
        if name == "sm90n-plain" and "sm90n" in winners or name == "sm90p-all" and ("sm90p" in winners or "sm90pr" in winners):
            continue  # sm90-plain (never persistent) then tests the wide forward; sm90p-all's tests were the experiment's
        if name in ADDS:  # an experiment: keep only what sm90 still lacks
            extra = [d for d in ADDS[name] if d not in have]
            if name in winners or not extra and name not in FLAG_ONLY:
                continue
            line = re.sub(r'defines: append\(slices\.Clone\(sm90Defines\), [^)]*\)\}',
                          'defines: append(slices.Clone(sm90Defines), ' + ", ".join('"%s"' % d for d in extra) + ')}', line)
        if "sm90mo" in winners and re.search(r"\bsm90Defines\b", line) and "sched: schedByRule, " in line and "orderL2: true" not in line:
            line = line.replace("sched: schedByRule, ", "sched: schedByRule, orderL2: true, ")
        if "sm90f3" in winners and re.search(r"\bsm90Defines\b", line) and "fwd: fwdSM90OMO," in line:
            line = line.replace("fwd: fwdSM90OMO,", "fwd: fwdSM90OMO3,")
        if "sm90n" in winners and re.search(r"\bsm90Defines\b", line) and "k64: true, " in line and "wide: " not in line:
            line = line.replace("k64: true, ", "k64: true, wide: 1, ")
        if ("sm90p" in winners or "sm90pr" in winners) and re.search(r"\bsm90Defines\b", line) and "k64: true, " in line and "psm: " not in line:
            line = line.replace("k64: true, ", "k64: true, psm: 1, ")
        if name == "sm90":
            i = line.index('", major: 9')
            line = line[:i] + "".join(DOCS[w] for w in winners if not (w == "sm90fr" and ("sm90f3" in winners or "sm90pr" in winners))) + line[i:]
        out.append(line)
    src = "\n".join(out)
    if not re.search(r"\bslices\.[A-Z]", src):
        src = src.replace('\t"slices"\n', "")
    open(path, "w").write(src)
    print("sm90Defines:", ", ".join(have))


if __name__ == "__main__":
    main(sys.argv)
