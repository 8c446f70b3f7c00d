"""Benchmark suite: cell-local Bellman-Ford (``algorithm="cell-bf"``) configurations and its round profile.

For NY and BAY (and tiled NY where asked): every (threads per cell, nodes per thread, reps, in-arc
slots) configuration below, timed as the median of one ``gpuroute.sssp_full`` call per source (CuPy
sources, results left on the device) after a warm-up, checked against the CPU Dijkstra; then, for the
default configuration, the in-kernel profile (``cells.cu``): rounds, cells run per round, the sum over
rounds of the slowest block's local iterations and clock cycles. Next to it the fused conventional
method, the best previous single-source method, on the same sources.

Usage (GPU machine, from the repo root):
    PYTHONPATH=src python3 benchmarks/cell_bf_sweep.py --out OUTDIR [--graphs NY BAY "NY tiled 4x4"]
Writes OUTDIR/cell_bf_sweep.json and prints a table.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from sssp_one_to_all import Timer, commit, find_bay  # noqa: E402

import gpuroute  # noqa: E402

CONFIGS = [
    ("conventional fused", "conventional", {}),
    ("adaptive count", "adaptive", {"variant": "count"}),
    ("selection", "selection", {}),
    ("cell-bf rounds t256", "cell-bf", {"loop": "rounds"}),
    ("cell-bf rounds t512", "cell-bf", {"loop": "rounds", "threads": 512}),
    ("cell-bf async t128", "cell-bf", {"loop": "async", "threads": 128}),
    ("cell-bf async t256", "cell-bf", {"loop": "async"}),
    ("cell-bf async t256 npt2", "cell-bf", {"loop": "async", "nodes_per_thread": 2}),
    ("cell-bf async t512", "cell-bf", {"loop": "async", "threads": 512}),
    ("cell-bf async t1024", "cell-bf", {"loop": "async", "threads": 1024}),
    ("cell-bf async t256 maxin4", "cell-bf", {"loop": "async", "max_in": 4}),
    ("cell-bf async t256 hilbert", "cell-bf", {"loop": "async", "order": "hilbert"}),
]


#: --configs adaptive: the adaptive method (both switches, calibrated and forced thresholds) against the
#: two it switches between; a 4th element overrides gpuroute.config for that row
ADAPTIVE_CONFIGS = [
    ("conventional fused", "conventional", {}),
    ("conventional fused unpipelined", "conventional", {"pipelined": False}),
    ("adaptive time (calibrated)", "adaptive", {"variant": "time"}),
    ("adaptive time unpipelined", "adaptive", {"variant": "time", "pipelined": False}),
    ("adaptive count (calibrated)", "adaptive", {"variant": "count"}),
    ("adaptive count frac=0.002", "adaptive", {"variant": "count", "frac": 0.002}),
    ("selection", "selection", {}),
    ("conventional fused (again)", "conventional", {}),
]

def graphs_by_name(names):
    out = []
    for nm in names:
        if nm == "NY":
            out.append((nm, lambda: gpuroute.datasets.load("ny")))
        elif nm == "NY-time":
            out.append((nm, lambda: gpuroute.datasets.load("ny-time")))
        elif nm == "BAY":
            bay = find_bay()
            if bay:
                out.append((nm, lambda bay=bay: gpuroute.load_dimacs(bay)))
        elif nm.startswith("NY tiled"):
            k = int(nm.split()[-1].split("x")[0])
            out.append((nm, lambda k=k: gpuroute.datasets.tile(gpuroute.datasets.load("ny"), k, k)))
    return out


def profile(cp, g, source, opts):
    """Round profile of cell-bf in rounds (cells.cu's prof array): per round cells run, local iterations
    (sum, max) and the slowest block's cycles loading its cell and relaxing it (local passes +
    write-back); and the activation counters of the asynchronous kernel."""
    from gpuroute.backend.device_graph import DeviceGraph
    from gpuroute.backend.flags import STATS_CAP
    from gpuroute.sssp.cell_bf.gpu import CellBFGPU

    dg = DeviceGraph(g)
    s = CellBFGPU(dg, loop="rounds", **opts)
    s.prof = cp.zeros(8 * STATS_CAP, dtype=cp.uint64)
    _, _, st = s.run(int(source))
    r = st["phases"]
    p = s.prof[: 8 * r].get().reshape(r, 8).astype(np.int64)
    clock_khz = cp.cuda.Device().attributes["ClockRate"]
    out = {"rounds": int(r), "cells_run": int(p[:, 0].sum()), "cells_per_round_max": int(p[:, 0].max()),
           "local_its_sum": int(p[:, 1].sum()), "critical_its": int(p[:, 2].sum()),
           "critical_load_us": float(p[:, 3].sum() / clock_khz * 1e3),
           "critical_relax_us": float(p[:, 4].sum() / clock_khz * 1e3),
           "clock_mhz": clock_khz / 1e3, "cell_size": st["cell_size"], "n_cells": st["n_cells"]}
    a = CellBFGPU(dg, loop="async", **opts)
    _, _, sta = a.run(int(source))
    if sta["loop"] == "async":
        c = a.last_counters
        out.update({"async_grid": a.grid_async, "async_cells_per_block": a.cells_per_block,
                    "async_activations": int(c[0]), "async_writebacks": int(c[1]), "async_local_its": int(c[2])})
    else:
        out["async_error"] = getattr(a, "async_error", "guard")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "out"))
    ap.add_argument("--graphs", nargs="*", default=["NY", "BAY"])
    ap.add_argument("--sources", type=int, default=5)
    ap.add_argument("--configs", choices=["cell", "adaptive"], default="cell")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import cupy as cp

    dev = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    rows = []
    res = {"device": dev, "commit": commit(), "date": time.strftime("%Y-%m-%d"), "rows": rows, "profiles": {}}
    rng = np.random.default_rng(7)
    for gname, make in graphs_by_name(args.graphs):
        g = make()
        srcs = rng.integers(0, g.n_nodes, args.sources)
        refs = gpuroute.sssp(g, srcs, device="cpu")
        print(f"\n## {gname}: n={g.n_nodes:,} m={g.n_arcs:,}", flush=True)
        for label, alg, opts, *over in (CONFIGS if args.configs == "cell" else ADAPTIVE_CONFIGS):
            if alg == "selection" and g.n_nodes > 8_000_000:
                continue  # ~23 s a call on tiled NY 8x8 (BENCHMARKS.md)
            saved = {k: getattr(gpuroute.config, k) for k in (over[0] if over else {})}
            for k, v in (over[0] if over else {}).items():
                setattr(gpuroute.config, k, v)
                g.__dict__.pop("_solver_cache", None)  # the solver reads config when built
            try:
                gpuroute.sssp_full(g, cp.asarray(srcs[:1]), algorithm=alg, device="gpu", **opts)  # warm-up
                per, phases, ok = [], [], True
                for i, s in enumerate(srcs):
                    sc = cp.asarray([int(s)])
                    per.append(Timer(cp).gpu(lambda sc=sc, g=g, alg=alg, opts=opts: gpuroute.sssp_full(
                        g, sc, algorithm=alg, device="gpu", **opts), args.reps)[0])
                    r = gpuroute.sssp_full(g, sc, algorithm=alg, device="gpu", **opts)
                    ok &= bool(np.array_equal(r.dist.get()[0], refs[i]))
                    phases.append(int(np.asarray(r.stats["phases"]).ravel()[0]))
                row = {"graph": gname, "method": label, "ms": float(np.median(per)), "ms_all": per,
                       "phases": phases, "exact": ok, "cell_size": r.stats.get("cell_size"),
                       "loop": r.stats.get("loop")}
                extra = ""
                if alg == "adaptive" or label.startswith("conventional fused"):
                    # one more run with the device clock's phase stamps: where the time goes, per phase kind
                    t = gpuroute.sssp_full(g, cp.asarray(srcs[:1]), algorithm=alg, device="gpu", phase_times=True,
                                           **opts).stats
                    times = np.asarray(t["times_us"][0])
                    modes = t.get("modes", [None])[0]
                    modes = np.zeros(len(times), dtype=np.int8) if modes is None else np.asarray(modes)
                    row["by_kind"] = {kind: {"phases": int(np.sum(modes == i)), "us": float(times[modes == i].sum())}
                                      for i, kind in enumerate(("all-node", "all-node+build", "queue"))}
                    for key in ("up_us", "down_us", "t_all_us", "t_queue_us"):
                        row[key] = t.get(key)
                    extra = "  " + ", ".join(f"{k} {v['phases']} ph {v['us'] / 1e3:.2f} ms"
                                             for k, v in row["by_kind"].items() if v["phases"])
                    if t.get("up_us") is not None:
                        extra += f"  up/down {t['up_us']:.1f}/{t['down_us']:.1f} us"
                    if t.get("t_all_us") is not None:
                        extra += f"  t_all/t_queue {t['t_all_us']:.1f}/{t['t_queue_us']:.1f} us"
                rows.append(row)
                print(f"{label:26s} {row['ms']:8.3f} ms  phases {phases}  cell {row['cell_size']} {row['loop']}  exact={ok}"
                      + extra, flush=True)
            except Exception as e:
                rows.append({"graph": gname, "method": label, "error": f"{type(e).__name__}: {e}"})
                print(f"{label:26s} ERROR {type(e).__name__}: {e}", flush=True)
            finally:
                for k, v in saved.items():
                    setattr(gpuroute.config, k, v)
                if saved:
                    g.__dict__.pop("_solver_cache", None)
        try:
            for lab, o in ((("t256", {}), ("t512", {"threads": 512})) if args.configs == "cell" else ()):
                pr = profile(cp, g, srcs[0], o)
                res["profiles"][f"{gname} {lab}"] = pr
                print(f"profile {lab}: " + ", ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}"
                                                    for k, v in pr.items()), flush=True)
        except Exception as e:
            print("profile failed:", type(e).__name__, e, flush=True)
        del g
        cp.get_default_memory_pool().free_all_blocks()
        with open(os.path.join(args.out, "cell_bf_sweep.json"), "w") as f:
            json.dump(res, f, indent=1, default=float)
    print("\nDone.")


if __name__ == "__main__":
    main()
