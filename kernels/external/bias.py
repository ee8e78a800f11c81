#!/usr/bin/env python3
"""The timing bias of longca's worker protocol, measured (kernels/external/gpu.sh step 2).

Times torch SDPA's cuDNN and FlashAttention-2 backends on full 16K, 64:8 heads, head dim
128, bf16, forward and backward, inside this process in two ways: (1) CUDA events around
each repetition with the L2 flushed before it (256 MB written), 5 warm-ups and 20
repetitions, median, without hiding launch latency; (2) triton.testing.do_bench (the way
the standalone numbers of DEVICE.md were taken). gpu.sh compares both with the same
kernels timed through `longca kernel`. Writes JSON {kernel: {pass: {events_ms,
do_bench_ms, flops}}} to --out.
"""
import argparse, json, statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

S, HQ, HKV, D = 16384, 64, 8, 128
BACKENDS = {"torch:cudnn": SDPBackend.CUDNN_ATTENTION, "torch:flash": SDPBackend.FLASH_ATTENTION}


def events(fn, warmup=5, iters=20):
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for _ in range(warmup + 1):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.manual_seed(42)
    q = torch.randn(1, HQ, S, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(1, HKV, S, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(1, HKV, S, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    flops = 4 * S * S * HQ * D
    res = {}
    for name, be in BACKENDS.items():
        def fwd(be=be):
            with sdpa_kernel(be):
                return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        try:
            out = fwd()
            dout = torch.randn_like(out)
            bwd = lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
            r = {}
            for p, fn, f in (("fwd", fwd, flops), ("bwd", bwd, 2.5 * flops)):
                ev = events(fn)
                try:
                    from triton.testing import do_bench
                    db = do_bench(fn, warmup=25, rep=100, return_mode="median")
                except Exception as e:  # triton missing: events only
                    print(f"{name} {p}: do_bench: {e}")
                    db = float("nan")
                r[p] = {"events_ms": ev, "do_bench_ms": db, "flops": f}
                print(f"{name} {p}: events {ev:.3f} ms ({f / ev / 1e9:.1f} TFLOP/s), do_bench {db:.3f} ms")
            res[name] = r
            del out
        except Exception as e:
            print(f"{name}: {type(e).__name__}: {e}")
        torch.cuda.empty_cache()
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
