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

Run time is bounded: --budget-s (default 360 s) stops starting new configurations once spent (the rows say
what was skipped); --skip-tiled leaves the tiled graph out. Timings are printed as they come (one JSON row
per line) and the JSON file is rewritten after every row.

Usage (on the device):
    PYTHONPATH=src python3 benchmarks/crp_multi_gpu.py [--gpus 1,2,4] [--reps 20] [--splits auto|all]
        [--ny PATH] [--skip-ny] [--skip-tiled] [--tiles 8] [--budget-s 360] [--out benchmarks/results/NAME.json]
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

import gpuroute  # noqa: E402
from gpuroute import Overlay, Partition, config  # noqa: E402
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


def tiled_partition(base_part, tg, kx, ky):
    """NY's partition in every copy, plus a top level of 2x2 copies (no partitioner run)."""
    n = base_part.cells.shape[1]
    copies = kx * ky
    rows = []
    for q in range(base_part.n_levels):
        nc = int(base_part.cells[q].max()) + 1
        rows.append((np.arange(copies, dtype=np.int64)[:, None] * nc + base_part.cells[q][None, :]).ravel())
    ci, cj = np.arange(copies) % kx, np.arange(copies) // kx
    bx = (kx + 1) // 2
    block = (cj // 2) * bx + ci // 2
    rows.append(np.repeat(block, n))
    top = 1 << int(np.ceil(np.log2(4 * n + 1)))
    sizes = tuple(base_part.cell_sizes) + (max(top, 2 * base_part.cell_sizes[-1]),)
    return Partition(np.stack(rows).astype(np.int32), sizes, "tiled " + base_part.method, topology_fingerprint(tg),
                     meta={"tiled_from": "NY partition", "top_level": "2x2 copies"})


def free_gpu(kind, n):
    if kind != "gpu":
        return
    import cupy as cp

    for d in range(n):
        with cp.cuda.Device(d):
            cp.cuda.Device(d).synchronize()
            cp.get_default_memory_pool().free_all_blocks()
    cp.get_default_pinned_memory_pool().free_all_blocks()


def bench_graph(args, out, label, g, ov, counts, n_gpus):
    kind = args.device_kind
    metric = g.default_weight
    emit(out, what="overlay", graph=label, nodes=g.n_nodes, arcs=g.n_arcs, cells=list(ov.n_cells),
         clique_entries=int(ov._topo["cq_first"][-1]), tree_entries=int(ov._tree_first[-1]),
         build_seconds=ov.stats["topology_s"])
    # the one-device reference
    dev1 = "gpu" if kind == "gpu" else "cpu"
    t0 = time.perf_counter()
    ov.customize(metric, device=dev1)
    first = time.perf_counter() - t0
    wall, dsec = [], []
    for i in range(args.warmup + args.reps):
        t0 = time.perf_counter()
        info = ov.customize(metric, device=dev1)
        w = time.perf_counter() - t0
        if i >= args.warmup:
            wall.append(w)
            dsec.append(float(sum(info["level_seconds"])))
    ref_c = np.array(ov._state.clique, copy=True)
    ref_t = np.array(ov._state.tree, copy=True)
    one = {"wall": med(wall), "device": med(dsec)}
    emit(out, what="customize", graph=label, impl=f"one {dev1} (Overlay.customize)", gpus=1, metric=metric,
         setup_and_first_seconds=first, seconds=one["wall"], device_seconds=one["device"],
         level_seconds=info["level_seconds"], rounds=info.get("rounds"))
    ov.release()
    free_gpu(kind, n_gpus)
    for k in counts:
        splits = [None] if args.splits == "auto" else list(range(ov.n_levels))
        for split in splits:
            spent = time.perf_counter() - T0
            if spent > args.budget_s:
                emit(out, what="skipped", graph=label, gpus=k, split_level=split,
                     reason=f"budget: {spent:.0f} s spent of --budget-s {args.budget_s:.0f}")
                continue
            devs = list(range(k))
            t0 = time.perf_counter()
            st, info = customize_multi(ov, metric, devices=devs, device_kind=kind, split_level=split, install=False)
            first = time.perf_counter() - t0
            setup = info["multi"]["setup_seconds"]
            wall, dsec, busy, gat, up = [], [], [], [], []
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
            st.tree  # waits for the trees' copies  # noqa: B018
            exact = bool(np.array_equal(st.clique, ref_c) and np.array_equal(st.tree, ref_t))
            m = info["multi"]
            emit(out, what="customize", graph=label, impl=f"customize_multi ({kind})", gpus=k, metric=metric,
                 split_level=m["split_level"], split_plan_level=m["split_plan_level"], setup_seconds=setup,
                 setup_and_first_seconds=first, seconds=med(wall), device_seconds=med(dsec),
                 busy_seconds={str(d): med([b[i] for b in busy]) for i, d in enumerate(devs)},
                 gather_seconds=med(gat), upper_seconds=med(up),
                 speedup_device=(one["device"] / med(dsec)) if med(dsec) else None,
                 speedup_wall=(one["wall"] / med(wall)) if med(wall) else None,
                 cells_per_device=m["cells_per_device"], work_per_device=m["work_per_device"],
                 imbalance=m["imbalance"], upper_cells=m["upper_cells"], parts=m["parts"],
                 bytes_peer=m["bytes_peer"], bytes_h2d=m["bytes_h2d"], bytes_d2h=m["bytes_d2h"],
                 peer_access=m.get("peer_access"), rounds=m.get("rounds"), level_seconds=m["level_seconds"],
                 exact=exact)
            assert exact, f"{label}, {k} devices, split {split}: the cliques or trees differ from one device's"
            ov._multi_cust = None
            free_gpu(kind, n_gpus)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", default="1,2,4", help="device counts to run (those beyond the host's are left out)")
    ap.add_argument("--tiled-gpus", default="2,4", help="device counts on the tiled graph (1: the multi path's "
                    "overhead on one device, measured on NY by default)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--splits", choices=("auto", "all"), default="auto")
    ap.add_argument("--tiled-splits", choices=("auto", "all"), default="auto")
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
    counts = [k for k in (int(x) for x in args.gpus.split(",")) if 1 <= k <= n_gpus]
    date = dt.date.today().isoformat()
    META.update(device=device, host_gpus=n_gpus, commit=commit(), date=date)
    tag = "".join(ch if ch.isalnum() else "_" for ch in device.split("(")[0].strip().lower())[:24]
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / f"crp_multi_gpu_{date}_{tag}_x{n_gpus}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    print(f"# {device} x{n_gpus}, device counts {counts}, out {out}", flush=True)
    t0 = time.perf_counter()
    g = ny_graph(args.ny)
    part, cached, psec = ny_partition(g, args.partition)
    emit(out, what="ny partition", cached=cached, seconds=psec, cells=list(part.n_cells),
         load_seconds=time.perf_counter() - t0)
    if not args.skip_ny:
        ov = Overlay.build(g, part)
        bench_graph(args, out, "NY", g, ov, counts, n_gpus)
        del ov
    if not args.skip_tiled:
        spent = time.perf_counter() - T0
        if spent > args.budget_s:
            emit(out, what="skipped", graph="tiled", reason=f"budget: {spent:.0f} s spent")
        else:
            t0 = time.perf_counter()
            tg = gpuroute.datasets.tile(g, args.tiles, args.tiles)
            t1 = time.perf_counter()
            tpart = tiled_partition(part, tg, args.tiles, args.tiles)
            t2 = time.perf_counter()
            tov = Overlay.build(tg, tpart)
            t3 = time.perf_counter()
            label = f"tiled {args.tiles}x{args.tiles} NY (synthetic)"
            emit(out, what="tiled build", graph=label, tile_seconds=t1 - t0, partition_seconds=t2 - t1,
                 overlay_seconds=t3 - t2, cells=list(tpart.n_cells), cell_sizes=list(tpart.cell_sizes))
            args.splits = args.tiled_splits
            tcounts = [k for k in (int(x) for x in args.tiled_gpus.split(",")) if 1 <= k <= n_gpus]
            bench_graph(args, out, label, tg, tov, tcounts, n_gpus)
    print(f"# done in {time.perf_counter() - T0:.1f} s; {out}", flush=True)


if __name__ == "__main__":
    main()
