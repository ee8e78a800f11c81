#!/usr/bin/env python3
"""Static clocks of the sm90 forward's loop, from ptxas's control bits (no GPU).

Each sm_90 instruction carries a stall count (bits 105-108 of its 128 bits: the clocks its
warp waits before issuing the next instruction, ptxas's static schedule; variable-latency
waits on scoreboards come on top). Summed over a stretch of straight-line code they give
that stretch's issue time for one warp with the machine to itself: docs/perf.md uses it
for the softmax of the forward's overlapped loop (from the first FMNMX after the turn's
products to the wait for P V), where ptxas spaces a warp's MUFU.EX2 8 clocks apart.

  cuobjdump -sass -fun fwd90mo_bf16_d64 X.cubin > X.sass
  python3 scripts/sass-clocks.py X.sass [Y.sass ...]     one line each
  python3 scripts/sass-clocks.py --seq X.sass             and the softmax, instruction by
                                                          instruction (clock: opcode)

The cubins come from scripts/offline-nvrtc.sh with LONGCA_OFFLINE_CUBIN_DIR set.
"""
import collections
import re
import sys


def parse(path):
    """[(address, text, stall)] of a cuobjdump -sass listing (two comment words a line pair)."""
    lines = open(path).read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        m = re.match(r"\s+/\*([0-9a-f]+)\*/\s+([^;]*);\s*/\* (0x[0-9a-f]+) \*/", lines[i])
        if m and i + 1 < len(lines):
            hi = re.search(r"/\* (0x[0-9a-f]+) \*/", lines[i + 1])
            if hi:
                out.append((int(m.group(1), 16), m.group(2).strip(), (int(hi.group(1), 16) >> 41) & 15))
                i += 2
                continue
        i += 1
    return out


def opcode(text):
    t = text.split()
    op = t[1] if t[0].startswith("@") and len(t) > 1 else t[0]
    return op.split(".")[0]


def loop_of(ins):
    """The overlapped loop: from the target of the backward branch that closes the turn
    barrier's loop (BAR.SYNC ... 0x100) to that branch."""
    heads = [a for a, t, _ in ins if re.search(r"BAR\.SYNC\.DEFER_BLOCKING R\d+, 0x100", t)]
    if not heads:
        raise SystemExit("no turn barrier (BAR.SYNC.DEFER_BLOCKING Rn, 0x100): not an sm90 forward?")
    h = heads[0]
    for a, t, _ in ins:
        m = re.search(r"BRA\s+0x([0-9a-f]+)", t)
        if a > h and m and int(m.group(1), 16) <= h:
            start = int(m.group(1), 16)
            return [x for x in ins if start <= x[0] <= a]
    raise SystemExit("no backward branch closes the turn barrier's loop")


def softmax_of(body):
    """From the first FMNMX to the wait for P V (WARPGROUP.DEPBAR.LE gsb0, 0x0)."""
    a = next(i for i, x in enumerate(body) if opcode(x[1]) == "FMNMX")
    b = next(i for i, x in enumerate(body) if i > a and "DEPBAR.LE gsb0, 0x0" in x[1])
    return body[a : b + 1]


def main(args):
    seq = "--seq" in args
    for path in [a for a in args if a != "--seq"]:
        body = loop_of(parse(path))
        sm = softmax_of(body)
        ops = collections.Counter(opcode(t) for _, t, _ in body)
        top = " ".join(f"{k} {v}" for k, v in ops.most_common(8))
        print(f"{path}: loop {len(body)} instructions ({top}); softmax {len(sm)} instructions, "
              f"{sum(s for _, _, s in sm)} static clocks, MUFU {sum(1 for _, t, _ in sm if opcode(t) == 'MUFU')}")
        if seq:
            clock, run, last, n, at = 0, [], None, 0, 0
            for _, t, s in sm:
                op = opcode(t)
                if op != last:
                    if last:
                        run.append(f"{at}:{last}" + (f"x{n}" if n > 1 else ""))
                    last, n, at = op, 0, clock
                n += 1
                clock += s
            run.append(f"{at}:{last}" + (f"x{n}" if n > 1 else ""))
            print(" ".join(run))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    main(sys.argv[1:])
