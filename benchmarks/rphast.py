"""Benchmark: RPHAST on NY (issue 21's row "RPHAST (one-to-many to a target subset): 1 x 1000 <= 50 us", H100).

NY (DIMACS distance, shipped in the package), CU-CH built as the other CH benchmarks build it
(``ContractionHierarchy.build(g)``: on the GPU when there is one), 1,000 random targets (distinct), their
selection (``select_targets``, on the CPU), then k x 1000 for k = 1, 16, 256 (and 1000 with labels):

* upward pass searched on the host (numba) and, once ``ch.hub_labels()`` exists, read from the forward labels on
  the device;
* each pass as one persistent kernel (grid barriers) and as a captured CUDA graph (a launch per phase and level),
  with the depths merged m at a time or (m = 0, the default) at the boundaries the cost model of
  ``ch.phast.merge_phases`` picks, at its default and at the settings of COST_VARIANTS (1 and 16 sources);
  for one source, the persistent pass at several grid sizes (``CH_RPHAST_PERSISTENT_MAX_BLOCKS``: fewer blocks,
  cheaper barriers);
* device time between CUDA events (one pass alone, and the mean of 20 back-to-back passes, which hides the host's
  launch call), end to end through ``rphast_gpu`` (NumPy in and out; CuPy in and out);
* METHOD.md's two numbers for each: the fewest bytes a pass moves (below) over the copy bandwidth measured in the
  run, and the dependent steps (launches in the graph, or grid barriers) times their cost (2.5 us a graph node,
  BENCHMARKS.md; a barrier's cost is read off the block-count sweep);
* exact: every GPU result equal to the CPU twin (``rphast_cpu``), and two sources to Dijkstra;
* tables 1 x 1000 .. 1000 x 1000 through ``ch.table``: RPHAST against label merges and PHAST sweeps (the rule
  ``config.CH_RPHAST_TABLE_MIN_SOURCES`` is to be set from these).

Bytes of one pass of k sources (restricted nodes R, core c, selected core cb, arcs A, targets t; uint32):
fill 4Rk; upward: the label entries read (12 B each: hub, distance, restricted id) or host entries (8 B) and the
non-core ones written (4 B); core step: the core entries' rows of D (4 cb B each, L2-resident) and 4 cb k written;
sweep: each arc's tail and weight once (8 A), each non-core node's offsets (8 (R - c)), each arc's tail distance per
source (4 A k) and each node's own distance read and written per source (8 (R - c) k); gather 8 t k.

Usage (GPU machine, repo root; ~1-2 min on an H100, most of it the hub labels' build and two NVRTC compiles):
    PYTHONPATH=src python3 benchmarks/rphast.py --out "$OUT"   [--quick: k = 1 and 16, every shape, no tables]
CPU parts only (any machine; the numba twin, the selection, the model numbers):
    PYTHONPATH=src python3 benchmarks/rphast.py --cpu [--ch SAVED_HIERARCHY_DIR] [--ks 1,16] --out out
Writes DIR/rphast.json (one row per measurement, with device, commit and date) and prints a summary last.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import gpuroute  # noqa: E402
from gpuroute import config  # noqa: E402
from gpuroute.ch import ContractionHierarchy  # noqa: E402
from gpuroute.ch.rphast import rphast_cpu, select_targets, upward_entries  # noqa: E402

ROWS = []
DEVICE = "cpu"
GRAPH_NODE_S = 2.5e-6  # a dependent kernel node of a captured CUDA graph on the H100 (BENCHMARKS.md, PHAST)
DEFAULT_COST = (config.CH_PHASE_STEP_US, config.CH_PHASE_BYTES_PER_US, config.CH_PHASE_ITER_US)
#: Settings of the merged phases' cost model (CH_PHASE_STEP_US, CH_PHASE_BYTES_PER_US, CH_PHASE_ITER_US) measured with
#: CH_RPHAST_MERGE_LEVELS = 0 for 1 and 16 sources (ch.phast.merge_phases).
COST_VARIANTS = [(1.5, 2.5e6, 0.4), (3.0, 2.5e6, 0.4), (2.0, 2.5e6, 0.1), (2.0, 2.5e6, 1.0), (2.0, 1.0e6, 0.4)]


def emit(**row):
    row.update(device=DEVICE, commit=os.environ.get("GPUROUTE_COMMIT", "unknown"), date=str(dt.date.today()))
    print(json.dumps(row), flush=True)
    ROWS.append(row)


def med(fn, reps, warm=1):
    for _ in range(warm):
        fn()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return float(np.median(out))


def model(sel, k, entries, label_reads=None, arcs=None):
    """Fewest bytes of one pass of ``k`` sources (the module doc), from the upward entries ``(offsets, rid,
    dist)`` of these sources; ``label_reads``: label entries the kernel reads (labels on the device); ``arcs``:
    of the (merged) sweep, default the selection's."""
    R, c, cb, t = sel.n_restricted, sel.c, int(sel.core_sel.size), int(sel.targets.size)
    A = sel.n_arcs if arcs is None else int(arcs)
    offsets, rid, _ = entries
    core_e = int(np.count_nonzero(rid < c))
    nc_e = int(rid.size) - core_e
    up = (12 * label_reads if label_reads is not None else 8 * int(rid.size)) + 4 * nc_e
    core = 4 * cb * core_e + 4 * cb * k
    sweep = 8 * A + 8 * (R - c) + 4 * A * k + 8 * (R - c) * k
    return {"fill": 4 * R * k, "upward": up, "core": core, "sweep": sweep, "gather": 8 * t * k,
            "total": 4 * R * k + up + core + sweep + 8 * t * k, "core_entries": core_e, "noncore_entries": nc_e}


def cpu_part(ch, g, sel, T, ks, reps, rng):
    """The CPU twin: time, exactness against Dijkstra and CH buckets."""
    from gpuroute.ch.phast import table_cpu

    h = ch.h
    for k in ks:
        S = rng.integers(0, g.n_nodes, k)
        got = rphast_cpu(h, sel, S, upward="search")
        exact = bool(np.array_equal(got[:2], gpuroute.sssp(g, S[:2], device="cpu")[:, T]))
        exact &= bool(np.array_equal(got, table_cpu(h, S, T)))
        t = med(lambda S=S: rphast_cpu(h, sel, S, upward="search"), max(1, reps // 4))
        emit(what="RPHAST CPU twin (numba)", sources=k, targets=int(T.size), seconds=t, upward="search",
             exact_vs_dijkstra_and_buckets=exact, model_bytes=model(sel, k, upward_entries(h, sel, S, "search")),
             threads=int(__import__("numba").get_num_threads()))


GRAPH_ONLY = False  # --graph-only: the captured graph alone (the default pass), no persistent shapes


def modes(k):
    """The pass kinds measured for ``k`` sources."""
    return ["persistent", "graph"] if k <= 16 and not GRAPH_ONLY else ["graph"]


def shapes(k, mode):
    """(threads a block, most blocks, depths merged a phase, most lanes an item) measured for a pass of ``k`` sources:
    the default first (end to end measured there), the merge factor, and for one source in one persistent kernel the
    grid's shape against the barrier. tests/ch/test_rphast.py checks every one of them exact on the GPU."""
    out = [(256, 0, 0, 32), (256, 0, 4, 32), (256, 0, 1, 32)]  # m = 0: phases by the cost model (the default)
    if k >= 256 or mode == "persistent" or k == 1:
        out.append((256, 0, 8, 32))
    if mode == "graph" and k == 1:  # fewer, heavier phases: the launches against the arcs
        out += [(256, 0, 2, 32), (256, 0, 16, 32)]
    if mode == "persistent" and k == 1:
        out += [(256, 0, 2, 32)] + [(256, c, 4, 32) for c in (8, 16, 32, 64, 132)] + \
            [(512, c, 4, 32) for c in (0, 16, 32)] + [(1024, c, 4, 32) for c in (0, 8, 16, 32)] + \
            [(256, c, m, lanes) for c in (0, 32) for m in (4, 8) for lanes in (4, 8)]
    return out


def gpu_part(ch, g, sel, T, ks, reps, rng, bw, upward, gl):
    from gpuroute.ch.rphast_gpu import device_selection

    h = ch.h
    ds = device_selection(sel)
    lab = ch.hub_labels() if upward == "labels" else None
    defaults = (config.CH_RPHAST_PERSISTENT_MAX_K, config.CH_RPHAST_MAX_LANES)
    for k in ks:
        S = rng.integers(0, g.n_nodes, k)
        want = rphast_cpu(h, sel, S, upward="search")
        for mode in modes(k):
            config.CH_RPHAST_PERSISTENT_MAX_K = k if mode == "persistent" else 0
            for tpb, cap, merge, lanes in shapes(k, mode):
                config.CH_RPHAST_MAX_LANES = lanes
                if (tpb, merge) != (ds.tpb, ds.merge):  # fixed per device selection: upload it again
                    config.CH_RPHAST_THREADS, config.CH_RPHAST_MERGE_LEVELS = tpb, merge
                    sel._device.pop("gpu", None)
                    ds = device_selection(sel)
                config.CH_RPHAST_PERSISTENT_MAX_BLOCKS = cap
                try:
                    measure(ds, h, sel, S, T, k, upward, gl, mode, tpb, cap, want, bw, reps, lab)
                except Exception as e:  # one shape failing (e.g. a cooperative grid too large) must not end the run
                    emit(what="RPHAST GPU pass failed", upward=upward, mode=mode, sources=k, threads_per_block=tpb,
                         cap=cap, merged_depths=merge, error=f"{type(e).__name__}: {e}")
                    sel._device.pop("gpu", None)  # a fresh upload (its persistent kernel back on)
                    ds = device_selection(sel)
            config.CH_RPHAST_PERSISTENT_MAX_BLOCKS = 0
            if (ds.tpb, ds.merge) != (256, 0):
                config.CH_RPHAST_THREADS, config.CH_RPHAST_MERGE_LEVELS = 256, 0
                sel._device.pop("gpu", None)
                ds = device_selection(sel)
        if k in (1, 16):  # the cost model's settings (merge 0, the captured graph)
            config.CH_RPHAST_PERSISTENT_MAX_K, config.CH_RPHAST_MAX_LANES = 0, 32
            keep = (config.CH_PHASE_STEP_US, config.CH_PHASE_BYTES_PER_US, config.CH_PHASE_ITER_US)
            for step, bw_, it in COST_VARIANTS:
                config.CH_PHASE_STEP_US, config.CH_PHASE_BYTES_PER_US, config.CH_PHASE_ITER_US = step, bw_, it
                sel._device.pop("gpu", None)
                ds = device_selection(sel)
                try:
                    measure(ds, h, sel, S, T, k, upward, gl, "graph", 256, 0, want, bw, reps, lab)
                except Exception as e:
                    emit(what="RPHAST GPU pass failed", upward=upward, mode="graph", sources=k, threads_per_block=256,
                         cap=0, merged_depths=0, error=f"{type(e).__name__}: {e}")
            config.CH_PHASE_STEP_US, config.CH_PHASE_BYTES_PER_US, config.CH_PHASE_ITER_US = keep
            sel._device.pop("gpu", None)
            ds = device_selection(sel)
    config.CH_RPHAST_PERSISTENT_MAX_K, config.CH_RPHAST_MAX_LANES = defaults


def measure(ds, h, sel, S, T, k, upward, gl, mode, tpb, cap, want, bw, reps, lab):
    """One shape of one pass: exactness, device time (one pass; back to back), end to end (the default shape)."""
    import cupy as cp

    from gpuroute.ch.rphast_gpu import rphast_gpu

    reads = None
    if upward == "labels":
        slid = np.asarray(lab.node_lid, dtype=np.int64)[S]
        reads = int((lab.node[slid + 1, 0] - lab.node[slid, 0]).sum())
    got = rphast_gpu(h, sel, S, upward=upward, gpu_labels=gl)  # the pass size's layout in use from here
    mb = model(sel, k, upward_entries(h, sel, S, upward), reads, ds.n_arcs)
    exact = bool(np.array_equal(got, want))
    out_rows = cp.empty((k, int(T.size)), dtype=cp.uint32)
    launch = ds.prepare(h, S, upward, gl, out_rows)
    s = ds.stream
    for _ in range(3):
        launch()
    s.synchronize()
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    single = []
    for _ in range(reps):
        e0.record(s)
        launch()
        e1.record(s)
        e1.synchronize()
        single.append(cp.cuda.get_elapsed_time(e0, e1) * 1e-3)
    n_b2b = 20
    e0.record(s)
    for _ in range(n_b2b):
        launch()
    e1.record(s)
    e1.synchronize()
    b2b = cp.cuda.get_elapsed_time(e0, e1) * 1e-3 / n_b2b
    got_rows = out_rows.get()
    exact &= bool(np.array_equal(np.where(got_rows == 0xFFFFFFFF, gpuroute.INF, got_rows.astype(np.int64)),
                                 want))
    blocks = ds.last_blocks if mode == "persistent" else None
    # persistent: the grid barriers (after the fill, after the upward pass, after each level); graph: its
    # kernel nodes, and the copy of the pass's rows into the result
    syncs = len(ds.levels) + 2 if mode == "persistent" else ds.launches + 1
    row = dict(what="RPHAST GPU pass", upward=upward, mode=mode, sources=k, targets=int(T.size),
               threads_per_block=tpb, blocks=blocks, max_lanes=int(config.CH_RPHAST_MAX_LANES),
               merged_depths=ds.merge, phases=len(ds.levels),
               phase_cost=[config.CH_PHASE_STEP_US, config.CH_PHASE_BYTES_PER_US, config.CH_PHASE_ITER_US],
               arcs=ds.n_arcs, device_seconds_single=float(np.median(single)),
               device_seconds_back_to_back=b2b, exact_vs_cpu_twin=exact,
               model_bytes=mb, floor_bytes_seconds=mb["total"] / bw, dependent_steps=int(syncs),
               trees_per_s=k / b2b)
    if mode == "graph":
        row["floor_launches_seconds"] = syncs * GRAPH_NODE_S
    else:
        row["per_barrier_seconds_if_all_sync"] = b2b / syncs
    if (tpb, cap, ds.merge, int(config.CH_RPHAST_MAX_LANES)) == (256, 0, 0, 32) and \
            (config.CH_PHASE_STEP_US, config.CH_PHASE_BYTES_PER_US, config.CH_PHASE_ITER_US) == DEFAULT_COST:
        S_cp = cp.asarray(S)
        row["end_to_end_numpy_seconds"] = med(lambda S=S: rphast_gpu(h, sel, S, upward=upward, gpu_labels=gl),
                                              reps)

        def cupy_call(S_cp=S_cp):
            rphast_gpu(h, sel, S_cp, upward=upward, gpu_labels=gl)
            cp.cuda.Device().synchronize()
        row["end_to_end_cupy_seconds"] = med(cupy_call, reps)
    if mode == "persistent" and not ds.persistent(k, ds.kind):
        raise RuntimeError(f"the persistent pass did not run ({ds.why_not_persistent})")
    emit(**row)


def tables(ch, g, T, rng, reps):
    """ch.table through its three GPU paths (labels built): label merges, RPHAST, PHAST sweeps."""
    import cupy as cp

    n = g.n_nodes
    Tc = cp.asarray(T)
    defaults = (config.CH_RPHAST_TABLE_MIN_SOURCES, config.CH_LABELS_TABLE_MAX_TARGETS)
    for k in (1, 16, 256, 1000):
        S = cp.asarray(rng.integers(0, n, k))
        res = {}
        for path in ("labels", "rphast", "phast"):
            config.CH_RPHAST_TABLE_MIN_SOURCES = 0 if path == "rphast" else 10**9
            config.CH_LABELS_TABLE_MAX_TARGETS = 16384 if path == "labels" else 0

            def call(S=S):
                ch.table(S, Tc, device="gpu")
                cp.cuda.Device().synchronize()
            res[path] = (med(call, max(3, reps // 2)), ch.table(S, Tc, device="gpu").get())
        emit(what="table on the GPU by path (CuPy in and out)", sources=k, targets=int(T.size),
             **{f"{p}_seconds": v[0] for p, v in res.items()},
             equal=bool(all(np.array_equal(v[1], res["labels"][1]) for v in res.values())))
    config.CH_RPHAST_TABLE_MIN_SOURCES, config.CH_LABELS_TABLE_MAX_TARGETS = defaults


def copy_bandwidth():
    import cupy as cp

    a = cp.empty(1 << 28, dtype=cp.uint8)
    b = cp.empty_like(a)

    def f():
        b[...] = a
        cp.cuda.Device().synchronize()
    return 2 * a.nbytes / med(f, 10)


def summary():
    print("\nsummary (device us: one pass alone / back to back; end to end NumPy us; floors us: bytes / steps)")
    for r in ROWS:
        if r["what"] == "RPHAST GPU pass" and "end_to_end_numpy_seconds" in r:
            fl = r.get("floor_launches_seconds", r["dependent_steps"] * GRAPH_NODE_S)
            print(f"  {r['upward']:6s} {r['mode']:10s} m={r['merged_depths']} ({r['phases']} phases, {r['arcs']:,} arcs) "
                  f"{r['sources']:5d} x {r['targets']}: "
                  f"{r['device_seconds_single'] * 1e6:8.1f} / {r['device_seconds_back_to_back'] * 1e6:8.1f}   "
                  f"e2e {r['end_to_end_numpy_seconds'] * 1e6:8.1f}   floors {r['floor_bytes_seconds'] * 1e6:6.1f} / "
                  f"{fl * 1e6:6.1f} ({r['dependent_steps']} steps)  exact={r['exact_vs_cpu_twin']}")
        elif r["what"] == "RPHAST GPU pass":
            print(f"  {r['upward']:6s} {r['mode']:10s} m={r['merged_depths']} ({r['phases']} phases, cost "
                  f"{r['phase_cost']}) k={r['sources']} "
                  f"{r['threads_per_block']} x {r['blocks']} blocks, lanes <= {r['max_lanes']}: "
                  f"{r['device_seconds_back_to_back'] * 1e6:.1f} us "
                  f"({r['device_seconds_back_to_back'] / r['dependent_steps'] * 1e6:.2f} us a step, "
                  f"{r['dependent_steps']} steps), exact={r['exact_vs_cpu_twin']}")
        elif r["what"] == "RPHAST GPU pass failed":
            print(f"  FAILED {r['upward']} {r['mode']} k={r['sources']} {r['threads_per_block']} threads, cap "
                  f"{r['cap']}, m={r['merged_depths']}: {r['error'][:200]}")
        elif r["what"].startswith("table"):
            print(f"  table {r['sources']} x {r['targets']}: labels {r['labels_seconds'] * 1e3:.3f} ms, rphast "
                  f"{r['rphast_seconds'] * 1e3:.3f} ms, phast {r['phast_seconds'] * 1e3:.3f} ms, equal={r['equal']}")
        elif r["what"] in ("selection", "RPHAST CPU twin (numba)", "CU-CH build", "copy bandwidth",
                           "hub labels (for the upward pass)"):
            print("  " + ", ".join(f"{k}={v}" for k, v in r.items() if k not in ("device", "commit", "date",
                                                                                 "model_bytes")))
    passes = [r for r in ROWS if r["what"] == "RPHAST GPU pass"]
    if passes:
        inexact = [r for r in passes if not r["exact_vs_cpu_twin"]]
        failed = [r for r in ROWS if r["what"] == "RPHAST GPU pass failed"]
        print(f"\nverdict: {len(passes) - len(inexact)} of {len(passes)} GPU passes exact, {len(failed)} failed to run"
              + "".join(f"\n  INEXACT {r['upward']} {r['mode']} k={r['sources']} {r['threads_per_block']} x "
                        f"{r['blocks']} m={r['merged_depths']} lanes<={r['max_lanes']}" for r in inexact))
        for up in ("search", "labels"):  # the default shape, one source: which pass config should pick
            best = {r["mode"]: r["device_seconds_back_to_back"] for r in passes
                    if r["upward"] == up and r["sources"] == 1 and "end_to_end_numpy_seconds" in r}
            if len(best) == 2:
                pick = 8 if best["persistent"] < best["graph"] and not inexact else 0
                print(f"  {up}, 1 x {passes[0]['targets']}, default merge: persistent {best['persistent'] * 1e6:.1f} us, graph "
                      f"{best['graph'] * 1e6:.1f} us (device, back to back) -> CH_RPHAST_PERSISTENT_MAX_K = {pick}")


def main():
    global DEVICE
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--targets", type=int, default=1000)
    ap.add_argument("--ks", default="1,16,256")
    ap.add_argument("--cpu", action="store_true", help="CPU parts only (no GPU needed)")
    ap.add_argument("--ch", default=None, help="a saved hierarchy of NY to load instead of building one")
    ap.add_argument("--quick", action="store_true",
                    help="the verification sweep: k = 1 and 16 only (every shape), 10 repetitions, no tables")
    ap.add_argument("--graph-only", action="store_true", help="the captured graph only (no persistent passes)")
    args = ap.parse_args()
    global GRAPH_ONLY
    GRAPH_ONLY = bool(args.graph_only)
    if args.quick:
        args.ks, args.reps = "1,16", min(args.reps, 10)
    ks = [int(x) for x in args.ks.split(",")]
    t_start = time.perf_counter()
    if not args.cpu:
        import cupy as cp

        DEVICE = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
        bw = copy_bandwidth()
        emit(what="copy bandwidth", bytes_per_s=bw)
    g = gpuroute.datasets.load("ny")
    t0 = time.perf_counter()
    if args.ch:
        ch = ContractionHierarchy.load(args.ch, graph=g)
    else:
        ch = ContractionHierarchy.build(g, device="cpu" if args.cpu else "auto", progress=False)
    emit(what="CU-CH build", seconds=time.perf_counter() - t0, levels=int(ch.h.n_levels), core=int(ch.h.core.size),
         loaded=bool(args.ch))
    rng = np.random.default_rng(21)
    T = rng.choice(g.n_nodes, args.targets, replace=False)
    select_targets(ch.h, T)  # numba's first call
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        sel = select_targets(ch.h, T)
        ts.append(time.perf_counter() - t0)
    emit(what="selection", targets=int(T.size), seconds=float(np.median(ts)), restricted=sel.n_restricted,
         noncore=sel.n_restricted - sel.c, core=sel.c, core_selected=int(sel.core_sel.size), arcs=sel.n_arcs,
         levels=sel.n_levels, hierarchy_levels=int(ch.h.n_levels), host_bytes=sel.nbytes)
    cpu_part(ch, g, sel, T, [k for k in ks if k <= 16] if not args.cpu else ks, args.reps, rng)
    if not args.cpu:
        gpu_part(ch, g, sel, T, ks, args.reps, rng, bw, "search", None)
        t0 = time.perf_counter()
        ch.hub_labels()
        gl = ch._gpu_labels()
        emit(what="hub labels (for the upward pass)", build_and_upload_seconds=time.perf_counter() - t0)
        gpu_part(ch, g, sel, T, ks if args.quick else ks + [1000], args.reps, rng, bw, "labels", gl)
        if not args.quick:
            tables(ch, g, T, rng, args.reps)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "rphast.json"), "w") as f:
        json.dump(ROWS, f, indent=1)
    summary()
    print(f"\ntotal {time.perf_counter() - t_start:.1f} s")


if __name__ == "__main__":
    main()
