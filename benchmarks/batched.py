"""Benchmark suite: many one-to-all trees at once (the batched GPU mode as users call it).

Side by side in one run on one machine: scipy's Dijkstra over many sources (one CPU core), our numba
Dijkstra (parallel over sources, every core), and near-far batched on the GPU with

* the pass size (``batch``) swept, and ``algorithm="auto"``'s own choice;
* results left on the device (CuPy sources), copied to NumPy the way main did (a CuPy call, then
  ``.get()`` into pageable memory), and the new NumPy path (NumPy sources: pages locked, each pass's
  copy overlapped with the next pass);
* int64 and uint32 distances.

Floors (METHOD.md): the device-to-host copy of the result at the measured pinned bandwidth, and the
device-side time of the same call with CuPy sources (what a host copy can at best hide behind).

Usage (GPU machine, from the repo root):
    PYTHONPATH=src python3 benchmarks/batched.py --out OUTDIR [--sources 1024]
Writes OUTDIR/batched.json and prints Markdown rows for BENCHMARKS.md.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import gpuroute  # noqa: E402


def commit():
    if os.environ.get("GPUROUTE_COMMIT"):
        return os.environ["GPUROUTE_COMMIT"]
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True).strip()
    except Exception:
        return "unknown"


def timed(cp, fn, reps=3):
    ts = []
    for _ in range(reps):
        cp.cuda.Device().synchronize()
        t = time.perf_counter()
        fn()
        cp.cuda.Device().synchronize()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)) * 1e3


def d2h_bandwidth(cp, nbytes=1 << 30):
    """Device-to-host copy bandwidth into pinned and into (fresh) pageable memory, bytes/s."""
    import cupyx

    a = cp.ones(nbytes // 8, dtype=cp.int64)
    pinned = cupyx.empty_pinned(a.shape, dtype=a.dtype)
    a.get(out=pinned)
    t = time.perf_counter()
    a.get(out=pinned)
    pin = nbytes / (time.perf_counter() - t)
    t = time.perf_counter()
    a.get()  # a fresh NumPy array: pageable, first touch included (what a caller pays)
    page = nbytes / (time.perf_counter() - t)
    return pin, page


def gpu_rows(cp, g, gname, src, ref, pin_bw, rows):
    """The GPU rows of one graph (see the module doc)."""
    from gpuroute.sssp.buckets.gpu import auto_batch

    n, k = g.n_nodes, src.size
    src_cp = cp.asarray(src)

    def row(label, fn, out_bytes, check):
        fn()  # warm-up (solver, CUDA graph capture, pinned pool)
        ms = timed(cp, fn)
        d = check()
        d8 = np.asarray(d[:8]).astype(np.int64)
        if np.asarray(d).dtype == np.uint32:
            d8 = np.where(d8 == gpuroute.INF_U32, gpuroute.INF, d8)
        ok = bool(np.array_equal(d8, ref[:8]))
        floor = out_bytes / pin_bw * 1e3 if out_bytes else 0.0
        r = {"graph": gname, "method": label, "ms": ms, "sources": k, "trees_per_s": k / (ms / 1e3),
             "exact": ok, "copy_floor_ms": floor}
        rows.append(r)
        print(f"| {gname} | {label} | {ms:,.1f} ms | {r['trees_per_s']:,.0f} trees/s | copy floor {floor:.1f} ms"
              f" | exact {ok} |", flush=True)
        return ms

    for batch in (64, 128, 256, 512, 1024, None):
        b = {"batch": batch} if batch else {}
        lab = f"x{batch}" if batch else f"auto (x{auto_batch(n, k)})"
        row(f"near-far {lab}, CuPy sources, int64 on the device",
            lambda b=b: gpuroute.sssp(g, src_cp, algorithm="near-far", device="gpu", **b), 0,
            lambda b=b: gpuroute.sssp(g, src_cp[:8], algorithm="near-far", device="gpu", **b).get())
    for dtype, bytes_per in (("int64", 8), ("uint32", 4)):
        row(f"auto, CuPy sources, {dtype} on the device",
            lambda d=dtype: gpuroute.sssp(g, src_cp, device="gpu", dtype=d), 0,
            lambda d=dtype: gpuroute.sssp(g, src_cp[:8], device="gpu", dtype=d).get())
        row(f"auto, CuPy call then .get() (main's NumPy path), {dtype}",
            lambda d=dtype: gpuroute.sssp(g, src_cp, device="gpu", dtype=d).get(), k * n * bytes_per,
            lambda d=dtype: gpuroute.sssp(g, src_cp[:8], device="gpu", dtype=d).get())
        row(f"auto, NumPy sources (pinned, copies overlapped), {dtype}",
            lambda d=dtype: gpuroute.sssp(g, src, device="gpu", dtype=d), k * n * bytes_per,
            lambda d=dtype: gpuroute.sssp(g, src[:8], device="gpu", dtype=d))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "out"))
    ap.add_argument("--sources", type=int, default=1024)
    ap.add_argument("--graphs", nargs="*", default=["NY", "BAY"])
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import cupy as cp
    from scipy.sparse.csgraph import dijkstra as scipy_dijkstra

    from gpuroute.sssp.buckets.gpu import auto_batch

    dev = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    pin_bw, page_bw = d2h_bandwidth(cp)
    print(f"# device {dev}; D2H pinned {pin_bw / 1e9:.1f} GB/s, pageable (fresh array) {page_bw / 1e9:.1f} GB/s; "
          f"{os.cpu_count()} CPU cores", flush=True)
    results = {"device": dev, "commit": commit(), "date": dt.date.today().isoformat(), "d2h_pinned_Bps": pin_bw,
               "d2h_pageable_Bps": page_bw, "cpu_cores": os.cpu_count(), "rows": []}
    rows = results["rows"]
    rng = np.random.default_rng(7)
    for gname in args.graphs:
        if gname == "NY":
            g = gpuroute.datasets.load("ny")
        else:
            p = ROOT / "local_data" / "USA-road-d.BAY.gr.gz"
            if not p.exists():
                print(f"## {gname}: {p} missing, skipped", flush=True)
                continue
            g = gpuroute.load_dimacs(p)
        n, k = g.n_nodes, args.sources
        src = rng.integers(0, n, k)
        print(f"\n## {gname}: n={n:,}, {k} sources; auto batch = {auto_batch(n, k)}", flush=True)
        # CPU peers, same machine
        csr = g.to_scipy()
        t = time.perf_counter()
        scipy_dijkstra(csr, indices=src[:16])
        sc = 16 / (time.perf_counter() - t)
        gpuroute.sssp(g, src[:2], device="cpu")  # compile
        t = time.perf_counter()
        ref = gpuroute.sssp(g, src[:256], device="cpu")
        nb = 256 / (time.perf_counter() - t)
        rows += [{"graph": gname, "method": "scipy dijkstra (1 core)", "trees_per_s": sc},
                 {"graph": gname, "method": f"gpuroute dijkstra (numba, {os.cpu_count()} cores)", "trees_per_s": nb}]
        print(f"| {gname} | scipy dijkstra (CPU, 1 core) | {sc:,.0f} trees/s |", flush=True)
        print(f"| {gname} | gpuroute dijkstra (CPU, numba, {os.cpu_count()} cores) | {nb:,.0f} trees/s |", flush=True)
        gpu_rows(cp, g, gname, src, ref, pin_bw, rows)
        with open(os.path.join(args.out, "batched.json"), "w") as f:
            json.dump(results, f, indent=1, default=float)
        from gpuroute.sssp.api import release

        release(g)
        del g
        cp.get_default_memory_pool().free_all_blocks()
    print("\nDone.")


if __name__ == "__main__":
    main()
