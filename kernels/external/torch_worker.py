#!/usr/bin/env python3
"""longca's PyTorch worker: external-kernel protocol 1 (docs/external-kernels.md).

longca embeds this file and starts it as `PYTHON -u longca_torch_worker.py --device N`,
one process per rank, shared by the kernels it serves:

  flash      PyTorch SDPA, FlashAttention-2 backend (full and causal masks)
  cudnn      PyTorch SDPA, cuDNN backend (full and causal masks)
  efficient  PyTorch SDPA, memory-efficient backend (full and causal masks)
  flex       FlexAttention (any mask given as slices; per-KV-head block-sparse grids)
  varlen     torch.nn.attention.varlen.varlen_attn, FlashAttention's varlen path (PyTorch
             2.10+): documents packed by cumulative offsets, full or causal, and sliding
             windows, wherever the mask is exactly such a packing

It reads one JSON request a line on stdin and writes one JSON reply a line on stdout
(the real stdout: anything a library prints goes to stderr). `--cpu` (tests only) runs
FlexAttention eagerly on the CPU, so the protocol, the layouts and the block masks can be
checked on a machine without a GPU. `--varlen-plan` (tests only, no torch needed) reads
problems as JSON lines on stdin and writes how varlen_attn would serve each (documents and
window) or why it cannot, one JSON line each.
"""
import dataclasses
import gc
import inspect
import json
import math
import os
import platform
import sys
import time
import traceback
import warnings

PROTOCOL = 1
WORKER = "longca-torch"
DTYPES = ("bf16", "fp16", "fp32", "fp64")
NPY_DESCR = {"bf16": "<u2", "fp16": "<f2", "fp32": "<f4", "fp64": "<f8"}
# Masks up to this many (q, k) pairs per mask are checked element by element against the
# block mask FlexAttention gets (the check's small cases always are).
VERIFY_PAIRS = 1 << 26
# The kernels this worker serves: name, what it is, the masks it takes.
KERNELS = (
    ("flash", "PyTorch SDPA, FlashAttention-2 backend", "full, causal"),
    ("cudnn", "PyTorch SDPA, cuDNN backend", "full, causal"),
    ("efficient", "PyTorch SDPA, memory-efficient backend", "full, causal"),
    ("flex", "PyTorch FlexAttention", "any (slices); per-KV-head grids"),
    ("varlen", "PyTorch varlen_attn (FlashAttention varlen)",
     "full, causal, full_document, causal_document, sliding windows (one window over the whole sequence)"),
)


class Unsupported(Exception):
    """This kernel cannot run this problem here: status unsupported."""


class Problem:
    """A request's problem (docs/external-kernels.md, "The problem")."""

    def __init__(self, d):
        try:
            self.sq, self.sk = int(d["seqlen_q"]), int(d["seqlen_k"])
            self.hq, self.hkv, self.d = int(d["heads_q"]), int(d["heads_kv"]), int(d["head_dim"])
            self.dtype = d["dtype"]
            self.scale = float(d["scale"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"bad problem: {e!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"bad problem: dtype {self.dtype!r}")
        if min(self.sq, self.sk, self.hq, self.hkv, self.d) <= 0 or self.hq % self.hkv:
            raise ValueError("bad problem: sizes must be positive and heads_q a multiple of heads_kv")
        self.slices, self.grid = None, None
        if d.get("mask") is not None:
            self.slices = []
            for s in d["mask"].get("slices") or []:
                (qs, qe), (ks, ke), kind = s["q"], s["k"], s["kind"].lower()
                if kind not in ("full", "causal", "invcausal", "bicausal"):
                    raise ValueError(f"bad problem: slice kind {kind!r}")
                if not (0 <= qs < qe <= self.sq and 0 <= ks < ke <= self.sk):
                    raise ValueError(f"bad problem: slice q {s['q']} k {s['k']} outside {self.sq}x{self.sk}")
                self.slices.append((int(qs), int(qe), int(ks), int(ke), kind))
        elif d.get("grid") is not None:
            g = d["grid"]
            self.grid = (list(map(int, g["q_edges"])), list(map(int, g["k_edges"])), g["kept"])
        else:
            raise ValueError("bad problem: neither mask nor grid")
        self.key = json.dumps(d, sort_keys=True)

    def whole(self):
        """full or causal when the mask is one such slice over the whole matrix, else None."""
        if self.slices is None or len(self.slices) != 1:
            return None
        qs, qe, ks, ke, kind = self.slices[0]
        if (qs, qe, ks, ke) == (0, self.sq, 0, self.sk) and kind in ("full", "causal"):
            return kind
        return None


def band(s):
    """A slice's allowed diagonal offsets lo <= k - q <= hi (None: unbounded), MASKS.md:
    causal is bottom-right aligned (k <= q + ke - qe), invcausal top-left."""
    qs, qe, ks, ke, kind = s
    lo = ks - qs if kind in ("invcausal", "bicausal") else None
    hi = ke - qe if kind in ("causal", "bicausal") else None
    return lo, hi


def row_intervals(slices, sq):
    """The most key intervals any query row has: row q of a slice allows the keys
    [max(ks, q+lo), min(ke, q+hi+1)), one interval a slice, and slices never overlap, so a
    row's intervals are disjoint and as many as the slices its row meets."""
    cover = [0] * (sq + 1)
    for qs, qe, _, _, _ in slices:
        cover[qs] += 1
        cover[qe] -= 1
    j, run = 0, 0
    for c in cover:
        run += c
        j = max(j, run)
    return j


def flex_slots(j):
    """The number of interval slots FlexAttention's mask_mod is compiled for: 2 covers
    every mask longca builds; more are rounded up to a power of two (fewer recompiles)."""
    n = 2
    while n < j:
        n *= 2
    return n


def row_spans(slices, sq):
    """Every query row's allowed keys as one interval: lists lo, hi with row q allowing
    [lo[q], hi[q]) (None for a row no key allows). Raises Unsupported when a row's keys
    are not one interval (touching intervals of two slices are merged)."""
    spans = [None] * sq
    for s in slices:
        qs, qe, ks, ke, _ = s
        blo, bhi = band(s)
        for q in range(qs, qe):
            l = ks if blo is None else max(ks, q + blo)
            h = ke if bhi is None else min(ke, q + bhi + 1)
            if l >= h:
                continue
            if spans[q] is None:
                spans[q] = [(l, h)]
            else:
                spans[q].append((l, h))
    lo, hi = [None] * sq, [None] * sq
    for q, sp in enumerate(spans):
        if sp is None:
            continue
        sp.sort()
        a, b = sp[0]
        for l, h in sp[1:]:
            if l > b:
                raise Unsupported(f"query row {q} attends to separate key ranges [{a}, {b}) and [{l}, {h}): "
                                  "varlen_attn gives a row one contiguous range")
            b = max(b, h)
        lo[q], hi[q] = a, b
    return lo, hi


def varlen_plan(slices, sq, sk):
    """How torch.nn.attention.varlen.varlen_attn serves a mask exactly, or Unsupported
    with the reason. varlen_attn packs documents [cu[i], cu[i+1]) that attend only within
    themselves, and within a document of n tokens query i attends key j when
    i - left <= j <= i + right (FlashAttention's window, aligned bottom-right: for a
    square document, as here, the same as top-left; -1 is unbounded, (-1, 0) causal).
    Two forms are found from the rows' key intervals, and the mask must equal one of them
    row by row:
      documents: every row's keys start at its document's first token (rows grouped by
        that start, each group a square on the diagonal), and end at the document's end
        (full, window (-1, -1)) or at the row itself (causal, (-1, 0)), the same rule in
        every document;
      one window: one document over the whole sequence, keys [q - left, q + right].
    Returns {"docs": [(start, end), ...], "window": (left, right), "form": str}."""
    if sq != sk:
        raise Unsupported(f"varlen_attn here serves masks with seqlen_q == seqlen_k (documents on the diagonal), "
                          f"not {sq} x {sk}")
    lo, hi = row_spans(slices, sq)
    for q in range(sq):
        if lo[q] is None:
            raise Unsupported(f"query row {q} attends to no key: varlen_attn's documents give every row keys")
    docs, q = [], 0
    while q < sq and lo[q] == q:
        e = q + 1
        while e < sq and lo[e] == q:
            e += 1
        docs.append((q, e))
        q = e
    if q == sq:
        if all(hi[r] == e for s, e in docs for r in range(s, e)):
            return {"docs": docs, "window": (-1, -1), "form": "full documents"}
        if all(hi[r] == r + 1 for r in range(sq)):
            return {"docs": docs, "window": (-1, 0), "form": "causal documents"}
    left = max(r - lo[r] for r in range(sq))
    right = max(hi[r] - 1 - r for r in range(sq))
    if right >= 0 and all(lo[r] == max(0, r - left) and hi[r] == min(sq, r + right + 1) for r in range(sq)):
        window = (-1 if left >= sq - 1 else left, -1 if right >= sq - 1 else right)
        return {"docs": [(0, sq)], "window": window, "form": "one window"}
    raise Unsupported("the mask is neither documents on the diagonal, each full or each causal, nor one "
                      "sliding window over the whole sequence: varlen_attn cannot express it exactly")


def varlen_describe(plan):
    """A plan in words, for kernel_variant."""
    n = len(plan["docs"])
    what = {(-1, -1): "full", (-1, 0): "causal"}.get(tuple(plan["window"]), f"window {tuple(plan['window'])}")
    return f"{n} document{'s' if n != 1 else ''}, {what}"


class Worker:
    def __init__(self, device, cpu):
        self.device_index, self.cpu = device, cpu
        self.torch = None
        self.unavailable = ""
        self.kernels = {}
        self.versions = {"python": platform.python_version()}
        self.device_name = "none"
        self.spin_cycles = None

    # ---- setup --------------------------------------------------------------------

    def load(self):
        if self.torch is not None or self.unavailable:
            return
        try:
            import numpy as np
            import torch
        except Exception as e:  # ImportError, or a broken install
            self.unavailable = f"{type(e).__name__}: {e} (interpreter {sys.executable}, Python {platform.python_version()})"
            self.kernels = {n[0]: None for n in KERNELS}
            return
        self.np, self.torch = np, torch
        self.versions.update(torch=torch.__version__, numpy=np.__version__)
        if self.cpu:
            self.dev = torch.device("cpu")
            self.device_name = "cpu"
        elif not torch.cuda.is_available():
            self.unavailable = f"torch {torch.__version__} sees no CUDA device"
        elif self.device_index >= torch.cuda.device_count():
            self.unavailable = f"device {self.device_index}: torch sees {torch.cuda.device_count()} CUDA devices"
        else:
            self.dev = torch.device("cuda", self.device_index)
            torch.cuda.set_device(self.dev)
            self.device_name = torch.cuda.get_device_name(self.dev)
            self.versions["cuda"] = str(torch.version.cuda)
            if torch.backends.cudnn.is_available():
                self.versions["cudnn"] = str(torch.backends.cudnn.version())
            cap = torch.cuda.get_device_capability(self.dev)
            self.versions["sm"] = f"{cap[0]}{cap[1]}"
        try:
            import triton
            self.versions["triton"] = triton.__version__
        except Exception:
            pass
        self.kernels = {
            "flash": SDPA(self, "flash", "FLASH_ATTENTION", "_scaled_dot_product_flash_attention"),
            "cudnn": SDPA(self, "cudnn", "CUDNN_ATTENTION", "_scaled_dot_product_cudnn_attention"),
            "efficient": SDPA(self, "efficient", "EFFICIENT_ATTENTION", "_scaled_dot_product_efficient_attention"),
            "flex": Flex(self),
            "varlen": VarLen(self),
        }

    def tensor_dtype(self, name):
        t = self.torch
        return {"bf16": t.bfloat16, "fp16": t.float16, "fp32": t.float32, "fp64": t.float64}[name]

    # ---- requests -----------------------------------------------------------------

    def handle(self, req):
        rid = req.get("id") if isinstance(req, dict) else None
        oom = False
        try:
            if not isinstance(req, dict):
                raise ValueError("a request is a JSON object")
            op = req.get("op")
            if op == "hello":
                body = self.hello(req)
            elif op == "quit":
                body = {}
            elif op in ("supports", "forward", "backward", "time"):
                self.load()
                name = req.get("kernel")
                if name not in self.kernels:
                    raise Unsupported(f"this worker serves {', '.join(sorted(self.kernels))}, not {name!r}")
                k = self.kernels[name]
                if self.unavailable:
                    raise Unsupported(self.unavailable)
                ok, why = k.available()
                if not ok:
                    raise Unsupported(why)
                p = Problem(req.get("problem") or {})
                body = getattr(self, "op_" + op)(k, p, req)
            else:
                raise ValueError(f"unknown op {op!r}")
            rep = {"id": rid, "status": "ok"}
            rep.update(body)
        except Unsupported as e:
            rep = {"id": rid, "status": "unsupported", "reason": clip(str(e) or "unsupported")}
        except Exception as e:
            oom = self.is_oom(e)
            if not oom:
                traceback.print_exc(file=sys.stderr)
            rep = {"id": rid, "status": "oom" if oom else "error", "reason": clip(f"{type(e).__name__}: {e}")}
        if oom:  # the frames of the failed request are gone now: give their memory back
            gc.collect()
            self.torch.cuda.empty_cache()
        return rep

    def is_oom(self, e):
        t = self.torch
        if t is None:
            return False
        if isinstance(e, getattr(t.cuda, "OutOfMemoryError", ())):
            return True
        return "out of memory" in str(e).lower()

    def hello(self, req):
        self.load()
        ks = []
        for name, doc, masks in KERNELS:
            k = self.kernels.get(name)
            ok, why = (False, self.unavailable) if k is None or self.unavailable else k.available()
            ks.append({"name": name, "doc": doc, "masks": masks, "available": ok, "reason": why,
                       "versions": k.versions() if k is not None and not self.unavailable else {}})
        return {"protocol": PROTOCOL, "worker": WORKER, "device": self.device_name,
                "versions": self.versions, "kernels": ks}

    def op_supports(self, k, p, req):
        return {"variant": k.supports(p)}

    # ---- files (docs/external-kernels.md, "Files") ----------------------------------

    def load_npy(self, req, name, dtype, shape):
        np, t = self.np, self.torch
        path = os.path.join(req["dir"], req["inputs"][name])
        a = np.load(path, allow_pickle=False)
        want = NPY_DESCR[dtype]
        if a.dtype.str != want or list(a.shape) != list(shape):
            raise ValueError(f"{name}: {a.dtype.str}{list(a.shape)}, want {want}{list(shape)}")
        a = np.ascontiguousarray(a)
        if dtype == "bf16":
            x = t.from_numpy(a.view(np.int16)).view(t.bfloat16)
        else:
            x = t.from_numpy(a)
        return x.to(self.dev)

    def save_npy(self, req, name, x, dtype):
        np, t = self.np, self.torch
        x = x.detach().to("cpu").contiguous()
        if dtype == "bf16":
            a = x.to(t.bfloat16).view(t.int16).numpy().view(np.uint16)
        else:
            a = x.to(self.tensor_dtype(dtype)).numpy()
        np.save(os.path.join(req["dir"], req["outputs"][name]), a, allow_pickle=False)

    def inputs(self, req, p, names):
        """q, k, v (and dout) as [1, heads, seq, dim] on the device."""
        out = []
        for n in names:
            h, s = (p.hq, p.sq) if n in ("q", "dout", "out") else (p.hkv, p.sk)
            x = self.load_npy(req, n, p.dtype, [s, h, p.d])
            out.append(x.permute(1, 0, 2).unsqueeze(0).contiguous())
        return out

    def op_forward(self, k, p, req):
        k.supports(p)
        q, kk, v = self.inputs(req, p, ("q", "k", "v"))
        with self.torch.no_grad():
            out, lse = k.forward_lse(p, q, kk, v)
        self.save_npy(req, "out", out[0].permute(1, 0, 2), p.dtype)
        self.save_npy(req, "lse", lse.reshape(p.hq, p.sq), "fp32")
        return {}

    def op_backward(self, k, p, req):
        # The worker recomputes out with its own forward (the same kernel longca checked
        # out and lse of) and differentiates through it; the request's out and lse are
        # not needed by these kernels.
        k.supports(p)
        q, kk, v, dout = self.inputs(req, p, ("q", "k", "v", "dout"))
        for x in (q, kk, v):
            x.requires_grad_(True)

        def grads():
            out = k.run(p, q, kk, v, bwd=True)
            return self.torch.autograd.grad(out, (q, kk, v), dout)

        dq, dk, dv = k.compiled(p, "bwd", grads)
        for n, x in (("dq", dq), ("dk", dk), ("dv", dv)):
            self.save_npy(req, n, x[0].permute(1, 0, 2), p.dtype)
        return {}

    # ---- timing (docs/external-kernels.md, "Timing") --------------------------------

    def spin(self):
        """Queue a short busy kernel, so that the host's launch latency of the timed pass
        is hidden behind it rather than timed (as longca's own harness launches from Go
        with little latency)."""
        t = self.torch
        if self.cpu:
            return
        if self.spin_cycles is None:
            self.spin_cycles = 0
            sleep = getattr(t.cuda, "_sleep", None)
            if sleep is not None:
                a, b = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
                a.record()
                sleep(1_000_000)
                b.record()
                b.synchronize()
                ms = a.elapsed_time(b)
                if ms > 0:
                    self.spin_cycles = int(1_000_000 / ms * 0.5)  # about 0.5 ms
        if self.spin_cycles:
            t.cuda._sleep(self.spin_cycles)

    def op_time(self, k, p, req):
        t = self.torch
        pas = req.get("pass")
        if pas not in ("fwd", "bwd", "fwd+bwd"):
            raise ValueError(f"bad pass {pas!r}")
        seed, warmup, iters = int(req.get("seed") or 0), int(req.get("warmup") or 0), int(req.get("iters") or 0)
        flush_bytes = int(req.get("flush_bytes") or 0)
        if iters < 1 or warmup < 0:
            raise ValueError(f"iters {iters} and warmup {warmup}: need iters >= 1, warmup >= 0")
        k.supports(p)
        dt = self.tensor_dtype(p.dtype)
        gen = t.Generator(device=self.dev)
        gen.manual_seed(seed)
        q = t.randn((1, p.hq, p.sq, p.d), generator=gen, device=self.dev, dtype=dt, requires_grad=True)
        kk = t.randn((1, p.hkv, p.sk, p.d), generator=gen, device=self.dev, dtype=dt, requires_grad=True)
        v = t.randn((1, p.hkv, p.sk, p.d), generator=gen, device=self.dev, dtype=dt, requires_grad=True)
        dout = t.randn((1, p.hq, p.sq, p.d), generator=gen, device=self.dev, dtype=dt)
        flush = t.empty(max(flush_bytes, 1), dtype=t.uint8, device=self.dev)

        def setup():
            if pas == "fwd":
                def fn():  # in grad mode, as training runs it: out and the lse the backward needs
                    return k.run(p, q, kk, v)
            elif pas == "bwd":
                out = k.run(p, q, kk, v, bwd=True)

                def fn():
                    return t.autograd.grad(out, (q, kk, v), dout, retain_graph=True)
            else:
                def fn():
                    return t.autograd.grad(k.run(p, q, kk, v, bwd=True), (q, kk, v), dout)
            fn()  # once more than the warm-ups: compilation is never timed
            return fn

        fn = k.compiled(p, pas, setup)
        for _ in range(warmup):
            fn()
        samples = []
        if self.cpu:
            for _ in range(iters):
                t0 = time.perf_counter()
                fn()
                samples.append((time.perf_counter() - t0) * 1e3)
            peak = 0
        else:
            t.cuda.synchronize(self.dev)
            t.cuda.reset_peak_memory_stats(self.dev)
            start = [t.cuda.Event(enable_timing=True) for _ in range(iters)]
            end = [t.cuda.Event(enable_timing=True) for _ in range(iters)]
            for i in range(iters):
                flush.zero_()
                self.spin()
                start[i].record()
                r = fn()
                end[i].record()
                end[i].synchronize()
                del r
            samples = [a.elapsed_time(b) for a, b in zip(start, end)]
            peak = t.cuda.max_memory_allocated(self.dev) - flush.numel()  # the flush buffer is the harness's
        s = sorted(samples)
        n = len(s)
        median = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
        rep = {"median_ms": median, "min_ms": s[0], "max_ms": s[-1], "mean_ms": sum(s) / n,
               "samples_ms": samples, "peak_mem_bytes": int(max(peak, 0))}
        variant = k.timed_variant(p, pas)
        if variant:
            rep["variant"] = variant  # the path that ran, where it differs by pass
        return rep


def clip(s, n=2000):
    return s if len(s) <= n else s[:n] + "..."


def is_compile_error(e):
    """A failure of torch.compile / Inductor to build a kernel (as opposed to a kernel that
    ran and failed): the peer's limitation on this problem, answered unsupported."""
    names = {c.__name__ for c in type(e).__mro__}
    if names & {"InductorError", "BackendCompilerFailed", "NoValidChoicesError", "LoweringException"}:
        return True
    return "NoValidChoicesError" in str(e)


class Kernel:
    """What every kernel of this worker does unless it says otherwise."""

    def compiled(self, p, pas, setup):
        """Runs setup (the pass's first, compiling call) and returns its result. Flex
        overrides this to retry a backward that does not compile in another form."""
        return setup()

    def timed_variant(self, p, pas):
        """The variant that ran the timed pass when it is not the one supports named."""
        return ""


class SDPA(Kernel):
    """One backend of torch.nn.functional.scaled_dot_product_attention, forced with
    torch.nn.attention.sdpa_kernel. It takes a mask only when it is one full or causal
    slice over the whole matrix (causal only when seqlen_q == seqlen_k, where SDPA's
    top-left is_causal and MASKS.md's bottom-right causal are the same mask). GQA goes
    through enable_gqa when the backend takes it, else K and V are expanded to the query
    heads inside the timed region (the variant says which)."""

    def __init__(self, w, name, backend, aten_op):
        self.w, self.name, self.backend_name, self.aten_op = w, name, backend, aten_op
        self.modes = {}

    def available(self):
        if self.w.cpu:
            return False, "the SDPA GPU backends need a CUDA device (worker runs on the CPU)"
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: F401
        except ImportError as e:
            return False, f"torch {self.w.torch.__version__} has no torch.nn.attention.sdpa_kernel: {e}"
        if not hasattr(SDPBackend, self.backend_name):
            return False, f"torch {self.w.torch.__version__} has no SDPBackend.{self.backend_name}"
        return True, ""

    def versions(self):
        v = {"torch": self.w.versions.get("torch", "")}
        if self.name == "cudnn" and "cudnn" in self.w.versions:
            v["cudnn"] = self.w.versions["cudnn"]
        if "cuda" in self.w.versions:
            v["cuda"] = self.w.versions["cuda"]
        return v

    def supports(self, p):
        if p.grid is not None:
            raise Unsupported(f"{self.name} takes full and causal masks, not per-KV-head (block-sparse) masks")
        kind = p.whole()
        if kind is None:
            raise Unsupported(f"{self.name} takes only a full or causal mask (one slice over the whole matrix); "
                              f"this mask has {len(p.slices)} slice(s)")
        if kind == "causal" and p.sq != p.sk:
            raise Unsupported("causal with seqlen_q != seqlen_k: SDPA's is_causal is top-left aligned, longca's causal bottom-right")
        mode = self.mode(p, kind == "causal")
        if p.hq == p.hkv:
            return self.name
        return f"{self.name}, GQA " + ("native (enable_gqa)" if mode == "native" else "by K/V expanded to the query heads")

    def call(self, p, q, k, v, causal, mode):
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        g = p.hq // p.hkv
        if mode == "expand" and g > 1:
            k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
        with sdpa_kernel(getattr(SDPBackend, self.backend_name)):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=p.scale,
                                                  enable_gqa=(mode == "native" and g > 1))

    def mode(self, p, causal):
        """native or expand: how GQA runs, found by a trial run (forward and backward) on
        a small problem of the same heads, dim and dtype; Unsupported with the backend's
        own reasons when neither runs."""
        key = (p.hq, p.hkv, p.d, p.dtype, causal)
        if key in self.modes:
            m = self.modes[key]
            if isinstance(m, Unsupported):
                raise m
            return m
        t = self.w.torch
        s = 256
        dt = self.w.tensor_dtype(p.dtype)
        reasons = []
        for mode in (("native", "expand") if p.hq != p.hkv else ("native",)):
            q = t.randn((1, p.hq, s, p.d), device=self.w.dev, dtype=dt, requires_grad=True)
            k = t.randn((1, p.hkv, s, p.d), device=self.w.dev, dtype=dt, requires_grad=True)
            v = t.randn((1, p.hkv, s, p.d), device=self.w.dev, dtype=dt, requires_grad=True)
            with warnings.catch_warnings(record=True) as ws:
                warnings.simplefilter("always")
                try:
                    self.call(p, q, k, v, causal, mode).sum().backward()
                    self.modes[key] = mode
                    return mode
                except Exception as e:
                    if self.w.is_oom(e):
                        raise
                    why = "; ".join(str(x.message).strip() for x in ws) or str(e)
                    reasons.append(f"{mode}: {e}: {why}")
        err = Unsupported(clip(f"SDPA {self.name} refuses {p.hq}:{p.hkv} heads, dim {p.d}, {p.dtype}: " + " | ".join(reasons), 1500))
        self.modes[key] = err
        raise err

    def run(self, p, q, k, v, bwd=False):
        causal = p.whole() == "causal"
        return self.call(p, q, k, v, causal, self.mode(p, causal))

    def forward_lse(self, p, q, k, v):
        """out from the timed call; lse from the same backend's aten op (the public API does
        not return it) on the same inputs, K and V expanded to the query heads."""
        t = self.w.torch
        causal = p.whole() == "causal"
        out = self.run(p, q, k, v)
        g = p.hq // p.hkv
        ke, ve = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
        op = getattr(t.ops.aten, self.aten_op)
        if self.name == "flash":
            r = op(q, ke, ve, 0.0, causal, False, scale=p.scale)
        elif self.name == "efficient":
            r = op(q, ke, ve, None, True, 0.0, causal, scale=p.scale)
        else:
            r = op(q, ke, ve, None, True, 0.0, causal, False, scale=p.scale)
        lse = r[1].reshape(1, p.hq, -1)[..., :p.sq].float()
        return out, lse


class VarLen(Kernel):
    """torch.nn.attention.varlen.varlen_attn (PyTorch 2.10 and later): FlashAttention's
    varlen kernels on documents packed by cumulative offsets, each document full, causal
    or a sliding window (window_size; is_causal in 2.10). It serves exactly the masks
    varlen_plan expresses (full, causal, full_document, causal_document,
    sliding_window_causal, sliding_window) and answers unsupported on the others. q, k,
    v go in packed as (tokens, heads, dim) views of longca's tensors (no copy); GQA runs
    with enable_gqa where this torch has it, else with K and V expanded to the query
    heads (repeat_interleave) inside the timed pass, as a user of this torch must. lse
    comes from return_aux=AuxRequest(lse=True) (natural log, [heads, tokens]); dq, dk,
    dv by autograd through the same call."""

    def __init__(self, w):
        self.w = w
        self.fn, self.aux, self.params = None, None, set()
        self.plans = []  # (key, plan with its device offsets), most recent last

    def available(self):
        if self.w.cpu:
            return False, "varlen_attn runs FlashAttention's CUDA kernels (worker runs on the CPU)"
        if self.fn is None:
            try:
                from torch.nn.attention.varlen import varlen_attn
            except ImportError as e:
                return False, f"torch {self.w.torch.__version__} has no torch.nn.attention.varlen.varlen_attn (PyTorch 2.10 or later): {e}"
            try:
                from torch.nn.attention.varlen import AuxRequest
            except ImportError:
                try:
                    from torch.nn.attention.flex_attention import AuxRequest
                except ImportError as e:
                    return False, f"torch {self.w.torch.__version__}: varlen_attn without an AuxRequest to ask for the lse: {e}"
            try:
                self.params = set(inspect.signature(varlen_attn).parameters)
            except (TypeError, ValueError) as e:
                return False, f"varlen_attn's signature cannot be read: {e}"
            if "return_aux" not in self.params:
                return False, "this torch's varlen_attn has no return_aux: the lse the check needs cannot be had"
            self.fn, self.aux = varlen_attn, AuxRequest
        return True, ""

    def versions(self):
        v = {"torch": self.w.versions.get("torch", "")}
        if "cuda" in self.w.versions:
            v["cuda"] = self.w.versions["cuda"]
        if self.fn is not None or self.available()[0]:
            args = sorted(self.params & {"window_size", "is_causal", "scale", "enable_gqa", "return_aux"})
            v["api"] = f"torch.nn.attention.varlen.varlen_attn({', '.join(args)})"
        return v

    def supports(self, p):
        if p.grid is not None:
            raise Unsupported("varlen_attn takes documents and windows, not per-KV-head (block-sparse) masks")
        if p.dtype not in ("bf16", "fp16"):
            raise Unsupported(f"varlen_attn (FlashAttention) takes bf16 and fp16, not {p.dtype}")
        if p.d % 8 or p.d > 256:
            raise Unsupported(f"varlen_attn (FlashAttention) takes head dims up to 256 in multiples of 8, not {p.d}")
        plan = self.plan(p)
        if p.hq == p.hkv:
            gqa = ""
        elif "enable_gqa" in self.params:
            gqa = ", GQA native (enable_gqa)"
        else:
            gqa = ", GQA by K/V expanded to the query heads"
        return f"varlen_attn, {varlen_describe(plan)}{gqa}"

    def plan(self, p):
        for key, plan in self.plans:
            if key == p.key:
                return plan
        plan = dict(varlen_plan(p.slices, p.sq, p.sk))
        w = tuple(plan["window"])
        if "window_size" not in self.params:
            if w not in ((-1, -1), (-1, 0)):
                raise Unsupported(f"this torch's varlen_attn has no window_size: window {w} cannot be run")
            if w == (-1, 0) and "is_causal" not in self.params:
                raise Unsupported("this torch's varlen_attn has neither window_size nor is_causal")
        if "scale" not in self.params and abs(p.scale * math.sqrt(p.d) - 1) > 1e-6:
            raise Unsupported(f"this torch's varlen_attn has no scale argument: scale {p.scale} is not 1/sqrt({p.d})")
        t = self.w.torch
        cu = [0] + [e for _, e in plan["docs"]]
        plan["cu"] = t.tensor(cu, dtype=t.int32, device=self.w.dev)
        plan["max"] = max(e - s for s, e in plan["docs"])
        self.plans = self.plans[-3:] + [(p.key, plan)]
        return plan

    def call(self, p, q, k, v, lse=False):
        """q, k, v as [1, heads, seq, dim]; returns out as [1, heads_q, seq, dim] (and the
        lse as [heads_q, seq] when asked)."""
        plan = self.plan(p)
        g = p.hq // p.hkv
        qq, kk, vv = (x[0].transpose(0, 1) for x in (q, k, v))  # (tokens, heads, dim) views
        kw = {}
        if g > 1:
            if "enable_gqa" in self.params:
                kw["enable_gqa"] = True
            else:
                kk, vv = kk.repeat_interleave(g, dim=1), vv.repeat_interleave(g, dim=1)
        w = tuple(int(x) for x in plan["window"])  # varlen_attn tells causal by window_size == (-1, 0): a tuple
        if "window_size" in self.params:
            kw["window_size"] = w
        elif w == (-1, 0):
            kw["is_causal"] = True
        if "scale" in self.params:
            kw["scale"] = p.scale
        if lse:
            kw["return_aux"] = self.aux(lse=True)
        r = self.fn(qq, kk, vv, plan["cu"], plan["cu"], plan["max"], plan["max"], **kw)
        if not lse:
            return r.transpose(0, 1).unsqueeze(0)
        out, l = r
        docs = plan["docs"]
        if tuple(l.shape) == (p.hq, p.sq):  # FlashAttention's packed lse (CUDA)
            pass
        elif tuple(l.shape) == (p.sq, p.hq):  # the layout varlen_attn's docstring names
            l = l.transpose(0, 1)
        elif l.dim() == 3 and tuple(l.shape[:2]) == (len(docs), p.hq) and l.shape[2] >= plan["max"]:
            l = self.w.torch.cat([l[i, :, :e - s] for i, (s, e) in enumerate(docs)], dim=1)  # padded per document
        else:
            raise RuntimeError(f"varlen_attn's lse has shape {tuple(l.shape)}, want ({p.hq}, {p.sq}), ({p.sq}, {p.hq}) "
                               f"or ({len(docs)}, {p.hq}, >= {plan['max']})")
        return out.transpose(0, 1).unsqueeze(0), l.float()

    def run(self, p, q, k, v, bwd=False):
        return self.call(p, q, k, v)

    def forward_lse(self, p, q, k, v):
        return self.call(p, q, k, v, lse=True)


# FlexAttention's mask_mod reads the current problem's tables from these module globals
# (set by Flex.use before every call), so one mask_mod serves every mask: torch.compile
# then recompiles for a new shape, not for every new mask.
# Tables are flat and indexed by one tensor each (what the mask_mod tracer takes).
_LO = None    # intervals form: int32 [slots * seqlen_q]; row q allows [_LO[q + j*_SQ], _HI[...])
_HI = None
_SQ = 0       # seqlen_q
_SLOTS = 2    # intervals a row
_KEPT = None  # grid form: bool [heads_kv * q cells * k cells]
_QOFF = None  # int32 [seqlen_q]: the q cell of each query times the k cells
_KCELL = None  # int32 [seqlen_k]: the k cell of each key
_HOFF = 0     # q cells * k cells
_GROUP = 1    # query heads per KV head


_FLEX_BWD_BLOCK = 0  # the block mask's block size when a backward at 64-token blocks may compile next, else 0


def extend_flex_bwd_configs():
    """Inductor keeps only the backward configs whose tiles divide the block mask's block
    size, and on sm90 at head dim 128 its one default config (tiles 64x128 and 128x64)
    does not divide 64: every 64-token backward fails with NoValidChoicesError, whatever
    kernel_options say (they are applied after that filter). This adds one config, tiles
    32x64 and 64x32 (the kernel_options the 64-token forward already gives), 2 stages, 4
    warps, to the list while a 64-token block mask is in use (Flex.use sets
    _FLEX_BWD_BLOCK) and no listed config divides it; it changes nothing else. A class
    attribute, not V.set_choices_handler: the backward compiles lazily, on the autograd
    engine's thread, where a thread-local handler is not seen. Returns "" or why not."""
    try:
        from torch._inductor.choices import InductorChoices
    except ImportError as e:
        return f"no torch._inductor.choices ({e})"
    orig = getattr(InductorChoices, "get_flex_attention_bwd_configs", None)
    if orig is None:
        return "torch._inductor.choices.InductorChoices has no get_flex_attention_bwd_configs"
    if getattr(orig, "_longca", False):
        return ""
    fields = ("block_m1", "block_n1", "block_m2", "block_n2")

    def configs(self, head_dim, dtype, *args, **kwargs):
        confs = orig(self, head_dim, dtype, *args, **kwargs)
        b = _FLEX_BWD_BLOCK
        if not b or not confs or not all(hasattr(c, f) for c in confs for f in fields):
            return confs
        if any(all(b % getattr(c, f) == 0 for f in fields) for c in confs):
            return confs
        try:
            extra = dataclasses.replace(confs[-1], block_m1=b // 2, block_n1=b, block_m2=b, block_n2=b // 2,
                                        num_stages=2, num_warps=4)
        except Exception as e:  # not the dataclass this was written against: leave the list alone
            print(f"longca torch worker: cannot add a backward config for {b}-token blocks: {e!r}", file=sys.stderr)
            return confs
        return list(confs) + [extra]

    configs._longca = True
    InductorChoices.get_flex_attention_bwd_configs = configs
    return ""


def _mod_intervals_2(b, h, q, k):
    return ((k >= _LO[q]) & (k < _HI[q])) | ((k >= _LO[q + _SQ]) & (k < _HI[q + _SQ]))


def _mod_intervals_n(b, h, q, k):
    m = (k >= _LO[q]) & (k < _HI[q])
    for j in range(1, _SLOTS):
        m = m | ((k >= _LO[q + j * _SQ]) & (k < _HI[q + j * _SQ]))
    return m


def _mod_grid(b, h, q, k):
    return _KEPT[(h // _GROUP) * _HOFF + _QOFF[q] + _KCELL[k]]


class Prepared:
    """A problem made ready for FlexAttention: the tables its mask_mod reads, the block
    mask, and the kernel options."""

    def __init__(self):
        self.tables = {}
        self.block_mask = None
        self.block = 0  # the block mask's block size (0: no block mask)
        self.options = None
        self.variant = ""


class Flex(Kernel):
    """FlexAttention with a block mask built from the slices without a dense S x S mask:
    per-query-row key intervals (at most two a row for every mask longca builds) give
    the mask_mod and, summed per 128 x 128 block, which blocks are empty, full or
    partial. Per-KV-head block-sparse masks come as grids of whole cells; their block
    mask is counted from the cells, at the cells' own block size when it is 64. A backward
    that does not compile at 64-token blocks is retried once at 128 with partial blocks
    (mask_mod), and is unsupported when that does not compile either."""

    def __init__(self, w):
        self.w = w
        self.fn = None
        self.cache = []  # ((key, 64-token blocks allowed), Prepared), most recent last
        self.no64 = ""  # why 64-token blocks failed to compile, once they did
        self.no64_bwd = ""  # why the backward failed to compile at 64-token blocks, once it did
        self.bwd64_ok = False  # a backward at 64-token blocks compiled and ran in this worker
        self.extended = None  # extend_flex_bwd_configs's answer, once called

    def available(self):
        try:
            from torch.nn.attention.flex_attention import BlockMask, flex_attention  # noqa: F401
        except ImportError as e:
            return False, f"torch {self.w.torch.__version__} has no FlexAttention: {e}"
        return True, ""

    def versions(self):
        v = {"torch": self.w.versions.get("torch", "")}
        if "triton" in self.w.versions:
            v["triton"] = self.w.versions["triton"]
        return v

    def function(self):
        if self.fn is None:
            import torch
            from torch.nn.attention.flex_attention import flex_attention
            if self.w.cpu:
                self.fn = flex_attention  # eager: the dense reference path, for tests
            else:
                import torch._dynamo
                import torch._functorch.config
                torch._functorch.config.donated_buffer = False  # the timed backward runs again and again
                for name in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit", "accumulated_recompile_limit"):
                    if hasattr(torch._dynamo.config, name):
                        setattr(torch._dynamo.config, name, max(getattr(torch._dynamo.config, name), 4096))
                self.extended = extend_flex_bwd_configs()
                if self.extended:
                    print(f"longca torch worker: flex: {self.extended}", file=sys.stderr)
                self.fn = torch.compile(flex_attention, dynamic=False)
        return self.fn

    def supports(self, p):
        if p.dtype == "fp64" and not self.w.cpu:
            raise Unsupported("FlexAttention's Triton kernels take bf16, fp16 and fp32, not fp64")
        if p.d not in (16, 32, 64, 128, 256):
            raise Unsupported(f"FlexAttention here takes head dims 16, 32, 64, 128, 256, not {p.d}")
        return self.prepare(p).variant

    def prepare(self, p, bwd=False):
        """The problem made ready; bwd: for a pass with a backward (64-token blocks only
        while the backward compiles at 64 here)."""
        use64 = not self.no64 and not (bwd and self.no64_bwd)
        key = (p.key, use64)
        for k, prep in self.cache:
            if k == key:
                return prep
        prep = Prepared()
        if p.whole() == "full":
            prep.variant = "no block mask (full)"
        elif p.slices is not None:
            self.prepare_intervals(p, prep)
        else:
            self.prepare_grid(p, prep, use64)
        self.cache = self.cache[-2:] + [(key, prep)]
        return prep

    # -- the intervals form ---------------------------------------------------------

    def prepare_intervals(self, p, prep):
        t, dev = self.w.torch, self.w.dev
        n = flex_slots(row_intervals(p.slices, p.sq))
        lo = t.zeros((n, p.sq), dtype=t.int32, device=dev)
        hi = t.zeros((n, p.sq), dtype=t.int32, device=dev)
        fill = t.zeros(p.sq, dtype=t.int64, device=dev)
        for s in p.slices:
            qs, qe, ks, ke, _ = s
            blo, bhi = band(s)
            rows = t.arange(qs, qe, device=dev)
            left = rows + blo if blo is not None else t.full_like(rows, ks)
            right = rows + bhi + 1 if bhi is not None else t.full_like(rows, ke)
            left, right = left.clamp(min=ks), right.clamp(max=ke)
            right = t.maximum(right, left)
            slot = fill[qs:qe]
            lo[slot, rows] = left.to(t.int32)
            hi[slot, rows] = right.to(t.int32)
            fill[qs:qe] += 1
        prep.tables = {"_LO": lo.reshape(-1), "_HI": hi.reshape(-1), "_SQ": p.sq, "_SLOTS": n}
        mod = _mod_intervals_2 if n == 2 else _mod_intervals_n
        b = 128
        counts = self.interval_counts(lo, hi, p.sq, p.sk, b)
        prep.block_mask, info = self.block_mask(counts, p, b, mod)
        prep.block = b
        prep.variant = f"block mask {b}, row intervals x{n}, {info}"
        if p.sq * p.sk <= VERIFY_PAIRS:
            self.verify(p, prep)

    def interval_counts(self, lo, hi, sq, sk, b):
        """Allowed pairs in every (q block, k block), [1, nqb, nkb], from the intervals:
        the keys of [l, h) below x number min(max(x - l, 0), max(h - l, 0))."""
        t, dev = self.w.torch, self.w.dev
        nqb, nkb = -(-sq // b), -(-sk // b)
        edges = (t.arange(nkb + 1, device=dev, dtype=t.int64) * b).clamp(max=sk)
        counts = t.zeros((nqb, nkb), dtype=t.int64, device=dev)
        chunk = b * 16
        for r0 in range(0, sq, chunk):
            r1 = min(sq, r0 + chunk)
            l = lo[:, r0:r1, None].long()
            width = (hi[:, r0:r1, None].long() - l).clamp(min=0)
            below = t.minimum((edges[None, None, :] - l).clamp(min=0), width)
            per_row = (below[..., 1:] - below[..., :-1]).sum(0)
            counts.index_add_(0, t.arange(r0, r1, device=dev) // b, per_row)
        return counts[None]

    # -- the grid form --------------------------------------------------------------

    def prepare_grid(self, p, prep, use64):
        t, np, dev = self.w.torch, self.w.np, self.w.dev
        qe, ke, path = p.grid
        kept = np.load(path, allow_pickle=False)
        nqc, nkc = len(qe) - 1, len(ke) - 1
        if kept.dtype.str != "|u1" or list(kept.shape) != [p.hkv, nqc, nkc]:
            raise ValueError(f"grid kept: {kept.dtype.str}{list(kept.shape)}, want |u1{[p.hkv, nqc, nkc]}")
        if qe[0] != 0 or qe[-1] != p.sq or ke[0] != 0 or ke[-1] != p.sk:
            raise ValueError("grid edges must run from 0 to the sequence lengths")
        kept = t.from_numpy(np.ascontiguousarray(kept)).to(dev).bool()
        qe_t = t.tensor(qe, device=dev, dtype=t.int64)
        ke_t = t.tensor(ke, device=dev, dtype=t.int64)
        qcell = t.repeat_interleave(t.arange(nqc, device=dev, dtype=t.int32), qe_t[1:] - qe_t[:-1])
        kcell = t.repeat_interleave(t.arange(nkc, device=dev, dtype=t.int32), ke_t[1:] - ke_t[:-1])
        prep.tables = {"_KEPT": kept.reshape(-1), "_QOFF": qcell * nkc, "_KCELL": kcell, "_HOFF": nqc * nkc,
                       "_GROUP": p.hq // p.hkv}
        inner = qe[1:-1] + ke[1:-1]
        b, opts = 128, None
        if all(e % 128 == 0 for e in inner):
            b = 128
        elif all(e % 64 == 0 for e in inner) and use64:
            b = 64  # the cells' own block: every block full or empty, no mask_mod at all
            opts = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_M1": 32, "BLOCK_N1": 64, "BLOCK_M2": 64, "BLOCK_N2": 32}
        nqb, nkb = -(-p.sq // b), -(-p.sk // b)

        def overlap(edges, n, cells):  # [blocks, cells]: positions shared by block i and cell c
            bs = t.arange(n, device=dev, dtype=t.int64)[:, None] * b
            be = (bs + b).clamp(max=edges[-1])
            return (t.minimum(be, edges[None, 1:]) - t.maximum(bs, edges[None, :-1])).clamp(min=0).double()

        pq, pk = overlap(qe_t, nqb, nqc), overlap(ke_t, nkb, nkc)
        counts = t.stack([(pq @ kept[h].double() @ pk.T).round().long() for h in range(p.hkv)])
        prep.options = opts
        prep.block_mask, info = self.block_mask(counts, p, b, _mod_grid)
        prep.block = b
        prep.variant = f"block mask {b}, grid {nqc}x{nkc} cells, {info}"
        if b == 64:
            prep.variant += ", tiles fwd 64x64, bwd 32x64/64x32"
        elif all(e % 64 == 0 for e in inner):
            prep.variant += (" (64-token blocks did not compile here)" if self.no64 else
                             " (the backward did not compile at 64-token blocks here)")
        if p.sq * p.sk * p.hkv <= VERIFY_PAIRS:
            self.verify(p, prep)

    # -- block masks ----------------------------------------------------------------

    def block_mask(self, counts, p, b, mod):
        """The BlockMask of allowed-pair counts [heads, nqb, nkb]: a block is full when
        every pair is allowed (and it is not cut by the sequence's end), empty when none
        is, partial (mask_mod decides) otherwise. Per-KV-head counts are repeated for the
        query heads that share the KV head."""
        t, dev = self.w.torch, self.w.dev
        from torch.nn.attention.flex_attention import BlockMask
        nqb, nkb = counts.shape[-2:]
        qlen = (t.arange(1, nqb + 1, device=dev) * b).clamp(max=p.sq) - t.arange(nqb, device=dev) * b
        klen = (t.arange(1, nkb + 1, device=dev) * b).clamp(max=p.sk) - t.arange(nkb, device=dev) * b
        size = qlen[:, None] * klen[None, :]
        whole = (qlen[:, None] == b) & (klen[None, :] == b)
        full = (counts == size[None]) & whole[None]
        partial = (counts > 0) & ~full
        if counts.shape[0] > 1:
            g = p.hq // p.hkv
            full, partial = full.repeat_interleave(g, 0), partial.repeat_interleave(g, 0)

        def ordered(m):
            num = m.sum(-1).to(t.int32)[None]
            idx = t.argsort((~m).to(t.int32), dim=-1, stable=True).to(t.int32)[None]
            return num.contiguous(), idx.contiguous()

        kv_num, kv_idx = ordered(partial)
        full_num, full_idx = ordered(full)
        bm = BlockMask.from_kv_blocks(kv_num, kv_idx, full_num, full_idx, BLOCK_SIZE=b, mask_mod=mod,
                                      seq_lengths=(p.sq, p.sk))
        nf, np_ = int(full.sum()), int(partial.sum())
        return bm, f"{nf} full + {np_} partial blocks of {full.numel()}"

    def verify(self, p, prep):
        """Element by element, the mask the block mask and mask_mod allow must be the
        problem's mask: raises when they differ (a bug here, never a timing)."""
        t, dev = self.w.torch, self.w.dev
        g = p.hq // p.hkv
        heads = range(p.hkv) if p.grid is not None else range(1)
        q = t.arange(p.sq, device=dev)[:, None]
        k = t.arange(p.sk, device=dev)[None, :]
        bm = prep.block_mask
        b = bm.BLOCK_SIZE[0]
        self.use(prep)
        for h in heads:
            want = t.zeros((p.sq, p.sk), dtype=t.bool, device=dev)
            if p.slices is not None:
                for s in p.slices:
                    qs, qe, ks, ke, _ = s
                    lo, hi = band(s)
                    ok = t.ones((qe - qs, ke - ks), dtype=t.bool, device=dev)
                    d = k[:, ks:ke] - q[qs:qe]
                    if lo is not None:
                        ok &= d >= lo
                    if hi is not None:
                        ok &= d <= hi
                    want[qs:qe, ks:ke] |= ok
            else:
                cells = _KEPT[h * _HOFF:(h + 1) * _HOFF]
                want = cells[_QOFF.long()[:, None] + _KCELL.long()[None, :]]
            hq = h * g
            hb = hq if bm.kv_num_blocks.shape[1] > 1 else 0
            part = t.zeros((bm.kv_indices.shape[-2], bm.kv_indices.shape[-1]), dtype=t.bool, device=dev)
            full = t.zeros_like(part)
            for dst, num, idx in ((part, bm.kv_num_blocks, bm.kv_indices), (full, bm.full_kv_num_blocks, bm.full_kv_indices)):
                for i in range(dst.shape[0]):
                    n = int(num[0, hb, i])
                    dst[i, idx[0, hb, i, :n].long()] = True
            blk_q, blk_k = (q // b).expand(p.sq, p.sk), (k // b).expand(p.sq, p.sk)
            in_part, in_full = part[blk_q, blk_k], full[blk_q, blk_k]
            hh = t.full((), hq, device=dev)
            mm = bm.mask_mod(t.zeros((), device=dev, dtype=t.int64), hh, q, k)
            got = in_full | (in_part & mm)
            if not t.equal(got, want):
                bad = (got != want).nonzero()[0].tolist()
                raise RuntimeError(f"flex block mask disagrees with the problem's mask at (q, k) = {bad} "
                                   f"(head {h}): allowed {bool(got[bad[0], bad[1]])}, want {bool(want[bad[0], bad[1]])}")
            if bool((in_full & ~want).any()):
                raise RuntimeError("flex block mask marks a block full that holds masked pairs")

    # -- running --------------------------------------------------------------------

    def use(self, prep):
        g = globals()
        for n in ("_LO", "_HI", "_KEPT", "_QOFF", "_KCELL"):
            g[n] = None
        g.update(_SQ=0, _SLOTS=2, _HOFF=0, _GROUP=1)
        g.update(prep.tables)
        g["_FLEX_BWD_BLOCK"] = 64 if prep.block == 64 else 0

    def kwargs(self, p, prep):
        kw = {"block_mask": prep.block_mask, "scale": p.scale, "enable_gqa": p.hq != p.hkv}
        if prep.options:
            kw["kernel_options"] = dict(prep.options)
        return kw

    def upcast(self, q, k, v):
        """On the CPU (tests) the eager path computes in the inputs' type: give it fp32,
        as FlexAttention's GPU kernels accumulate in fp32."""
        if self.w.cpu:
            return q.float(), k.float(), v.float()
        return q, k, v

    def run(self, p, q, k, v, bwd=False):
        prep = self.prepare(p, bwd)
        self.use(prep)
        try:
            return self.function()(*self.upcast(q, k, v), **self.kwargs(p, prep)).to(q.dtype)
        except Exception as e:
            if not prep.options or self.w.is_oom(e):
                raise
            self.fallback(e)
            return self.run(p, q, k, v, bwd)

    def compiled(self, p, pas, setup):
        """setup's first call compiles the pass. A backward that does not compile at
        64-token blocks is retried at 128-token blocks with partial blocks (the same mask,
        mask_mod deciding inside the partial blocks); when that does not compile either,
        the problem is unsupported with both reasons."""
        if pas == "fwd":
            return setup()
        prep = self.prepare(p, bwd=True)
        try:
            r = setup()
        except Exception as e:
            if self.w.is_oom(e):
                raise
            if prep.block != 64:
                if self.no64_bwd and p.grid is not None and is_compile_error(e):
                    raise Unsupported(clip("FlexAttention's backward compiles here neither at 64-token blocks "
                                           f"({self.no64_bwd}) nor at 128-token blocks with partial blocks "
                                           f"({type(e).__name__}: {e})", 1500))
                raise
            first = clip(f"{type(e).__name__}: {e}", 600)
            traceback.print_exc(file=sys.stderr)
            if self.bwd64_ok:  # the check's problem compiled at 64: do not time an unchecked form
                raise Unsupported("FlexAttention's backward at 64-token blocks compiled for an earlier problem "
                                  f"(the check's) but not for this one: {first}")
            self.no64_bwd = first
            self.cache = []
            return self.compiled(p, pas, setup)
        if prep.block == 64:
            self.bwd64_ok = True
        return r

    def timed_variant(self, p, pas):
        return self.prepare(p, bwd=pas != "fwd").variant

    def fallback(self, e):
        """64-token blocks need kernel options for tiles of 64; when this torch does not
        compile them, block-sparse masks fall back to 128-token blocks."""
        traceback.print_exc(file=sys.stderr)
        self.no64 = f"{type(e).__name__}: {e}"
        self.cache = []

    def forward_lse(self, p, q, k, v):
        prep = self.prepare(p)
        self.use(prep)
        kw = self.kwargs(p, prep)
        fn = self.function()
        try:
            from torch.nn.attention.flex_attention import AuxRequest
        except ImportError:
            AuxRequest = None
        try:
            qq, kk, vv = self.upcast(q, k, v)
            if AuxRequest is not None:
                out, aux = fn(qq, kk, vv, return_aux=AuxRequest(lse=True), **kw)
                return out.to(q.dtype), aux.lse.float()  # natural log, as longca's lse
            out, lse = fn(qq, kk, vv, return_lse=True, **kw)
            return out.to(q.dtype), lse.float()
        except Exception as e:
            if not prep.options or self.w.is_oom(e):
                raise
            self.fallback(e)
            return self.forward_lse(p, q, k, v)


def varlen_plans(inp, out):
    """--varlen-plan (tests): a problem a line in, its varlen plan (or why none) a line out."""
    for line in inp:
        if not line.strip():
            continue
        try:
            p = Problem(json.loads(line))
            if p.slices is None:
                raise Unsupported("not a mask of slices")
            plan = varlen_plan(p.slices, p.sq, p.sk)
            rep = {"status": "ok", "docs": plan["docs"], "window": list(plan["window"]), "form": plan["form"],
                   "variant": varlen_describe(plan)}
        except Unsupported as e:
            rep = {"status": "unsupported", "reason": str(e)}
        except Exception as e:
            rep = {"status": "error", "reason": f"{type(e).__name__}: {e}"}
        out.write(json.dumps(rep) + "\n")
        out.flush()
    return 0


def main(argv):
    device, cpu = 0, False
    i = 0
    while i < len(argv):
        if argv[i] == "--device" and i + 1 < len(argv):
            if argv[i + 1] == "cpu":
                cpu = True
            else:
                device = int(argv[i + 1])
            i += 2
        elif argv[i] == "--cpu":
            cpu, i = True, i + 1
        elif argv[i] == "--varlen-plan":
            return varlen_plans(sys.stdin, sys.stdout)
        else:
            print(f"longca torch worker: unknown argument {argv[i]!r}", file=sys.stderr)
            return 2
    # The protocol owns the real stdout; whatever a library prints goes to stderr.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    w = Worker(device, cpu)
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
        except ValueError as e:
            req, rep = None, {"id": None, "status": "error", "reason": f"bad request: {e}"}
        else:
            rep = w.handle(req)
        try:
            text = json.dumps(rep, allow_nan=False)
        except ValueError as e:
            text = json.dumps({"id": rep.get("id"), "status": "error", "reason": f"reply not encodable: {e}"})
        proto.write(text + "\n")
        proto.flush()
        if isinstance(req, dict) and req.get("op") == "quit":
            break
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
