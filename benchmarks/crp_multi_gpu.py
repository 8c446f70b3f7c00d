"""Benchmark: CRP customization on 1, 2 and 4 GPUs of one host (gpuroute.crp.customize_multi; Delling,
Kobitzsch, Werneck, Euro-Par 2014, sec. 5: cells split across devices in whole subtrees, the levels above the
split gathered on one device), on NY and on tiled 8x8 NY (a synthetic Europe-size proxy: label it tiled).

Per graph: the one-GPU customization (``Overlay.customize(device="gpu")``) is the reference, result and time;
then ``customize_multi`` on ``devices = [0..k-1]`` for every k in --gpus (tiled: --tiled-gpus, default 2,4) that
the host has (k = 1 runs the multi-device path on one device: its overhead), for each split level asked (--splits: ``auto`` = the default
rule, ``all`` = every query level). Warm-up runs are excluded; the rows give the median over --reps of the wall
time (end to end, as ``Overlay.customize``: metric upload, levels, gather, cliques back; the trees still
arriving), the device time (CUDA events: the gather device's first launch to the end of the upper levels),
each device's busy time, the gather and the upper levels, the split (cells and estimated work per device,
imbalance) and the bytes exchanged between devices, uploaded and copied back. Every multi-device result
(cliques and trees) is asserted equal, bit for bit, to the one-GPU result.

NY: ``--ny PATH`` (a DIMACS ``.gr``/``.gr.gz``, e.g. ../shared/data/dimacs9/USA-road-d.NY.gr.gz or a carried
copy; coordinates from the ``.co`` beside it), default the shipped copy. Its partition as
benchmarks/crp_gpu.py builds it (``Partition.build`` with ``config.CRP_KAHIP_MODE``), read from / saved to
``out/crp_bench/part_NY_kahip_<mode>_<sizes>`` (``--partition DIR`` to give one). Tiled: ``datasets.tile(NY,
8, 8)``; its partition is NY's in every copy plus a top level of 2x2 copies (16 cells), no partitioner run.

Plans (--plans, --tiled-plans): ``off`` (the overlay's own levels; the push kernel wherever ``push_fits``) and
mezzanine plans such as ``256:32`` (32-node cells under the 256 level, the lowest by microinstructions). A plan's
NY partition is ``Partition.refine``'s, read from --mezz-dir or out/crp_bench (``mezz_NY_<sizes>_<plan>_<mode>``,
as benchmarks/crp_gpu.py caches it) or refined once; on the tiled graph it is that refined partition tiled as the
base one (:func:`tiled_refined_partition`: no kaffpa on the tiled graph's cells), run on the plan-off overlay's
query topology (:func:`with_plan`). A ``;CRP_NAME=INT`` suffix sets a gpuroute.config tunable for that plan
(e.g. ``off;CRP_GPU_PUSH_BIG_SMEM_BYTES=98304``). Each plan's rows: per plan level the device seconds and
Bellman-Ford rounds, and :func:`level_report` (cells, largest cell's vertices and edges, entry points, the kernel
-- push / pull / micro -- and why); a plan's cliques are asserted equal to plan off's.

Run time is bounded: --budget-s (default 360 s) stops starting new configurations once spent (the rows say
what was skipped); --skip-tiled leaves the tiled graph out. Timings are printed as they come (one JSON row
per line) and the JSON file is rewritten after every row.

Usage (on the device):
    PYTHONPATH=src python3 benchmarks/crp_multi_gpu.py [--gpus 1,2,4] [--tiled-gpus 2,4] [--reps 20]
        [--tiled-reps N] [--splits auto|all] [--plans off 256:32 ...] [--tiled-plans ...] [--mezz-dir DIR]
        [--ny PATH] [--partition DIR] [--skip-ny] [--skip-tiled] [--tiles 8] [--budget-s 360]
        [--out benchmarks/results/NAME.json]
    (local_data/dev/s24_CRPT.sh: one GPU, NY and tiled 8x8, three plans; s24_CRPT2.sh: two GPUs)
CPU dry run of the script (virtual devices, no GPU; checks the plumbing only, timings meaningless):
    PYTHONPATH=src python3 benchmarks/crp_multi_gpu.py --device-kind cpu --tiles 2 --reps 1
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
sys.path.insert(0, str(ROOT / "benchmarks"))  # crp_gpu (plan_overrides) when loaded from elsewhere

from crp_gpu import plan_overrides  # noqa: E402  (benchmarks/, this script's folder)

import gpuroute  # noqa: E402
from gpuroute import Overlay, Partition, config, store  # noqa: E402
from gpuroute.crp.customize_multi import customize_multi  # noqa: E402
from gpuroute.partition.multilevel import topology_fingerprint  # noqa: E402

T0 = time.perf_counter()
ROWS = []
META = {}


def commit():
    c = os.environ.get("GPUROUTE_COMMIT")
    if c:
        return c
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip() + ("+dirty" if subprocess.run(
                                  ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                                  capture_output=True, text=True).stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def emit(out_path, **row):
    row.update(META)
    row["elapsed_s"] = round(time.perf_counter() - T0, 2)
    print(json.dumps(row), flush=True)
    ROWS.append(row)
    tmp = out_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(ROWS, indent=1))
    os.replace(tmp, out_path)


def med(xs):
    return float(np.median(xs)) if len(xs) else None


def ny_graph(path):
    if path:
        from gpuroute.io.dimacs import load_dimacs

        g = load_dimacs(path)
        g.name = "ny"
        return g
    return gpuroute.datasets.load("ny")


def ny_partition(g, directory):
    sizes = "-".join(map(str, config.CRP_CELL_SIZES))
    pdir = Path(directory) if directory else ROOT / "out" / "crp_bench" / f"part_NY_kahip_{config.CRP_KAHIP_MODE}_{sizes}"
    t0 = time.perf_counter()
    if pdir.exists():
        return Partition.load(pdir, g), True, time.perf_counter() - t0
    part = Partition.build(g)
    secs = time.perf_counter() - t0
    try:
        pdir.parent.mkdir(parents=True, exist_ok=True)
        part.save(pdir)
    except OSError as e:  # a read-only tree: keep going without the cache
        print(f"# partition not cached ({e})", flush=True)
    return part, False, secs


def tile_rows(cells, kx, ky):
    """The rows of a nested partition of a graph laid over its ``kx * ky`` copies in ``datasets.tile``'s numbering
    (copy ``c`` holds nodes ``c * n + v``): node ``v`` of copy ``c`` is in cell ``c * n_cells(level) + cells[level,
    v]``. ``cells`` int (L, n); returns int64 (L, kx * ky * n). Dense and nested wherever ``cells`` is, and a
    cell never spans two copies (the joins between copies are boundary arcs on every level)."""
    cells = np.asarray(cells)
    copies = int(kx) * int(ky)
    rows = []
    for row in cells:
        nc = int(row.max()) + 1 if row.size else 0
        rows.append((np.arange(copies, dtype=np.int64)[:, None] * nc + row.astype(np.int64)[None, :]).ravel())
    return np.stack(rows) if rows else np.zeros((0, copies * cells.shape[1]), np.int64)


def block_row(n, kx, ky):
    """The tiled graph's top level: blocks of 2x2 copies (``n`` nodes a copy), int64 (kx * ky * n,)."""
    copies = int(kx) * int(ky)
    ci, cj = np.arange(copies) % kx, np.arange(copies) // kx
    bx = (kx + 1) // 2
    return np.repeat(((cj // 2) * bx + ci // 2).astype(np.int64), n)


def tiled_partition(base_part, tg, kx, ky):
    """NY's partition in every copy (:func:`tile_rows`), plus a top level of 2x2 copies (:func:`block_row`); no
    partitioner run. Cell sizes: NY's, then the least power of two above 4 x NY's nodes (at least twice NY's top
    size)."""
    n = base_part.cells.shape[1]
    rows = np.vstack([tile_rows(base_part.cells, kx, ky), block_row(n, kx, ky)[None, :]])
    top = 1 << int(np.ceil(np.log2(4 * n + 1)))
    sizes = tuple(base_part.cell_sizes) + (max(top, 2 * base_part.cell_sizes[-1]),)
    return Partition(rows.astype(np.int32), sizes, "tiled " + base_part.method, topology_fingerprint(tg),
                     meta={"tiled_from": "NY partition", "top_level": "2x2 copies", "tiles": [int(kx), int(ky)]})


def tiled_refined_partition(ext, base_part, tpart, tg, kx, ky):
    """The tiled graph's partition with mezzanine levels, from the base graph's refined partition ``ext``
    (``base_part.refine(...)``, e.g. cached): every row of ``ext`` tiled as :func:`tiled_partition` tiles the base
    partition's (:func:`tile_rows`), plus ``tpart``'s top level (its last row); no partitioner run. Its rows at
    ``tpart``'s cell sizes equal ``tpart``'s, so ``Overlay.build(tg, tpart, mezzanine=<this>)`` accepts it and
    its cliques equal those of ``Overlay.build(tg, tpart)``.

    Parameters
    ----------
    ext, base_part : Partition
        ``ext`` refines ``base_part`` (same nodes; each of ``base_part``'s levels is a row of ``ext`` at the same
        cell size).
    tpart : Partition
        :func:`tiled_partition` of ``base_part`` over ``kx x ky`` copies of ``tg``.
    tg : RoadGraph
        The tiled graph.

    Returns
    -------
    Partition
        Cell sizes ``ext``'s then ``tpart``'s top size; ``meta["query_levels"]``: the index of each of
        ``tpart``'s levels in it.

    Raises
    ------
    ValueError
        ``ext`` does not refine ``base_part`` (names the level), ``tpart`` is not the tiling of ``base_part``
        over ``kx x ky`` copies (names the level), or ``tg`` is not ``tpart``'s graph.
    """
    n = base_part.cells.shape[1]
    if ext.cells.shape[1] != n:
        raise ValueError(f"the refined partition has {ext.cells.shape[1]} nodes, the base partition {n}")
    query = []
    for p, size in enumerate(base_part.cell_sizes):
        if size not in ext.cell_sizes:
            raise ValueError(f"the refined partition has no level of cell size {size} (level {p} of the base "
                             f"partition; its sizes {ext.cell_sizes})")
        q = ext.cell_sizes.index(size)
        if not np.array_equal(ext.cells[q], base_part.cells[p]):
            raise ValueError(f"the refined partition's level {q} (cell size {size}) differs from level {p} of the "
                             "base partition: it must refine it (Partition.refine)")
        query.append(q)
    tpart.check_graph(tg, where="the tiled partition")
    if tpart.n_levels != base_part.n_levels + 1 or tpart.cells.shape[1] != kx * ky * n:
        raise ValueError(f"the tiled partition has {tpart.n_levels} levels over {tpart.cells.shape[1]} nodes, "
                         f"expected {base_part.n_levels + 1} over {kx}x{ky} copies of {n}")
    rows = tile_rows(ext.cells, kx, ky)
    for p, q in enumerate(query):
        if not np.array_equal(rows[q], tpart.cells[p]):
            raise ValueError(f"the tiled partition's level {p} is not the tiling of the base partition's over "
                             f"{kx}x{ky} copies")
    cells = np.vstack([rows, tpart.cells[-1:].astype(np.int64)]).astype(np.int32)
    sizes = tuple(ext.cell_sizes) + (tpart.cell_sizes[-1],)
    meta = {"query_levels": query + [len(sizes) - 1], "refines": store.sha256_arrays(tpart.cells),
            "tiled_from": "refined NY partition", "tiles": [int(kx), int(ky)],
            "mezzanine": ext.meta.get("mezzanine"), "kahip_mode": ext.meta.get("kahip_mode")}
    return Partition(cells, sizes, "tiled " + ext.method, tpart.fingerprint, meta=meta)


def mezzanine_spec(spec, part):
    """``off`` -> False; ``256:32`` or ``256:32,4096:1024`` -> the refine tuple (one size tuple per level of
    ``part``); a ``;CRP_NAME=INT`` suffix (:func:`plan_overrides`) is ignored here. Raises SystemExit naming the
    bad item."""
    spec = plan_overrides(spec)[0]
    if spec == "off":
        return False
    mz = {}
    for item in spec.split(","):
        try:
            level, *subs = (int(x) for x in item.split(":"))
        except ValueError:
            level, subs = None, []
        if level not in part.cell_sizes or not subs:
            raise SystemExit(f"plan {spec!r}: {item!r} must be LEVEL_SIZE:SIZE[:SIZE...] with LEVEL_SIZE one of "
                             f"{part.cell_sizes}")
        mz[level] = tuple(sorted(subs))
    return tuple(tuple(mz.get(s_, ())) for s_ in part.cell_sizes)


def ny_refined(g, part, spec, directory):
    """NY's partition refined by the plan ``spec`` (``Partition.refine``), read from ``directory`` (``--mezz-dir``:
    where ``mezz_NY_<sizes>_<plan>_<mode>`` directories are, as benchmarks/crp_gpu.py caches them), else
    out/crp_bench/, else refined now (kaffpa per cell; ~3 s on NY) and saved there. Returns (Partition, cached,
    seconds)."""
    mz = mezzanine_spec(spec, part)
    tag = "_".join(f"{s_}-{'-'.join(map(str, m))}" for s_, m in zip(part.cell_sizes, mz, strict=True) if m)
    name = f"mezz_NY_{'-'.join(map(str, part.cell_sizes))}_{tag}_{config.CRP_MEZZANINE_KAHIP_MODE}"
    t0 = time.perf_counter()
    for d in ([Path(directory) / name] if directory else []) + [ROOT / "out" / "crp_bench" / name]:
        if d.exists():
            return Partition.load(d, g), True, time.perf_counter() - t0
    ext = part.refine(g, mz)
    try:
        ext.save(ROOT / "out" / "crp_bench" / name)
    except OSError as e:
        print(f"# refined partition not cached ({e})", flush=True)
    return ext, False, time.perf_counter() - t0


def with_plan(ov, mezzanine):
    """The overlay ``ov`` with another customization plan (``mezzanine`` as ``Overlay.build``'s: False, a dict or
    a refining Partition), sharing its graph, partition, turns, query topology and query graph: what
    ``Overlay.build(ov.graph, ov.partition, turns=ov.turns, mezzanine=mezzanine)`` builds, without building the
    query topology again (~1 min on tiled 8x8 NY). No customization, no GPU customizer; ``ov`` is unchanged."""
    import copy

    from gpuroute.crp.customize import CustomizationPlan
    from gpuroute.crp.state_buffers import StateBuffers

    out = copy.copy(ov)
    out._plan = CustomizationPlan(ov.graph, ov.partition, ov.turns, ov._topo, mezzanine)
    out._tree_first = out._plan.tree_first.copy()
    out._tree_dtype = out._plan.tree_dtype
    out._state = None
    out._gpu_cust = None
    out._gpu_token = None
    out._multi_cust = None
    out._buffers = StateBuffers()
    out.stats = dict(ov.stats)
    return out


def level_report(ov):
    """Per plan level: its cells, the largest cell's search-graph vertices (``cell_vertices_max``) and edges
    (``cell_edges_max``), the level's edges and entry points, the largest cell's entry points, and the kernel the
    GPU customizer runs there (``micro``, ``push``, ``pull``) with why (:func:`push_fits`'s rule: vertices <=
    ``CRP_GPU_PUSH_SMEM_BYTES / 8`` and <= 65,536; ``CRP_GPU_PUSH_MAX_CELLS``). Host only (no GPU)."""
    from gpuroute.crp.customize_gpu import push_items_of

    plan = ov._plan
    topo = plan.topo
    items = max(1, int(config.CRP_GPU_PUSH_SMEM_BYTES) // 8)
    mc = config.CRP_GPU_PUSH_MAX_CELLS
    mc = None if mc is None else int(mc)
    big = max(0, int(config.CRP_GPU_PUSH_BIG_SMEM_BYTES)) // 8
    out = []
    for q, lg in enumerate(topo["levels"]):
        vf = np.asarray(lg.vert_first, np.int64)
        nv = np.diff(vf)
        ec = np.diff(np.asarray(lg.e_first, np.int64)[vf]) if vf.size > 1 else np.zeros(0, np.int64)
        ent_first, _ = topo["level_first"][q]
        ne = np.diff(np.asarray(ent_first, np.int64))
        nc = int(nv.size)
        n_max = int(nv.max(initial=0))
        d = {"level": q, "query_level": None if plan.query_of_ext[q] < 0 else int(plan.query_of_ext[q]),
             "cell_size": int(plan.cell_sizes[q]), "cells": nc, "cell_vertices_max": n_max,
             "cell_vertices_mean": float(nv.mean()) if nc else 0.0, "cell_edges_max": int(ec.max(initial=0)),
             "edges": int(lg.e_to.size), "entry_points": int(ne.sum()), "cell_entries_max": int(ne.max(initial=0)),
             "push_items": items}
        it = push_items_of(lg, items, big, mc)
        d["push_items_run"] = it
        if q == 0 and plan.micro is not None:
            d["kernel"], d["why"] = "micro", "microinstructions (a mezzanine level 0, CRP_MICROCODE)"
        elif it == items:
            d["kernel"] = "push"
            d["why"] = f"every cell <= {min(items, 1 << 16)} vertices (largest {n_max})"
        elif it:
            d["kernel"] = "push"
            d["why"] = (f"big cells (largest {n_max} > {items}): CRP_GPU_PUSH_BIG_SMEM_BYTES, {it} items a unit, "
                        f"{15 * it + 16:,} bytes of shared memory a block (if the device allows it)")
        else:
            d["kernel"] = "pull"
            if nc == 0:
                d["why"] = "no cells"
            elif mc is not None and nc >= mc:
                d["why"] = f"CRP_GPU_PUSH_MAX_CELLS = {mc} <= {nc} cells"
            elif n_max > 1 << 16:
                d["why"] = f"a cell of {n_max} vertices > 65,536 (16-bit ids)"
            else:
                d["why"] = (f"a cell of {n_max} vertices > {items} (CRP_GPU_PUSH_SMEM_BYTES / 8: one entry point's "
                            f"distances); push with one entry point a unit needs 15 x {n_max} + 16 = "
                            f"{15 * n_max + 16:,} bytes of shared memory")
        out.append(d)
    return out


def free_gpu(kind, n):
    if kind != "gpu":
        return
    import cupy as cp

    for d in range(n):
        with cp.cuda.Device(d):
            cp.cuda.Device(d).synchronize()
            cp.get_default_memory_pool().free_all_blocks()
    cp.get_default_pinned_memory_pool().free_all_blocks()


def over_budget(args):
    spent = time.perf_counter() - T0
    return (f"budget: {spent:.0f} s spent of --budget-s {args.budget_s:.0f}") if spent > args.budget_s else None


def bench_graph(args, out, label, plan, g, ov, counts, n_gpus, ref_clique=None):
    """One graph and plan: the one-device customization (the reference), then ``customize_multi`` on each device
    count of ``counts``. ``ref_clique``: the plan-off cliques (a plan's must equal them). Returns the one-device
    cliques."""
    kind = args.device_kind
    metric = g.default_weight
    levels = level_report(ov)
    emit(out, what="overlay", graph=label, plan=plan, nodes=g.n_nodes, arcs=g.n_arcs, cells=list(ov.n_cells),
         clique_entries=int(ov._topo["cq_first"][-1]), tree_entries=int(ov._tree_first[-1]),
         plan_clique_entries=int(ov._plan.n_ext_clique), build_seconds=ov.stats["topology_s"],
         plan_seconds=ov._plan.seconds, microcode_build_seconds=ov._plan.micro_seconds, levels=levels)
    for d in levels:
        print(f"#   {label} {plan} level {d['level']} (cell size {d['cell_size']}): {d['cells']} cells, vertices max "
              f"{d['cell_vertices_max']}, edges {d['edges']} (max a cell {d['cell_edges_max']}), entries max "
              f"{d['cell_entries_max']}: {d['kernel']} ({d['why']})", flush=True)
    # the one-device reference
    dev1 = "gpu" if kind == "gpu" else "cpu"
    t0 = time.perf_counter()
    ov.customize(metric, device=dev1)
    first = time.perf_counter() - t0
    setup = ov._gpu_cust.setup_seconds if ov._gpu_cust is not None else None
    if ov._gpu_cust is not None:  # what the customizer chose, level by level (push_fits), and its block sizes
        for d, lv in zip(levels, ov._gpu_cust.levels, strict=True):
            d["kernel_run"] = "micro" if lv is None else ("push" if lv["push"] else "pull")
            if lv is not None:
                d["units"] = lv["n_units"]
                d["threads"] = lv["push_threads"] if lv["push"] else ov._gpu_cust.threads
    wall, dsec, plan_s, rounds = [], [], [], None
    for i in range(args.warmup + args.reps):
        t0 = time.perf_counter()
        info = ov.customize(metric, device=dev1)
        w = time.perf_counter() - t0
        if i >= args.warmup:
            wall.append(w)
            dsec.append(float(sum(info["level_seconds"])))
            plan_s.append([d["seconds"] for d in info["plan"]])
            rounds = [d.get("rounds") for d in info["plan"]]
    ref_c = np.array(ov._state.clique, copy=True)
    ref_t = np.array(ov._state.tree, copy=True)
    one = {"wall": med(wall), "device": med(dsec)}
    same = None if ref_clique is None else bool(np.array_equal(ref_c, ref_clique))
    emit(out, what="customize", graph=label, plan=plan, impl=f"one {dev1} (Overlay.customize)", gpus=1, metric=metric,
         gpu_setup_seconds=setup, setup_and_first_seconds=first, seconds=one["wall"], device_seconds=one["device"],
         level_seconds=info["level_seconds"], rounds=info.get("rounds"),
         plan_level_seconds=np.median(np.array(plan_s), axis=0).tolist() if plan_s else None, plan_rounds=rounds,
         plan_levels=levels, cliques_equal_plan_off=same)
    assert same is not False, f"{label}, plan {plan}: the cliques differ from plan off's"
    ov.release()
    free_gpu(kind, n_gpus)
    for k in counts:
        splits = [None] if args.splits == "auto" else list(range(ov.n_levels))
        for split in splits:
            why = over_budget(args)
            if why:
                emit(out, what="skipped", graph=label, plan=plan, gpus=k, split_level=split, reason=why)
                continue
            devs = list(range(k))
            t0 = time.perf_counter()
            st, info = customize_multi(ov, metric, devices=devs, device_kind=kind, split_level=split, install=False)
            first = time.perf_counter() - t0
            setup = info["multi"]["setup_seconds"]
            wall, dsec, busy, gat, up, lev = [], [], [], [], [], []
            for i in range(args.warmup + args.reps):
                t0 = time.perf_counter()
                st, info = customize_multi(ov, metric, devices=devs, device_kind=kind, split_level=split,
                                           install=False)
                w = time.perf_counter() - t0
                if i >= args.warmup:
                    m = info["multi"]
                    wall.append(w)
                    dsec.append(m["device_seconds"])
                    busy.append([m["busy_seconds"][str(d)] for d in devs])
                    gat.append(m["gather_seconds"])
                    up.append(m["upper_seconds"])
                    lev.append([m["level_seconds"][str(d)] for d in devs])
            st.tree  # waits for the trees' copies  # noqa: B018
            exact = bool(np.array_equal(st.clique, ref_c) and np.array_equal(st.tree, ref_t))
            m = info["multi"]
            emit(out, what="customize", graph=label, plan=plan, impl=f"customize_multi ({kind})", gpus=k,
                 metric=metric, split_level=m["split_level"], split_plan_level=m["split_plan_level"],
                 setup_seconds=setup, setup_and_first_seconds=first, seconds=med(wall), device_seconds=med(dsec),
                 busy_seconds={str(d): med([b[i] for b in busy]) for i, d in enumerate(devs)},
                 gather_seconds=med(gat), upper_seconds=med(up),
                 speedup_device=(one["device"] / med(dsec)) if med(dsec) else None,
                 speedup_wall=(one["wall"] / med(wall)) if med(wall) else None,
                 cells_per_device=m["cells_per_device"], work_per_device=m["work_per_device"],
                 imbalance=m["imbalance"], upper_cells=m["upper_cells"], parts=m["parts"],
                 bytes_peer=m["bytes_peer"], bytes_h2d=m["bytes_h2d"], bytes_d2h=m["bytes_d2h"],
                 peer_access=m.get("peer_access"), rounds=m.get("rounds"),
                 level_seconds={str(d): np.median(np.array([x[i] for x in lev]), axis=0).tolist()
                                for i, d in enumerate(devs)},
                 exact=exact)
            assert exact, f"{label}, plan {plan}, {k} devices, split {split}: the cliques or trees differ from one device's"
            ov._multi_cust = None
            free_gpu(kind, n_gpus)
    return ref_c


def run_plans(args, out, label, g, base_ov, plans, refined, counts, n_gpus):
    """Every plan of ``plans`` on one graph: ``off`` on ``base_ov`` (built with ``mezzanine=False``), the others
    on :func:`with_plan` of it with ``refined[plan]`` (a Partition). Each plan's cliques are checked against
    plan off's (when it ran first)."""
    ref = None
    for plan in plans:
        why = over_budget(args)
        if why:
            emit(out, what="skipped", graph=label, plan=plan, reason=why)
            continue
        body, over = plan_overrides(plan)
        saved = {k: getattr(config, k) for k in over}
        try:
            for k, v in over.items():
                setattr(config, k, v)
            t0 = time.perf_counter()
            ov = base_ov if body == "off" else with_plan(base_ov, refined[body])
            emit(out, what="plan setup", graph=label, plan=plan, config_overrides=over,
                 seconds=time.perf_counter() - t0, levels=ov._plan.describe(),
                 microcode=ov._plan.micro.stats if ov._plan.micro is not None else None)
            c = bench_graph(args, out, label, plan, g, ov, counts, n_gpus, ref)
        finally:
            for k, v in saved.items():
                setattr(config, k, v)
        if plan == "off":
            ref = c
        ov.release()
        base_ov.release()
        del ov
        free_gpu(args.device_kind, n_gpus)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", default="1,2,4", help="device counts to run (those beyond the host's are left out)")
    ap.add_argument("--tiled-gpus", default="2,4", help="device counts on the tiled graph (1: the multi path's "
                    "overhead on one device, measured on NY by default; '' or 0: the one-device reference only)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--tiled-reps", type=int, default=None, help="reps on the tiled graph (default --reps)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--splits", choices=("auto", "all"), default="auto")
    ap.add_argument("--tiled-splits", choices=("auto", "all"), default="auto")
    ap.add_argument("--plans", nargs="+", default=["off"], help="customization plans on NY: off, 256:32, "
                    "256:32,4096:1024 (mezzanine levels under those levels, Partition.refine), e.g. --plans off 256:32")
    ap.add_argument("--tiled-plans", nargs="+", default=None, help="plans on the tiled graph (default --plans); a "
                    "plan's tiled partition is NY's refined partition tiled (tiled_refined_partition), no partitioner run")
    ap.add_argument("--mezz-dir", default=None, help="directory holding cached refined NY partitions "
                    "(mezz_NY_<sizes>_<plan>_<mode>, Partition.save; default out/crp_bench)")
    ap.add_argument("--ny", default=None, help="NY .gr/.gr.gz (default: the shipped copy)")
    ap.add_argument("--partition", default=None, help="NY partition directory (Partition.save)")
    ap.add_argument("--skip-ny", action="store_true")
    ap.add_argument("--skip-tiled", action="store_true")
    ap.add_argument("--tiles", type=int, default=8, help="tiled TxT NY (default 8)")
    ap.add_argument("--budget-s", type=float, default=360.0, help="start no new configuration after this")
    ap.add_argument("--device-kind", choices=("gpu", "cpu"), default="gpu", help="cpu: a dry run on virtual devices")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    kind = args.device_kind
    if kind == "gpu":
        import cupy as cp

        n_gpus = cp.cuda.runtime.getDeviceCount()
        name = cp.cuda.runtime.getDeviceProperties(0)["name"]
        device = name.decode() if isinstance(name, bytes) else str(name)
    else:
        n_gpus = 4
        device = "cpu (virtual devices: a dry run)"

    def device_counts(spec):
        return [k for k in (int(x) for x in spec.split(",") if x.strip()) if 1 <= k <= n_gpus]

    counts = device_counts(args.gpus)
    plans = list(args.plans)
    tplans = list(args.tiled_plans or args.plans)
    date = dt.date.today().isoformat()
    META.update(device=device, host_gpus=n_gpus, commit=commit(), date=date)
    tag = "".join(ch if ch.isalnum() else "_" for ch in device.split("(")[0].strip().lower())[:24]
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / f"crp_multi_gpu_{date}_{tag}_x{n_gpus}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    print(f"# {device} x{n_gpus}, device counts {counts}, plans {plans} (tiled {tplans}), out {out}", flush=True)
    t0 = time.perf_counter()
    g = ny_graph(args.ny)
    part, cached, psec = ny_partition(g, args.partition)
    emit(out, what="ny partition", cached=cached, seconds=psec, cells=list(part.n_cells),
         load_seconds=time.perf_counter() - t0)
    refined = {}
    for plan in sorted({plan_overrides(x)[0] for x in plans + tplans}):
        mezzanine_spec(plan, part)  # a bad spec stops here, before anything runs
        if plan != "off":
            refined[plan], rc, rs = ny_refined(g, part, plan, args.mezz_dir)
            emit(out, what="ny refined partition", plan=plan, cached=rc, seconds=rs, cells=list(refined[plan].n_cells),
                 cell_sizes=list(refined[plan].cell_sizes))
    if not args.skip_ny:
        ov = Overlay.build(g, part, mezzanine=False)
        run_plans(args, out, "NY", g, ov, plans, refined, counts, n_gpus)
        del ov
    if not args.skip_tiled:
        why = over_budget(args)
        if why:
            emit(out, what="skipped", graph="tiled", reason=why)
        else:
            t0 = time.perf_counter()
            tg = gpuroute.datasets.tile(g, args.tiles, args.tiles)
            t1 = time.perf_counter()
            tpart = tiled_partition(part, tg, args.tiles, args.tiles)
            t2 = time.perf_counter()
            trefined = {p: tiled_refined_partition(refined[p], part, tpart, tg, args.tiles, args.tiles)
                        for p in {plan_overrides(x)[0] for x in tplans} if p != "off"}
            t3 = time.perf_counter()
            tov = Overlay.build(tg, tpart, mezzanine=False)
            t4 = time.perf_counter()
            label = f"tiled {args.tiles}x{args.tiles} NY (synthetic)"
            emit(out, what="tiled build", graph=label, tile_seconds=t1 - t0, partition_seconds=t2 - t1,
                 refined_partition_seconds=t3 - t2, overlay_seconds=t4 - t3, cells=list(tpart.n_cells),
                 cell_sizes=list(tpart.cell_sizes),
                 refined={p: {"cells": list(x.n_cells), "cell_sizes": list(x.cell_sizes)} for p, x in trefined.items()})
            args.splits = args.tiled_splits
            if args.tiled_reps is not None:
                args.reps = args.tiled_reps
            run_plans(args, out, label, tg, tov, tplans, trefined, device_counts(args.tiled_gpus), n_gpus)
    print(f"# done in {time.perf_counter() - T0:.1f} s; {out}", flush=True)


if __name__ == "__main__":
    main()
