"""Benchmark: CRP customization on the GPU (gpuroute.crp.customize_gpu) against the CPU twin (numba, all
cores) and RoutingKit's CCH customization, in one run on one machine; every GPU customization is checked
bit for bit against the CPU cliques.

Measured on NY (the shipped DIMACS graph; the partition from out/crp_bench/ when cached, else KaHIP):
* setup of the GPU structures (once per topology);
* full customization, metrics distance and time: wall time of ``Overlay.customize(device="gpu")`` (end to
  end: metric upload, decode, levels, cliques and trees back to the host, the host's decoded turn costs
  and query arrays), the device time per level (CUDA events) and the Bellman-Ford rounds;
* the same with the trees not kept (``CRP_KEEP_TREES = False``);
* a traffic update of 1,000 random arcs (``Overlay.update``), and of 1,000 arcs inside a 5 km disc around a
  random node (what traffic looks like: a few neighbouring cells), both checked against the CPU update;
* a sweep of threads per block, shared memory per unit and the Bellman-Ford frontier on or off;
* ``--plans``: customization plans compared in one run (gpuroute.crp.customize.CustomizationPlan, the paper's
  sec. 3-4): mezzanine levels on or off, the lowest mezzanine level by microinstructions or by Bellman-Ford.
  Per plan: the device time of every plan level (CUDA events) and its Bellman-Ford rounds, the query levels'
  times (each with its mezzanine levels), wall time, setup (mezzanine partition, topology, microinstructions,
  upload), the microinstruction program's size (instructions, words, layers, blocks), the trees' size, and
  exactness flags: the cliques against the CPU customization without mezzanine levels, and a random and a
  clustered update against the CPU update. Mezzanine partitions are cached in out/crp_bench/.

Plan specs: ``off``; ``256:32`` (32-node mezzanine cells under the 256-node level); ``256:32,4096:1024``;
``256:16:64`` (two mezzanine levels under 256); a ``/bf`` suffix runs the lowest mezzanine level by
Bellman-Ford instead of microinstructions (``256:32/bf``); ``;CRP_NAME=INT`` suffixes set integer CRP_
tunables for that plan only (``256:16;CRP_MICRO_SMEM_BYTES=8192;CRP_MICRO_THREADS=128``: 8 KiB blocks, whose
1,024 positions fit the absolute 32-bit encoding).

Usage: PYTHONPATH=src python3 benchmarks/crp_gpu.py [--reps 10] [--out DIR] [--sweep]
       PYTHONPATH=src python3 benchmarks/crp_gpu.py --plans off 256:32 256:32/bf 256:32,4096:1024 [--reps 20]
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
from gpuroute import Overlay, Partition, config  # noqa: E402
from gpuroute.crp import Metric  # noqa: E402


def emit(out, **row):
    row["device"] = DEVICE
    row["commit"] = os.environ.get("GPUROUTE_COMMIT", "unknown")
    print(json.dumps(row), flush=True)
    out.append(row)


def med(xs):
    return float(np.median(xs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", default="out")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--updates-only", action="store_true", help="setup, customization and the two updates only")
    ap.add_argument("--plans", nargs="+", default=None,
                    help="compare customization plans only (see the module docstring), e.g. off 256:32 256:32/bf")
    args = ap.parse_args()
    rows = []
    g = gpuroute.datasets.load("ny")
    gt = gpuroute.datasets.load("ny-time")  # same arcs in the same order: a second metric of one topology
    metrics = {"distance": "distance", "time": Metric(gt.weight(), name="time", units=gt.units["travel_time"].symbol)}
    sizes = "-".join(map(str, config.CRP_CELL_SIZES))
    pdir = ROOT / "out" / "crp_bench" / f"part_NY_kahip_{config.CRP_KAHIP_MODE}_{sizes}"
    t0 = time.perf_counter()
    part = Partition.load(pdir, g) if pdir.exists() else Partition.build(g)
    emit(rows, what="partition", cached=pdir.exists(), seconds=time.perf_counter() - t0)
    if args.plans:
        compare_plans(rows, args, g, part, metrics)
        finish(rows, args)
        return
    ov = Overlay.build(g, part, mezzanine=False)
    emit(rows, what="overlay build", seconds=ov.stats["topology_s"], cells=ov.n_cells,
         entry_points=ov.stats["entry_points"], clique_entries=ov.stats["clique_entries"])
    rng = np.random.default_rng(0)
    ids = rng.integers(0, g.n_arcs, 1000)
    for mname, metric in metrics.items():
        ov.customize(metric, device="cpu")
        cpu = []
        for _ in range(max(2, args.reps // 3)):
            cpu.append(ov.customize(metric, device="cpu")["seconds"])
        ref = ov._state.clique.copy()
        emit(rows, what="customize", metric=mname, impl="cpu numba (all cores)", threads=config_threads(),
             seconds=med(cpu))
        t0 = time.perf_counter()
        ov.customize(metric, device="gpu")
        first = time.perf_counter() - t0
        emit(rows, what="gpu setup + first customization", metric=mname, seconds=first,
             setup_seconds=ov._gpu_cust.setup_seconds)
        wall, lv, rounds = [], [], None
        for _ in range(args.reps):
            t0 = time.perf_counter()
            info = ov.customize(metric, device="gpu")
            wall.append(time.perf_counter() - t0)
            lv.append(info["level_seconds"])
            rounds = info["rounds"]
            host = info["host_seconds"]
        exact = bool(np.array_equal(ov._state.clique, ref))
        emit(rows, what="customize", metric=mname, impl="gpu (trees kept)", seconds=med(wall),
             device_level_seconds=np.median(np.array(lv), axis=0).tolist(),
             device_seconds=med(np.sum(lv, axis=1)), rounds=rounds, exact=exact, last_host_seconds=host)
        # traffic: 1,000 random arcs
        base = np.asarray(ov.arc_cost)[ids]
        costs = np.maximum(1, base * rng.integers(1, 4, ids.size))
        ug = []
        for _ in range(args.reps):
            ov.customize(metric, device="gpu")
            t0 = time.perf_counter()
            u = ov.update(ids, costs, device="gpu")
            ug.append(time.perf_counter() - t0)
        got = ov._state.clique.copy()
        uc = []
        for _ in range(max(2, args.reps // 3)):
            ov.customize(metric, device="cpu")
            t0 = time.perf_counter()
            ov.update(ids, costs, device="cpu")
            uc.append(time.perf_counter() - t0)
        emit(rows, what="update 1000 arcs", metric=mname, gpu_seconds=med(ug), cpu_seconds=med(uc),
             cells=u["cells"], gpu_device_level_seconds=u["level_seconds"],
             exact=bool(np.array_equal(got, ov._state.clique)))
        # clustered traffic: 1,000 arcs whose tails lie within 5 km of a random node
        for radius_m in (5000.0, 2000.0):
            centre = int(rng.integers(0, g.n_nodes))
            tails = np.repeat(np.arange(g.n_nodes), np.diff(g.first_out))
            near = gpuroute.haversine_m(g.coords[tails, 0], g.coords[tails, 1], g.coords[centre, 0],
                                        g.coords[centre, 1]) <= radius_m
            cand = np.flatnonzero(near)
            cids = rng.choice(cand, min(1000, cand.size), replace=False)
            cbase = np.asarray(ov.arc_cost)[cids]
            ccosts = np.maximum(1, cbase * rng.integers(1, 4, cids.size))
            ug, dev_s = [], []
            for _ in range(args.reps):
                ov.customize(metric, device="gpu")
                t0 = time.perf_counter()
                u = ov.update(cids, ccosts, device="gpu")
                ug.append(time.perf_counter() - t0)
                dev_s.append(sum(u["level_seconds"]))
            got = ov._state.clique.copy()
            ov.customize(metric, device="cpu")
            t0 = time.perf_counter()
            ov.update(cids, ccosts, device="cpu")
            cpu_s = time.perf_counter() - t0
            emit(rows, what=f"update {cids.size} arcs in a {radius_m / 1000:g} km disc", metric=mname,
                 gpu_seconds=med(ug), gpu_device_seconds=med(dev_s), cpu_seconds=cpu_s, cells=u["cells"],
                 gpu_device_level_seconds=u["level_seconds"], exact=bool(np.array_equal(got, ov._state.clique)))
        if args.updates_only:
            break
    if args.updates_only:
        finish(rows, args)
        return
    # without trees
    config.CRP_KEEP_TREES = False
    ov2 = Overlay.build(g, part, mezzanine=False)
    ov2.customize(metrics["time"], device="gpu")
    wall, lv = [], []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        info = ov2.customize(metrics["time"], device="gpu")
        wall.append(time.perf_counter() - t0)
        lv.append(sum(info["level_seconds"]))
    emit(rows, what="customize", metric="time", impl="gpu (no trees)", seconds=med(wall), device_seconds=med(lv),
         exact=bool(np.array_equal(ov2._state.clique, ref_time(ov, metrics["time"]))))
    config.CRP_KEEP_TREES = True
    if args.sweep:
        for threads in (256, 512, 1024):
            for smem in (12 * 1024, 24 * 1024, 48 * 1024):
                for grp in (True, False):  # the frontier of the Bellman-Ford rounds
                    config.CRP_GPU_THREADS, config.CRP_GPU_SMEM_BYTES, config.CRP_GPU_FRONTIER = threads, smem, grp
                    ov3 = Overlay.build(g, part, mezzanine=False)
                    try:
                        ov3.customize(metrics["time"], device="gpu")
                        lv = [sum(ov3.customize(metrics["time"], device="gpu")["level_seconds"]) for _ in range(5)]
                        emit(rows, what="sweep", threads=threads, smem=smem, frontier=grp, device_seconds=med(lv),
                             exact=bool(np.array_equal(ov3._state.clique, ref_time(ov, metrics["time"]))))
                    except Exception as e:  # a configuration the device cannot launch
                        emit(rows, what="sweep", threads=threads, smem=smem, frontier=grp, error=str(e)[:200])
    try:
        import routingkit  # noqa: F401
        emit(rows, what="note", text="RoutingKit CCH customization: see benchmarks/crp.py")
    except ImportError:
        pass
    finish(rows, args)


def parse_plan(spec, part):
    """(mezzanine dict or False, config overrides dict, label) of a plan spec (see the module docstring)."""
    body, *sets = spec.split(";")
    over = {}
    for item in sets:
        key, _, val = item.partition("=")
        if not key.startswith("CRP_") or not hasattr(config, key) or not val.lstrip("-").isdigit():
            raise SystemExit(f"plan {spec!r}: {item!r} must be CRP_NAME=INT with CRP_NAME a gpuroute.config tunable")
        over[key] = int(val)
    if body.endswith("/bf"):
        body = body[:-3]
        over["CRP_MICROCODE"] = 0
    if body == "off":
        return False, over, spec
    mz = {}
    for item in body.split(","):
        level, *subs = (int(x) for x in item.split(":"))
        if level not in part.cell_sizes or not subs:
            raise SystemExit(f"plan {spec!r}: {item!r} must be LEVEL_SIZE:SIZE[:SIZE...] with LEVEL_SIZE one of "
                             f"{part.cell_sizes}")
        mz[level] = tuple(sorted(subs))
    return mz, over, spec


def mezzanine_partition(g, part, mz):
    """The refined partition of ``mz``, cached in out/crp_bench/ (kaffpa in CRP_MEZZANINE_KAHIP_MODE)."""
    tag = "_".join(f"{k}-{'-'.join(map(str, v))}" for k, v in sorted(mz.items()))
    sizes = "-".join(map(str, part.cell_sizes))
    d = ROOT / "out" / "crp_bench" / f"mezz_NY_{sizes}_{tag}_{config.CRP_MEZZANINE_KAHIP_MODE}"
    t0 = time.perf_counter()
    if d.exists():
        ext = Partition.load(d, g)
        cached = True
    else:
        ext = part.refine(g, tuple(tuple(mz.get(s, ())) for s in part.cell_sizes))
        ext.save(d)
        cached = False
    return ext, cached, time.perf_counter() - t0


def compare_plans(rows, args, g, part, metrics):
    """Per plan spec: setup, device time per plan level, rounds, exactness (see the module docstring)."""
    base = Overlay.build(g, part, mezzanine=False)
    refs = {}
    for mname, metric in metrics.items():
        base.customize(metric, device="cpu")
        refs[mname] = base._state.clique.copy()
    rng = np.random.default_rng(0)
    ids = rng.integers(0, g.n_arcs, 1000)
    centre = int(rng.integers(0, g.n_nodes))
    tails = np.repeat(np.arange(g.n_nodes), np.diff(g.first_out))
    near = np.flatnonzero(gpuroute.haversine_m(g.coords[tails, 0], g.coords[tails, 1], g.coords[centre, 0],
                                               g.coords[centre, 1]) <= 5000.0)
    cids = rng.choice(near, min(1000, near.size), replace=False)
    defaults = {k: getattr(config, k) for k in dir(config) if k.startswith("CRP_")}
    for spec in args.plans:
        mz, over, label = parse_plan(spec, part)
        for k, v in defaults.items():
            setattr(config, k, v)
        for k, v in over.items():
            setattr(config, k, type(defaults[k])(v))
        ext, cached, part_s = (None, True, 0.0) if mz is False else mezzanine_partition(g, part, mz)
        t0 = time.perf_counter()
        ov = Overlay.build(g, part, mezzanine=False if ext is None else ext)
        build_s = time.perf_counter() - t0
        plan = ov._plan
        ms = plan.micro.stats if plan.micro is not None else None
        t0 = time.perf_counter()
        ov.customize(metrics["time"], device="gpu")
        first_s = time.perf_counter() - t0
        emit(rows, what="plan setup", plan=label, config_overrides=over, levels=plan.describe(), mezzanine_partition_cached=cached,
             mezzanine_partition_seconds=part_s, overlay_build_seconds=build_s, plan_seconds=plan.seconds,
             microcode_build_seconds=plan.micro_seconds, gpu_setup_seconds=ov._gpu_cust.setup_seconds,
             first_customization_seconds=first_s, microcode=ms, tree_entries=int(ov._tree_first[-1]),
             tree_bytes=int(ov._tree_first[-1]) * np.dtype(ov._tree_dtype).itemsize,
             plan_clique_entries=plan.n_ext_clique)
        for mname, metric in metrics.items():
            wall, lv, rounds, qlv = [], [], None, []
            ov.customize(metric, device="gpu")
            for _ in range(args.reps):
                t0 = time.perf_counter()
                info = ov.customize(metric, device="gpu")
                wall.append(time.perf_counter() - t0)
                lv.append([d["seconds"] for d in info["plan"]])
                qlv.append(info["level_seconds"])
                rounds = [d["rounds"] for d in info["plan"]]
            emit(rows, what="plan customize", plan=label, metric=mname, seconds=med(wall),
                 device_seconds=med(np.sum(lv, axis=1)),
                 device_plan_level_seconds=np.median(np.array(lv), axis=0).tolist(),
                 device_query_level_seconds=np.median(np.array(qlv), axis=0).tolist(),
                 plan_levels=[f"{d['cell_size']}{'' if d['query_level'] is not None else ' (mezzanine)'} {d['method']}"
                              for d in info["plan"]],
                 rounds=rounds, exact=bool(np.array_equal(ov._state.clique, refs[mname])))
        # traffic: random and clustered, against the CPU update of the overlay without mezzanine levels
        metric = metrics["time"]
        for what, arcs in (("update 1000 random arcs", ids), (f"update {cids.size} arcs in a 5 km disc", cids)):
            costs = np.maximum(1, np.asarray(ov.arc_cost)[arcs] * rng.integers(1, 4, arcs.size))
            dev_s, wall = [], []
            for _ in range(max(3, args.reps // 2)):
                ov.customize(metric, device="gpu")
                t0 = time.perf_counter()
                u = ov.update(arcs, costs, device="gpu")
                wall.append(time.perf_counter() - t0)
                dev_s.append(sum(u["level_seconds"]))
            base.customize(metric, device="cpu")
            base.update(arcs, costs, device="cpu")
            emit(rows, what=what, plan=label, metric="time", gpu_seconds=med(wall), gpu_device_seconds=med(dev_s),
                 cells=u["cells"], exact=bool(np.array_equal(ov._state.clique, base._state.clique)))
        ov._gpu_cust = None
    for k, v in defaults.items():
        setattr(config, k, v)


def finish(rows, args):
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"crp_gpu_{dt.date.today()}.json"), "w") as f:
        json.dump(rows, f, indent=1)


def ref_time(ov, metric):
    if not hasattr(ref_time, "c"):
        ov.customize(metric, device="cpu")
        ref_time.c = ov._state.clique.copy()
    return ref_time.c


def config_threads():
    import numba

    return numba.get_num_threads()


try:
    import cupy

    DEVICE = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
except Exception:  # no GPU: the script needs one
    DEVICE = "none"

if __name__ == "__main__":
    main()
