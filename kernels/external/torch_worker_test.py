"""Unit tests of the PyTorch worker's parts that need no torch: the translation of masks
into varlen_attn's documents and window, FlexAttention's backward retry and its Inductor
config extension (against stand-ins for torch's classes). Plain python3:

    python3 -m unittest kernels/external/torch_worker_test.py

TestTorchWorkerPython (external_test.go) runs these under go test, and
TestTorchWorkerVarlenPlan checks the translation against longca's own masks row by row.
"""
import dataclasses
import os
import sys
import types
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_worker as tw  # noqa: E402


def problem(sq, slices, sk=None):
    return tw.Problem({"seqlen_q": sq, "seqlen_k": sk or sq, "heads_q": 4, "heads_kv": 2, "head_dim": 16,
                       "dtype": "bf16", "scale": 0.25,
                       "mask": {"slices": [{"q": list(q), "k": list(k), "kind": kind} for q, k, kind in slices]}})


def dense(p):
    """The allowed pairs of the problem's slices, by MASKS.md's rule, pair by pair."""
    out = set()
    for qs, qe, ks, ke, kind in p.slices:
        for q in range(qs, qe):
            for k in range(ks, ke):
                ok = True
                if kind in ("causal", "bicausal"):
                    ok &= k <= q + (ke - qe)
                if kind in ("invcausal", "bicausal"):
                    ok &= k >= q + (ks - qs)
                if ok:
                    out.add((q, k))
    return out


def plan_pairs(plan):
    """The pairs FlashAttention's varlen kernel allows for a plan: within each document,
    j - i in [-left, right] (-1 unbounded), local indices, bottom-right aligned (square)."""
    left, right = plan["window"]
    out = set()
    for s, e in plan["docs"]:
        n = e - s
        for i in range(n):
            for j in range(n):
                d = j - i  # bottom-right: j - i - (n_k - n_q), and n_k == n_q
                if (left < 0 or d >= -left) and (right < 0 or d <= right):
                    out.add((s + i, s + j))
    return out


class VarlenPlan(unittest.TestCase):
    def plan(self, sq, slices, sk=None):
        p = problem(sq, slices, sk)
        plan = tw.varlen_plan(p.slices, p.sq, p.sk)
        self.assertEqual(plan_pairs(plan), dense(p), f"plan {plan} is not the mask")
        return plan

    def unsupported(self, sq, slices, sk=None, says=""):
        p = problem(sq, slices, sk)
        with self.assertRaises(tw.Unsupported) as cm:
            tw.varlen_plan(p.slices, p.sq, p.sk)
        self.assertIn(says, str(cm.exception))

    def test_full_and_causal(self):
        self.assertEqual(self.plan(7, [((0, 7), (0, 7), "full")])["window"], (-1, -1))
        pl = self.plan(7, [((0, 7), (0, 7), "causal")])
        self.assertEqual((pl["docs"], pl["window"]), ([(0, 7)], (-1, 0)))

    def test_documents(self):
        docs = [(0, 3), (3, 4), (4, 9), (9, 12)]
        pl = self.plan(12, [((s, e), (s, e), "causal") for s, e in docs])
        self.assertEqual((pl["docs"], pl["window"]), (docs, (-1, 0)))
        pl = self.plan(12, [((s, e), (s, e), "full") for s, e in docs])
        self.assertEqual((pl["docs"], pl["window"]), (docs, (-1, -1)))

    def test_mixed_documents_refused(self):
        self.unsupported(9, [((0, 4), (0, 4), "full"), ((4, 9), (4, 9), "causal")], says="neither documents")

    def test_windows(self):
        # sliding_window_causal, w = 2, as longca's builder cuts it: causal rows, then a band.
        pl = self.plan(9, [((0, 2), (0, 2), "causal"), ((2, 9), (0, 9), "bicausal")])
        self.assertEqual((pl["docs"], pl["window"]), ([(0, 9)], (2, 0)))
        # sliding_window, w = 2: |q - k| <= 2 over 9 tokens.
        pl = self.plan(9, [((0, 3), (0, 5), "causal"), ((3, 7), (1, 9), "bicausal"), ((7, 9), (5, 9), "invcausal")])
        self.assertEqual((pl["docs"], pl["window"]), ([(0, 9)], (2, 2)))

    def test_window_wider_than_the_sequence_is_unbounded(self):
        pl = self.plan(5, [((0, 5), (0, 5), "causal")])
        self.assertEqual(pl["window"], (-1, 0))

    def test_off_diagonal_refused(self):
        # causal bottom-right on a rectangle: row q sees k <= q + 2, not a square document.
        self.unsupported(8, [((0, 8), (0, 8), "full"), ], sk=10, says="seqlen_q == seqlen_k")
        self.unsupported(6, [((0, 3), (3, 6), "full"), ((3, 6), (0, 3), "full")], says="neither")

    def test_two_ranges_a_row_refused(self):
        # share_question-like: doc 2 sees doc 0 and itself, not doc 1.
        self.unsupported(9, [((0, 3), (0, 3), "causal"), ((3, 6), (3, 6), "causal"), ((6, 9), (6, 9), "causal"),
                             ((6, 9), (0, 3), "full")], says="separate key ranges")

    def test_touching_ranges_merge(self):
        # one row's keys from two slices that touch: [0, 3) and [3, q].
        pl = self.plan(6, [((0, 3), (0, 3), "causal"), ((3, 6), (0, 3), "full"), ((3, 6), (3, 6), "causal")])
        self.assertEqual((pl["docs"], pl["window"]), ([(0, 6)], (-1, 0)))

    def test_uncovered_row_refused(self):
        self.unsupported(6, [((0, 3), (0, 3), "full"), ((4, 6), (4, 6), "full")], says="attends to no key")

    def test_describe(self):
        self.assertEqual(tw.varlen_describe({"docs": [(0, 4), (4, 9)], "window": (-1, 0)}), "2 documents, causal")
        self.assertEqual(tw.varlen_describe({"docs": [(0, 9)], "window": (1024, 0)}), "1 document, window (1024, 0)")


# ---- FlexAttention's backward at 64-token blocks ----------------------------------


@dataclasses.dataclass(frozen=True)
class FakeBwdConfig:  # the fields of Inductor's FlexBwDConfig
    block_m1: int
    block_n1: int
    block_m2: int
    block_n2: int
    num_stages: int
    num_warps: int


class ExtendBwdConfigs(unittest.TestCase):
    def setUp(self):
        class Choices:
            def get_flex_attention_bwd_configs(self, head_dim, dtype, device_type="cuda"):
                return [FakeBwdConfig(64, 128, 128, 64, 3, 8)]  # sm90, head dim 128

        self.choices = Choices
        mods = {"torch": types.ModuleType("torch"), "torch._inductor": types.ModuleType("torch._inductor"),
                "torch._inductor.choices": types.ModuleType("torch._inductor.choices")}
        mods["torch._inductor.choices"].InductorChoices = Choices
        self.saved = {n: sys.modules.get(n) for n in mods}
        sys.modules.update(mods)
        self.addCleanup(self.restore)

    def restore(self):
        for n, m in self.saved.items():
            if m is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = m
        tw._FLEX_BWD_BLOCK = 0

    def test_adds_a_config_only_for_64_token_blocks(self):
        self.assertEqual(tw.extend_flex_bwd_configs(), "")
        self.assertEqual(tw.extend_flex_bwd_configs(), "")  # idempotent
        c = self.choices()
        tw._FLEX_BWD_BLOCK = 0
        self.assertEqual(c.get_flex_attention_bwd_configs(128, "bf16"), [FakeBwdConfig(64, 128, 128, 64, 3, 8)])
        tw._FLEX_BWD_BLOCK = 64
        got = c.get_flex_attention_bwd_configs(128, "bf16", "cuda")
        self.assertEqual(got, [FakeBwdConfig(64, 128, 128, 64, 3, 8), FakeBwdConfig(32, 64, 64, 32, 2, 4)])
        for f in ("block_m1", "block_n1", "block_m2", "block_n2"):
            self.assertEqual(64 % getattr(got[-1], f), 0)

    def test_leaves_a_dividing_list_alone(self):
        self.choices.get_flex_attention_bwd_configs = lambda self, h, d, *a: [FakeBwdConfig(64, 64, 64, 64, 2, 4)]
        tw.extend_flex_bwd_configs()
        tw._FLEX_BWD_BLOCK = 64
        self.assertEqual(self.choices().get_flex_attention_bwd_configs(128, "bf16"), [FakeBwdConfig(64, 64, 64, 64, 2, 4)])

    def test_no_choices_module(self):
        sys.modules["torch._inductor.choices"].InductorChoices = type("InductorChoices", (), {})
        self.assertIn("no get_flex_attention_bwd_configs", tw.extend_flex_bwd_configs())


class NoValidChoicesError(Exception):  # the name Inductor's error has
    pass


class FakeWorker:
    def is_oom(self, e):
        return "out of memory" in str(e)


class FakeFlex(tw.Flex):
    """Flex with prepare reduced to which block size a grid problem gets."""

    def prepare(self, p, bwd=False):
        prep = tw.Prepared()
        prep.block = 128 if (self.no64 or (bwd and self.no64_bwd)) else 64
        prep.variant = f"block mask {prep.block}"
        return prep


class FlexBackwardRetry(unittest.TestCase):
    def setUp(self):
        self.f = FakeFlex(FakeWorker())
        self.p = types.SimpleNamespace(grid=([0, 64], [0, 64], "kept.npy"), key="p")

    def test_64_compiles(self):
        self.assertEqual(self.f.compiled(self.p, "bwd", lambda: "ran"), "ran")
        self.assertTrue(self.f.bwd64_ok)
        self.assertEqual(self.f.timed_variant(self.p, "bwd"), "block mask 64")

    def test_falls_back_to_128(self):
        blocks = []

        def setup():
            b = self.f.prepare(self.p, bwd=True).block
            blocks.append(b)
            if b == 64:
                raise NoValidChoicesError("No choices to select for flex_attention_backward")
            return "ran at 128"

        self.assertEqual(self.f.compiled(self.p, "bwd", setup), "ran at 128")
        self.assertEqual(blocks, [64, 128])
        self.assertIn("NoValidChoicesError", self.f.no64_bwd)
        self.assertEqual(self.f.timed_variant(self.p, "bwd"), "block mask 128")
        self.assertEqual(self.f.timed_variant(self.p, "fwd"), "block mask 64")  # the forward keeps 64

    def test_unsupported_when_neither_compiles(self):
        def setup():
            raise NoValidChoicesError("No choices to select")

        with self.assertRaises(tw.Unsupported) as cm:
            self.f.compiled(self.p, "fwd+bwd", setup)
        self.assertIn("neither at 64-token blocks", str(cm.exception))

    def test_a_runtime_error_at_128_stays_an_error(self):
        def setup():
            if self.f.prepare(self.p, bwd=True).block == 64:
                raise NoValidChoicesError("No choices to select")
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

        with self.assertRaises(RuntimeError):
            self.f.compiled(self.p, "bwd", setup)

    def test_no_unchecked_fallback_after_the_check_compiled(self):
        self.f.compiled(self.p, "bwd", lambda: "check ran at 64")

        def setup():
            raise NoValidChoicesError("No choices to select")

        with self.assertRaises(tw.Unsupported) as cm:
            self.f.compiled(self.p, "bwd", setup)
        self.assertIn("earlier problem", str(cm.exception))

    def test_oom_is_not_retried(self):
        calls = []

        def setup():
            calls.append(1)
            raise RuntimeError("CUDA out of memory")

        with self.assertRaises(RuntimeError):
            self.f.compiled(self.p, "bwd", setup)
        self.assertEqual(len(calls), 1)

    def test_forward_is_not_wrapped(self):
        def setup():
            raise NoValidChoicesError("x")

        with self.assertRaises(NoValidChoicesError):
            self.f.compiled(self.p, "fwd", setup)
        self.assertEqual(self.f.no64_bwd, "")


if __name__ == "__main__":
    unittest.main()
