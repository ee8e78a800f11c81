#!/usr/bin/env python3
"""Call 61's promotion (prepared 2026-12-05, eleventh session): make the winners among the
experiments sm90fr, sm90f3, sm90bl and sm90mo part of sm90 in kernels/cuda/kernel.go.

    python3 scripts/device/promote61.py sm90f3 sm90bl     (then: go test ./kernels/cuda; make device)

- their defines join sm90Defines (sm90fr: LONGCA_FWD_RA; sm90f3: LONGCA_FWD_RA and
  LONGCA_FWD_S3; sm90bl: LONGCA_BWD_LV2), so every variant on sm90Defines (sm90 and the
  rule sides) compiles them;
- with sm90f3, every variant on sm90Defines (a remaining experiment too) whose forward is
  fwdSM90OMO asks for the three-stage forward's shared memory (fwdSM90OMO3;
  TestForwardSharedMatchesLayout checks it);
- the promoted experiments' own variants are removed, and a remaining experiment keeps only
  the defines sm90 lacks (removed when none is left);
- with sm90mo, every variant on sm90Defines ordered by the rule weighs L2 too (orderL2);
- sm90's doc names what it took.
The kernel source's comments that call them experiments are reworded by hand."""
import re
import sys

ADDS = {"sm90fr": ["LONGCA_FWD_RA"], "sm90f3": ["LONGCA_FWD_RA", "LONGCA_FWD_S3"], "sm90bl": ["LONGCA_BWD_LV2"], "sm90mo": []}
DOCS = {
    "sm90fr": "; the overlapped forward reads the work list's entry a turn ahead (call 61's sm90fr)",
    "sm90f3": "; at head dim 64 the forward's K/V ring three stages deep (call 61's sm90f3)",
    "sm90bl": "; at head dim 128 the unpaired backward reads lse and Dsum as 8-byte pairs (call 61's sm90bl)",
    "sm90mo": "; the backward's block order weighs L2 at head dim 128 (orderThrashes: call 61's sm90mo)",
}


def main(argv):
    winners = argv[1:]
    if not winners or any(w not in ADDS for w in winners):
        sys.exit("usage: promote61.py WINNER... (of sm90fr, sm90f3, sm90bl, sm90mo)")
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
        if name in ADDS:  # an experiment: keep only what sm90 still lacks
            extra = [d for d in ADDS[name] if d not in have]
            if name in winners or not extra and name != "sm90mo":
                continue
            line = re.sub(r'defines: append\(slices\.Clone\(sm90Defines\), [^)]*\)\}',
                          'defines: append(slices.Clone(sm90Defines), ' + ", ".join('"%s"' % d for d in extra) + ')}', line)
        if "sm90mo" in winners and re.search(r"\bsm90Defines\b", line) and "sched: schedByRule, " in line and "orderL2: true" not in line:
            line = line.replace("sched: schedByRule, ", "sched: schedByRule, orderL2: true, ")
        if "sm90f3" in winners and re.search(r"\bsm90Defines\b", line) and "fwd: fwdSM90OMO," in line:
            line = line.replace("fwd: fwdSM90OMO,", "fwd: fwdSM90OMO3,")
        if name == "sm90":
            i = line.index('", major: 9')
            line = line[:i] + "".join(DOCS[w] for w in winners if not (w == "sm90fr" and "sm90f3" in winners)) + line[i:]
        out.append(line)
    src = "\n".join(out)
    if not re.search(r"\bslices\.[A-Z]", src):
        src = src.replace('\t"slices"\n', "")
    open(path, "w").write(src)
    print("sm90Defines:", ", ".join(have))


if __name__ == "__main__":
    main(sys.argv)
