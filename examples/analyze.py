#!/usr/bin/env python3
"""A worked analysis of longca results: which kernel is fastest per mask, which CP method
wins where, and at what GPU clock they were timed.

    python3 examples/analyze.py out/run-.../<run>.merged.arrow [more merged files ...]

Each argument is a merged results file (`longca merge`, `longca run`): Arrow, Parquet or
CSV, or a folder holding them. pandas reads them; Arrow and Parquet need pyarrow, and
where pyarrow is missing (Debian ships pandas and matplotlib, not pyarrow) the CSV
export beside the Arrow file is read instead (`longca merge DIR --csv --out FILE.arrow`
writes FILE.csv; for a run's own <run>.merged.arrow, the run's rows of DIR/merged.csv,
which `longca merge DIR --csv` writes, serve too). A row read twice counts once.
The columns are the ones docs/results-format.md lists. A merged file made while a run was
still writing (`longca merge DIR` to watch a job) holds the rows of that moment: once its
rank files have grown past the sizes the merge recorded (longca.rank_bytes), it is refused,
naming the merge that writes it anew; an export without that record (an older longca's) whose
rank files were written after it is read with a warning.

It answers four questions, printing one table each (lines that are not data start
with '#', as longca's own tables):

1. Which kernel is fastest per mask? For every mask: the kernel with the highest mean
   TFLOP/s over the cases (length, heads, pass) that every timed kernel ran, how many
   of those cases it won, and its lead over the runner-up. Rows of other problems (head
   dim, dtype, batch, block size and kept ratio, documents) are other cases.
2. Which CP method wins where? For every mask, world size, sequence length, heads and
   pass of `longca cp` rows: the method (with its mesh) with the highest TFLOP/s per GPU,
   averaged over mask samples, and its lead over the next method.
3. At what clock were they timed? For every kernel (and CP method, every rank's rows) timed
   on a GPU: its rows' SM clock (median of the rows' means, and the lowest reading), the
   hottest reading and how many rows saw the power cap hold the clock down (the columns
   sm_clock_mhz, sm_clock_min_mhz, temp_c and clock_events, read through NVML; rows from the
   CPU or from files written before these columns have none).
4. Where did they run? Per host, card (model and the start of its device_uuid), longca
   version and env (the NCCL, CUDA and torch variables set): how many rows, of which benches.

Exits 0 with the tables, 2 with one line when an input cannot be read, 1 without a word
when the reader of its output stops early (`| head`).
"""

import hashlib
import json
import os
import shlex
import struct
import sys

try:
    import pandas as pd
except ImportError:  # pragma: no cover - said once, clearly
    sys.exit("analyze.py: needs pandas (apt-get install python3-pandas, or pip install pandas)")

try:
    import pyarrow  # noqa: F401  (pandas reads Arrow and Parquet through it)
    import pyarrow.ipc

    HAVE_PYARROW = True
except ImportError:
    HAVE_PYARROW = False


def fail(msg):
    print("analyze.py: " + msg, file=sys.stderr)
    sys.exit(2)


def run_of(path):
    """The run id of a run's own merged file, <run>.merged.arrow (what `longca run`, `cp --ranks`
    and `simulate` write); None for `longca merge`'s default name, merged.arrow."""
    name = os.path.basename(path)
    for ext in (".arrow", ".parquet"):
        if name.endswith(".merged" + ext) and name != "merged" + ext:
            return name[: -len(".merged" + ext)]
    return None


def rank_files(folder, run=None):
    """The rank files (<run>.rank-<r>-of-<n>.arrow) in folder, of run where given."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [n for n in names if ".rank-" in n and n.endswith(".arrow") and (run is None or n.startswith(run + ".rank-"))]


def read_without_pyarrow(path, stem):
    """An Arrow or Parquet file's rows where pyarrow is missing: its CSV export beside it
    (<stem>.csv), else, for a run's own file (<run>.merged.arrow), that run's rows of the
    folder's merged.csv (`longca merge DIR --csv`). Neither: one line naming a command that
    writes the CSV this looks for (`longca merge DIR --csv` alone writes DIR/merged.csv, which
    the hint's own file name never matched)."""
    csv = stem + ".csv"
    if os.path.exists(csv):
        return pd.read_csv(csv), csv
    folder = os.path.dirname(path) or "."
    run = run_of(path)
    merged = os.path.join(folder, "merged.csv")
    if run is not None and os.path.exists(merged):
        df = pd.read_csv(merged)
        if "run_id" in df.columns:
            df = df[df["run_id"].astype(str) == run]
            if len(df):
                print(f"analyze.py: no pyarrow here to read {path}: run {run}'s {len(df)} rows read from {merged}",
                      file=sys.stderr)
                return df.reset_index(drop=True), merged
    q = shlex.quote
    if rank_files(folder, run):
        only = f" --run {q(run)}" if run is not None else ""
        fail(f"{path}: no pyarrow here to read Arrow, and no CSV export beside it ({csv}): write it with "
             f"`longca merge {q(folder)}{only} --csv --out {q(path)}` (the same Arrow file again, from its rank files, "
             f"and {os.path.basename(csv)} beside it), or install pyarrow")
    fail(f"{path}: no pyarrow here to read Arrow, no CSV export beside it ({csv}), and no rank files beside it to "
         f"write one from: install pyarrow, or run `longca merge RANKDIR --csv --out RANKDIR/{os.path.basename(path)}` "
         f"where its rank files are and give that CSV")


def read_one(path):
    """Reads one merged file: Arrow or Parquet through pyarrow, else its CSV export; refuses
    one that is out of date (check_fresh)."""
    stem, ext = os.path.splitext(path)
    if ext == ".csv":
        df, src = pd.read_csv(path), path
    elif ext in (".arrow", ".parquet"):
        if HAVE_PYARROW:
            if ext == ".parquet":
                df = pd.read_parquet(path)
            else:
                with open(path, "rb") as f:
                    df = pyarrow.ipc.open_file(f).read_all().to_pandas()
            src = path
        else:
            df, src = read_without_pyarrow(path, stem)
    else:
        fail(f"{path}: not a merged results file (.arrow, .parquet or .csv)")
    check_fresh(path, src, df)
    return df


def arrow_metadata(path):
    """The schema metadata of an Arrow IPC file (longca merge's) as a dict of str, read from
    its footer without pyarrow (a few KB at its end, not its rows); {} where it has none or
    the footer cannot be read."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            if size < 18:
                return {}
            f.seek(size - 10)
            tail = f.read(10)
            n = struct.unpack("<i", tail[:4])[0]
            if tail[4:] != b"ARROW1" or n <= 0 or n > size - 18:
                return {}
            f.seek(size - 10 - n)
            buf = f.read(n)

        # The footer is a flatbuffer: Footer{version, schema: Schema{endianness, fields,
        # custom_metadata: [KeyValue{key, value}]}, ...}.
        def u32(at):
            return struct.unpack_from("<I", buf, at)[0]

        def field(table, i):  # where field i of the table lies, or None
            vt = table - struct.unpack_from("<i", buf, table)[0]
            if 4 + 2 * i >= struct.unpack_from("<H", buf, vt)[0]:
                return None
            off = struct.unpack_from("<H", buf, vt + 4 + 2 * i)[0]
            return table + off if off else None

        def ref(at):
            return at + u32(at)

        def text(at):
            s = ref(at)
            return buf[s + 4: s + 4 + u32(s)].decode()

        schema = field(u32(0), 1)
        md = field(ref(schema), 2) if schema is not None else None
        if md is None:
            return {}
        vec, out = ref(md), {}
        for i in range(u32(vec)):
            kv = ref(vec + 4 + 4 * i)
            k, v = field(kv, 0), field(kv, 1)
            if k is not None and v is not None:
                out[text(k)] = text(v)
        return out
    except (OSError, struct.error, UnicodeDecodeError, ValueError):
        return {}


def rank_size_changes(folder, record):
    """What changed in folder's rank files since a merge that recorded their sizes (the
    longca.rank_bytes metadata: {run: {"of": n, "bytes": {rank: size}}}): a rank file of
    another size now (its writer went on after the merge), or one that was not there. A rank
    file deleted since changes nothing: the merged file holds its rows. None where the
    record does not parse."""
    try:
        changes = []
        for run, r in sorted(record.items()):
            of, sizes = int(r["of"]), {str(k): int(v) for k, v in r["bytes"].items()}
            for rank, was in sorted(sizes.items()):
                try:
                    now = os.path.getsize(os.path.join(folder, f"{run}.rank-{rank}-of-{of}.arrow"))
                except OSError:
                    continue
                if now != was:
                    changes.append(f"run {run}: rank {rank} of {of} is {now} bytes, {was} when merged")
            for name in sorted(rank_files(folder, run)):
                rank, _, rest = name[len(run) + len(".rank-"):].partition("-of-")
                if rest == f"{of}.arrow" and rank not in sizes:
                    changes.append(f"run {run}: rank {rank} of {of} was written since")
        return changes
    except (AttributeError, KeyError, TypeError, ValueError):
        return None


def check_fresh(path, src, df):
    """Refuses (exit 2, one line) a merged file that no longer holds what its rank files
    beside it do: `longca merge DIR` run while a run was still writing copies the rows so
    far, and the analysis of such a file silently lacked the rest (5 of 12 rows). src is the
    file read for path (its CSV export where pyarrow is missing). The merge's record of its
    rank files' sizes (in the Arrow file, or the Arrow file a CSV or Parquet export was
    written with) tells for sure; where there is none, a rank file of the file's runs
    written after it makes a warning."""
    folder = os.path.dirname(src) or "."
    arrow = os.path.splitext(src)[0] + ".arrow"
    record = None
    try:
        if os.path.exists(arrow) and os.path.getmtime(src) >= os.path.getmtime(arrow):
            raw = arrow_metadata(arrow).get("longca.rank_bytes")
            record = json.loads(raw) if raw else None
    except (OSError, ValueError):
        record = None
    q = shlex.quote
    if isinstance(record, dict):
        changes = rank_size_changes(folder, record)
        if changes:
            run = run_of(arrow)
            only = f" --run {q(run)}" if run is not None else ""
            exports = "".join(f" --{e}" for e in ("csv", "parquet") if src.endswith("." + e))
            out = "" if os.path.basename(arrow) == "merged.arrow" else f" --out {q(arrow)}"
            more = f"; and {len(changes) - 3} more" if len(changes) > 3 else ""
            fail(f"{src} is out of date: {'; '.join(changes[:3])}{more} (it was merged while its run was writing): "
                 f"write it anew with `longca merge {q(folder)}{only}{exports}{out}` (or `longca report {q(folder)}` reads the rank files)")
        if changes is not None:
            return
    if "run_id" not in df.columns:
        return
    try:
        written = os.path.getmtime(src)
        late = [n for run in sorted(set(df["run_id"].dropna().astype(str)))
                for n in sorted(rank_files(folder, run)) if os.path.getmtime(os.path.join(folder, n)) > written]
    except OSError:
        return
    if late:
        print(f"analyze.py: warning: {src} may be out of date: {', '.join(late[:3])} written after it "
              f"(run `longca merge {q(folder)}` again if a run was still writing when it was merged)", file=sys.stderr)


def inputs(args):
    """The files named, a folder standing for its merged files (CSV when no pyarrow)."""
    out = []
    for a in args:
        if os.path.isdir(a):
            names = sorted(os.listdir(a))
            want = (".arrow", ".parquet") if HAVE_PYARROW else (".csv",)
            found = [os.path.join(a, n) for n in names
                     if n.endswith(want) and "merged" in n and ".rank-" not in n]
            if not HAVE_PYARROW and not found:
                fail(f"{a}: no merged CSV here and no pyarrow to read Arrow: run `longca merge {a} --csv`")
            if not found:
                fail(f"{a}: no merged results file here: run `longca merge {a}`")
            out.extend(found)
        elif os.path.exists(a):
            out.append(a)
        else:
            fail(f"{a}: no such file or folder")
    return out


# The columns beside mask, length, heads and pass that make another problem: rows that
# differ in one of them are other cases, never averaged together (files merged from runs at
# two head dims, dtypes, block sizes or document sources).
PROBLEM = ["head_dim", "dtype", "batch", "block_size", "kept_ratio", "mask_setting", "doc_source", "max_doc", "card", "settle_ms",
           "backend", "versions", "model", "env"]
# columns that may differ between the samples (seeds) of one case of one run: a mask
# parameter drawn per seed (prefix_lm's prefix), the path a kernel named for a sample
PER_SAMPLE_COLS = {"mask_setting", "variant_key"}
# A CP run's own settings besides its mesh: rows that differ in one are other cases too.
# (not cp_layout and cp_stages: with --cp-layout auto they are each sample's plan's outcome)
CP_SETTINGS = ["cp_sharding", "cp_block", "cp_inner_dim", "ranks_per_device"]
# mask parameters that differ from one document sample to the next of one case (averaged)
PER_SAMPLE = {"doc_lengths", "doc_count", "dist", "max_doc"}


def params_key(v):
    """A row's mask parameters less the per-sample ones, as text ("-" for none)."""
    if not isinstance(v, str) or not v:
        return "-"
    try:
        p = json.loads(v)
    except ValueError:
        return v
    p = {k: x for k, x in p.items() if k not in PER_SAMPLE}
    return json.dumps(p, sort_keys=True) if p else "-"


def card(v):
    """The GPU kind of a device name: "cuda:3 NVIDIA H100 80GB HBM3" gives "H100 80GB HBM3"."""
    if not isinstance(v, str):
        return "-"
    if v.startswith("cuda:") and " " in v:
        v = v.split(" ", 1)[1]
    return v.removeprefix("NVIDIA ")


def variant_key(v):
    """The code asked for in a kernel_variant: its first word that is not a pass (cuda's
    sm90, cuDNN's sdpa-op), with +deterministic; the later words name a case's path."""
    if not isinstance(v, str):
        return "-"
    words = [w for w in v.replace(";", " ").replace(",", " ").split() if w]
    key = next((w for w in words if w not in ("fwd", "bwd")), "-")
    return key + ("+deterministic" if "deterministic" in words else "")


def key_text(v):
    """A problem column's value as text for grouping: "-" for null, 128 rather than 128.0."""
    if pd.isna(v):
        return "-"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def load(args):
    frames = [read_one(p) for p in inputs(args)]
    df = pd.concat(frames, ignore_index=True)
    # a row read twice (a folder's merged.csv beside a run's <run>.merged.csv, or the same file
    # given twice) counts once: the same in every column (its time, checksum) is the same row
    if len(frames) > 1:
        df = df.drop_duplicates(ignore_index=True)
    # CSV leaves nulls empty: make the numbers numbers again.
    for c in ("tflops", "median_ms", "seqlen", "world_size", "heads_q", "heads_kv", "cp_ulysses", "cp_ring", "cp_windows", "rank",
              "sm_clock_mhz", "sm_clock_min_mhz", "power_w", "temp_c", "gpu_samples", "settle_ms"):
        if c in df.columns:
            df[c] = pd.to_numeric(df[c], errors="coerce")
    if "mask_params" in df.columns:
        df["mask_setting"] = df["mask_params"].map(params_key)
    if "device" in df.columns:
        df["card"] = df["device"].map(card)
    if "kernel_variant" in df.columns:
        df["variant_key"] = df["kernel_variant"].map(variant_key)
    if "kernel_versions" in df.columns:
        df["versions"] = df["kernel_versions"]
    if "env" in df.columns:  # the run's NCCL/CUDA/torch variables; "{}" (none set) reads as an older file's ""
        df["env"] = df["env"].map(lambda v: "-" if not isinstance(v, str) or v in ("", "{}") else v)
    if "model_params" in df.columns:  # emulated links (cp --links); simulate's rows name their model per GPU count
        sim = df["backend"] == "sim" if "backend" in df.columns else False
        short = df["model_params"].map(lambda v: "model-" + hashlib.sha256(v.encode()).hexdigest()[:8] if isinstance(v, str) and v else "-")
        df["model"] = short.where(~sim, "-")
    # groupby leaves out null keys: the problem columns as text, null as "-"
    for c in PROBLEM + CP_SETTINGS:
        if c in df.columns:
            df[c] = df[c].map(key_text)
    return df


def with_seed(df, group, col):
    """group, with the seed where col may differ between samples of one case."""
    return group + (["seed"] if col in PER_SAMPLE_COLS and "seed" in df.columns else [])


def refine(df, group, col, by):
    """col with by's value appended ("cuda[sm80]") where rows of one group differ in by."""
    if by in df.columns and not df.empty and (df.groupby(with_seed(df, group, by) + [col], sort=False)[by].nunique() > 1).any():
        df = df.copy()
        df[col] = df[col] + "[" + df[by] + "]"
    return df


def varying(df, base, cols):
    """The problem columns that take two or more values among rows of one case by the base
    columns (the others add nothing: a document source that only comes with the document
    masks tells no two rows of a case apart)."""
    out = []
    for c in cols:
        if c in df.columns and not df.empty and (df.groupby(with_seed(df, base, c), sort=False)[c].nunique() > 1).any():
            out.append(c)
    return out


def fastest_kernel_per_mask(df):
    """Question 1: per mask, the kernel with the highest mean TFLOP/s over shared cases."""
    k = df[df["bench"].isin(["kernel", "sparse"]) & (df["status"] == "ok") & df["tflops"].notna()]
    if k.empty:
        return None
    case = ["mask", "seqlen", "heads_q", "heads_kv", "pass"]
    case += varying(k, case + ["kernel"], PROBLEM)
    k = refine(k, case, "kernel", "variant_key")  # --variant runs side by side: columns of their own
    # Mean over ranks (every rank of a launched kernel sweep times the same cases).
    per = k.groupby(case + ["kernel"], as_index=False)["tflops"].mean()
    out = []
    for mask, m in per.groupby("mask", sort=False):
        kernels = sorted(m["kernel"].unique())
        # The cases every kernel of this mask ran: a fair mean.
        wide = m.pivot_table(index=case, columns="kernel", values="tflops").dropna()
        if wide.empty:
            wide = m.pivot_table(index=case, columns="kernel", values="tflops")
        means = wide.mean().sort_values(ascending=False)
        wins = wide.idxmax(axis=1).value_counts()
        best = means.index[0]
        lead = means.iloc[0] / means.iloc[1] if len(means) > 1 and means.iloc[1] > 0 else float("nan")
        out.append({
            "mask": mask,
            "fastest": best,
            "mean_tflops": means.iloc[0],
            "won": f"{int(wins.get(best, 0))}/{len(wide)}",
            "runner_up": means.index[1] if len(means) > 1 else "-",
            "lead": lead,
            "kernels": len(kernels),
        })
    return pd.DataFrame(out)


def mesh_label(r, whole=False):
    label = r["method"]
    u, g = r.get("cp_ulysses"), r.get("cp_ring")
    if pd.notna(u) and pd.notna(g) and (whole or (u > 1 and g > 1)):
        label += f"-{int(u)}x{int(g)}"
    w = r.get("cp_windows")
    if pd.notna(w) and w > 1:
        label += f"-w{int(w)}"
    return label


def cp_winners(df):
    """Question 2: per mask, world size, length, heads and pass, the fastest CP method."""
    c = df[(df["bench"] == "cp") & (df["status"] == "ok") & df["tflops"].notna()].copy()
    if "rank" in c.columns:
        c = c[c["rank"] == 0]  # the ranks agree on a case's time; rank 0 speaks for them
    if c.empty:
        return None
    c["method_mesh"] = c.apply(mesh_label, axis=1)
    where = ["mask", "world_size", "seqlen", "heads_q", "heads_kv", "pass"]
    # balanced on 1x8 and 8x1 in one run: the whole mesh
    c["whole_mesh"] = c.apply(lambda r: mesh_label(r, whole=True), axis=1)
    if (c.groupby(where + ["method_mesh"], sort=False)["whole_mesh"].nunique() > 1).any():
        c["method_mesh"] = c["whole_mesh"]
    c = refine(c, where, "method_mesh", "kernel")  # cp --kernel cuda and cudnn runs in one folder
    c = refine(c, where, "method_mesh", "variant_key")
    where += varying(c, where + ["method_mesh"], PROBLEM + CP_SETTINGS)
    per = c.groupby(where + ["method_mesh"], as_index=False)["tflops"].mean()  # over samples
    out = []
    for key, g in per.groupby(where, sort=False):
        g = g.sort_values("tflops", ascending=False)
        top, nxt = g.iloc[0], (g.iloc[1] if len(g) > 1 else None)
        out.append(dict(zip(where, key)) | {
            "winner": top["method_mesh"],
            "tflops_per_gpu": top["tflops"],
            "next": nxt["method_mesh"] if nxt is not None else "-",
            "lead": top["tflops"] / nxt["tflops"] if nxt is not None and nxt["tflops"] > 0 else float("nan"),
            "methods": len(g),
        })
    return pd.DataFrame(out)


def gpu_state(df):
    """Question 3: per kernel (or CP method), the GPU's clock while its rows were timed."""
    if "sm_clock_mhz" not in df.columns:
        return None
    g = df[(df["status"] == "ok") & df["sm_clock_mhz"].notna()].copy()
    if g.empty:
        return None
    g["who"] = g["method"].where(g["bench"] == "cp", g["kernel"]) if "method" in g.columns else g["kernel"]
    events = g["clock_events"].fillna("") if "clock_events" in g.columns else pd.Series("", index=g.index)
    g["power_capped"] = events.str.contains("sw_power_cap")
    out = g.groupby("who", sort=False).agg(
        rows=("sm_clock_mhz", "size"),
        clock_mhz=("sm_clock_mhz", "median"),
        lowest_mhz=("sm_clock_min_mhz", "min"),
        hottest_c=("temp_c", "max"),
        power_capped=("power_capped", "sum"),
    )
    return out.reset_index().rename(columns={"who": "kernel"})


def where_ran(df):
    """Question 4: where the rows ran: per host, card (its model and the start of its UUID),
    longca version and environment settings (env), how many rows and of which benches."""
    w = pd.DataFrame(index=df.index)
    for c in ("host", "card", "version", "env"):
        w[c] = df[c].fillna("-").astype(str).replace("", "-") if c in df.columns else "-"
    uuid = df["device_uuid"].fillna("").astype(str) if "device_uuid" in df.columns else pd.Series("", index=df.index)
    w["card"] = w["card"] + uuid.map(lambda u: " " + u[:12] if u else "")
    w["bench"] = df["bench"].fillna("-").astype(str) if "bench" in df.columns else "-"
    out = w.groupby(["host", "card", "version", "env"], sort=False).agg(
        rows=("bench", "size"), benches=("bench", lambda b: ",".join(sorted(set(b)))))
    return out.reset_index()


def show(title, t):
    print(f"# {title}")
    if t is None:
        print("#   (no rows of this kind in the input)")
        return
    text = t.to_string(index=False, float_format=lambda v: f"{v:.4g}")
    lines = text.splitlines()
    print("#" + lines[0][1:] if lines[0].startswith(" ") else "# " + lines[0])
    for line in lines[1:]:
        print(line)


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    df = load(argv[1:])
    reader = "pyarrow" if HAVE_PYARROW else "the CSV export"
    print(f"# longca analysis of {', '.join(argv[1:])}: {len(df)} rows (read with pandas and {reader})")
    show("1. which kernel is fastest per mask (mean TFLOP/s over the cases every kernel ran)", fastest_kernel_per_mask(df))
    print("#")
    show("2. which CP method wins where (TFLOP/s per GPU, mean over samples, rank 0)", cp_winners(df))
    print("#")
    show("3. the GPU's SM clock while each kernel (CP method: every rank's rows) was timed (NVML's readings)", gpu_state(df))
    print("#")
    show("4. where the rows ran (host, card and the start of its UUID, longca version, env: '-' for none set or not recorded)", where_ran(df))
    return 0


if __name__ == "__main__":
    try:
        code = main(sys.argv)
        sys.stdout.flush()
    except BrokenPipeError:
        # the reader stopped early (`| head`): end quietly, as a command-line tool does;
        # stdout goes to devnull so that Python's own flush at exit cannot fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    sys.exit(code)
