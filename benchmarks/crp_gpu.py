"""Benchmark: CRP customization on the GPU (gpuroute.crp.customize_gpu) against the CPU twin (numba, all
cores) and RoutingKit's CCH customization, in one run on one machine; every GPU customization is checked
bit for bit against the CPU cliques.

Measured on NY (the shipped DIMACS graph; the partition from out/crp_bench/ when cached, else KaHIP):
* setup of the GPU structures (once per topology);
* full customization, metrics distance and time: wall time of ``Overlay.customize(device="gpu")`` (end to
  end: metric upload, decode, levels, cliques and trees back to the host, the host's decoded turn costs
  and query arrays), the device time per level (CUDA events) and the Bellman-Ford rounds;
* the same with the trees not kept (``CRP_KEEP_TREES = False``);
* a traffic update of 1,000 random arcs (``Overlay.update``), of 1,000 arcs inside a 5 km disc around a
  random node and of the arcs inside a 2 km disc (what traffic looks like: a few neighbouring cells), all
  checked against the CPU update, in steady state (:func:`bench_update`), with the state's changed ranges
  copied and with every array copied whole (the way before), end to end and on the device;
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

* ``--push``: the push kernel (``config.CRP_GPU_PUSH_*``) against the pull kernel (the way before:
  ``CRP_GPU_PUSH_MAX_CELLS = 0``), one run: per way (``--push-ways``: ``pull``, ``push`` = the defaults,
  and ``NAME=INT,NAME=INT`` variants of the CRP_ tunables), the device time of every level (median of
  ``--reps``), its rounds, the full customization's device total and wall time, the cliques against the CPU's
  and the trees against the pull kernel's (bit for bit); then 1,000 random arcs and 1,000 arcs in a 5 km disc
  (steady state, the update and its reverse alternating), device parts and levels, exact against the CPU update;
  ``--push-plans`` adds mezzanine plans (``256:32``) run both ways.

Usage: PYTHONPATH=src python3 benchmarks/crp_gpu.py [--reps 10] [--out DIR] [--sweep]
       PYTHONPATH=src python3 benchmarks/crp_gpu.py --plans off 256:32 256:32/bf 256:32,4096:1024 [--reps 20]
       PYTHONPATH=src python3 benchmarks/crp_gpu.py --push [--push-ways pull push CRP_GPU_PUSH_TARGET_UNITS=64]
                                                    [--push-plans 256:32]
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
#: device memory bandwidth the update's copy floors are measured against (H100 SXM, bytes/s, what a copy reaches)
DEVICE_BW = 2.8e12
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
    ap.add_argument("--push", action="store_true", help="the push kernel against the pull kernel only")
    ap.add_argument("--push-ways", nargs="+", default=["pull", "push"],
                    help="pull, push, or CRP_NAME=INT[,CRP_NAME=INT] overrides of the push defaults")
    ap.add_argument("--push-plans", nargs="*", default=[], help="mezzanine plans run both ways, e.g. 256:32")
    ap.add_argument("--push-update-ways", nargs="+", default=["pull", "push"],
                    help="the ways (as --push-ways) the updates are measured with")
    ap.add_argument("--push-plan-ways", nargs="+", default=["pull", "push"],
                    help="the ways (as --push-ways) the --push-plans are measured with (customization and updates)")
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
    if args.push:
        compare_push(rows, args, g, part, metrics)
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
        # traffic: 1,000 random arcs, then 1,000 arcs inside a 5 km disc and those inside a 2 km disc around
        # random nodes (what traffic looks like: a few neighbouring cells)
        base = np.asarray(ov.arc_cost)[ids]
        costs = np.maximum(1, base * rng.integers(1, 4, ids.size))
        rng2 = np.random.default_rng(1)  # the second sets (``two_sets``): the measured ones stay those of before
        ids2 = rng2.integers(0, g.n_arcs, ids.size)
        sets = [("update 1000 arcs", ids, costs, (ids2, np.maximum(1, np.asarray(ov.arc_cost)[ids2]
                                                                    * rng2.integers(1, 4, ids2.size))))]
        tails = np.repeat(np.arange(g.n_nodes), np.diff(g.first_out))
        for radius_m in (5000.0, 2000.0):
            discs = []
            for r_ in (rng, rng2):  # the set measured, and a second disc elsewhere
                centre = int(r_.integers(0, g.n_nodes))
                near = gpuroute.haversine_m(g.coords[tails, 0], g.coords[tails, 1], g.coords[centre, 0],
                                            g.coords[centre, 1]) <= radius_m
                cand = np.flatnonzero(near)
                cids = r_.choice(cand, min(1000, cand.size), replace=False)
                discs.append((cids, np.maximum(1, np.asarray(ov.arc_cost)[cids] * r_.integers(1, 4, cids.size))))
            (cids, ccosts), other = discs
            sets.append((f"update {cids.size} arcs in a {radius_m / 1000:g} km disc", cids, ccosts, other))
        for what, uids, ucosts, other in sets:
            bench_update(rows, ov, metric, mname, what, uids, ucosts, args.reps, other)
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


#: the range-copy kernels the update path had before crp_copy_chunks (one block per range, one element per
#: thread, one launch per array), kept here to measure against in the same run
OLD_COPY_SRC = r"""
typedef long long i64;
template <class T>
__device__ __forceinline__ void copy_ranges(i64 n, const i64* __restrict__ ranges, const T* __restrict__ src,
                                            T* __restrict__ dst) {
    for (i64 k = blockIdx.x; k < n; k += gridDim.x) {
        const i64 s = ranges[3 * k], d = ranges[3 * k + 1], len = ranges[3 * k + 2];
        for (i64 i = threadIdx.x; i < len; i += blockDim.x) dst[d + i] = src[s + i];
    }
}
extern "C" __global__ void old_copy_i64(i64 n, const i64* r, const i64* s, i64* d) { copy_ranges(n, r, s, d); }
extern "C" __global__ void old_copy_i32(i64 n, const i64* r, const int* s, int* d) { copy_ranges(n, r, s, d); }
extern "C" __global__ void old_copy_u16(i64 n, const i64* r, const unsigned short* s, unsigned short* d) {
    copy_ranges(n, r, s, d);
}
"""


def bench_copy_kernels(ov, ids, reps, burst=10):
    """The copies of an update alone, on the device, over the ranges of the cells ``ids`` touch (cliques in the
    plan's layout, trees): what the next update's sync copies when its cells are elsewhere, and what this one
    packs. Per way, ``burst`` copies back to back between two CUDA events (per copy: the launches' host cost
    hidden where the kernel is longer), median of ``reps``: ``before`` (the kernels the update path had: one
    block per range, a launch per array), ``chunks`` (crp_copy_chunks, one launch), ``whole`` (each array whole
    by cudaMemcpyAsync, device to device); the pack the same, into packed buffers. Checked: equal results."""
    import cupy as cp

    from gpuroute.crp.customize_gpu import _Staging
    from gpuroute.crp.state_buffers import padded_offsets, update_ranges

    g = ov._gpu_cust
    uniq = np.unique(ids)
    hc, tc = ov._topo["hc"], ov._topo["tc"]
    cells = [np.unique(np.concatenate([hc[p, uniq], tc[p, uniq]])).astype(np.int64) for p in range(ov.n_levels)]
    r = update_ranges(ov._plan, ov._tree_first, cells)
    clique, tree = g.current["clique"], g.current["tree"]
    (cs, cl), (ts, tl) = r["clique_ext"], r["tree"]
    nbytes = 8 * int(cl.sum()) + tree.dtype.itemsize * int(tl.sum())
    mod = cp.RawModule(code=OLD_COPY_SRC, options=("-std=c++17",))
    k64 = mod.get_function("old_copy_i64")
    kt = mod.get_function("old_copy_u16" if tree.dtype == np.uint16 else "old_copy_i32")

    def tri(s, d, n):
        t = np.stack([s, d, n], axis=1).astype(np.int64)
        return cp.asarray(t.ravel())

    out = {"bytes": nbytes, "floor_seconds": 2 * nbytes / DEVICE_BW, "ranges": [int(cs.size), int(ts.size)]}
    c_at, c_n = padded_offsets(cs, cl, 8)
    t_at, t_n = padded_offsets(ts, tl, tree.dtype.itemsize)
    stream = cp.cuda.get_current_stream()
    for part in ("sync", "pack"):
        if part == "sync":
            dc, dt_ = cp.zeros_like(clique), cp.zeros_like(tree)
            c_dst, t_dst = cs, ts
        else:
            dc, dt_ = cp.zeros(max(c_n, 1), clique.dtype), cp.zeros(max(t_n, 1), tree.dtype)
            c_dst, t_dst = c_at, t_at
        tc_, tt_ = tri(cs, c_dst, cl), tri(ts, t_dst, tl)

        def run_old(dc=dc, dt_=dt_, tc_=tc_, tt_=tt_):
            if cs.size:
                k64((min(int(cs.size), 65535),), (256,), (np.int64(cs.size), tc_, clique, dc))
            if ts.size:
                kt((min(int(ts.size), 65535),), (256,), (np.int64(ts.size), tt_, tree, dt_))

        staged = _Staging()
        tab = g._stage_copies(staged, [(clique, dc, cs, c_dst, cl), (tree, dt_, ts, t_dst, tl)])
        staged.upload(cp)

        def run_new(staged=staged, tab=tab):
            g._copy_launch(staged, tab)

        def run_whole(dc=dc, dt_=dt_):
            for src, dst in ((clique, dc), (tree, dt_)):
                n = min(src.nbytes, dst.nbytes)
                cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, n, cp.cuda.runtime.memcpyDeviceToDevice,
                                            stream.ptr)

        got = {}
        for name, fn in (("before", run_old), ("chunks", run_new), ("whole", run_whole)):
            dc.fill(0)
            dt_.fill(0)
            fn()
            if name != "whole":
                got[name] = (dc.get(), dt_.get())
            ts_ = []
            for _ in range(max(reps, 3)):
                a, b = cp.cuda.Event(), cp.cuda.Event()
                a.record()
                for _ in range(burst):
                    fn()
                b.record()
                b.synchronize()
                ts_.append(cp.cuda.get_elapsed_time(a, b) / 1e3 / burst)
            out[f"{part}_seconds_{name}"] = med(ts_)
        out[f"{part}_equal"] = bool(all(np.array_equal(x, y) for x, y in zip(got["before"], got["chunks"], strict=True)))
    return out


def device_copy_summary(parts, u):
    """The device parts' medians over updates (``parts``: their ``device_seconds``), and the bytes the last
    update ``u`` copied on the device with their floor (each byte read once and written once at DEVICE_BW)."""
    cp_ = u.get("copied") or {}
    moved = {k: sum(v.get(k, {}).get("bytes", 0) for v in cp_.values()) for k in ("device_sync", "device_full",
                                                                                  "device_pack")}
    return {"device_parts_median": {k: med([x[k] for x in parts if k in x]) for k in (parts[-1] if parts else {})},
            "device_bytes": moved,
            "device_floor_seconds": {"sync": 2 * (moved["device_sync"] + moved["device_full"]) / DEVICE_BW,
                                     "pack": 2 * moved["device_pack"] / DEVICE_BW}}


def bench_update(rows, ov, metric, mname, what, ids, costs, reps, other=None):
    """One kind of traffic update on the GPU, end to end and on the device, in one run: with the state's
    ranges copied (config.CRP_UPDATE_DIRTY_RANGES, the default), the dirty cells split into their own work
    units (config.CRP_UPDATE_TARGET_UNITS) in blocks of config.CRP_UPDATE_THREADS (keys without suffix); the
    same in blocks of config.CRP_GPU_THREADS (``_base_threads``); with the levels' own units as well
    (``_level_units``); and with every array copied whole (``_whole_copies``: the way before). Checked bit
    for bit against the CPU update.

    Steady state: after one customization, the update and its reverse alternate (each touches the same
    cells; every update after the first two finds a recycled buffer that only needs the ranges the update
    before changed). ``gpu_seconds``: wall time of ``Overlay.update`` (the trees may still be arriving, as
    the state allows); ``gpu_seconds_with_trees``: until the trees are on the host too;
    ``gpu_device_seconds``: CUDA events from the first copy on the device to the last (sync of the spare
    copy, levels, packing); ``gpu_device_level_seconds``: the levels alone; ``copied``: bytes per array and
    kind of copy (host sync/full, device sync/full/pack, upload, download) of the last update;
    ``device_parts_median``: each device part's median over the reps (``sync``, ``levels``, ``pack``, ``total``,
    ``upload``: the descriptors' one upload before them); ``device_bytes`` and ``device_floor_seconds``: the
    bytes the sync and pack copied and their floor (each byte read and written once at ``DEVICE_BW``).
    ``other`` (ids, costs): a second set of arcs of the same kind; ``two_sets``: the same device figures with
    the two sets updated in turn (the spare then catches up with the other set's cells: what the alternation
    of one set, whose cells each update rewrites whole, does not copy), and whether the state after them
    equals a customization of the metric (``exact``).
    """
    base = np.asarray(ov.arc_cost)[ids].copy()
    out, gots = {}, {}
    target, threads = config.CRP_UPDATE_TARGET_UNITS, config.CRP_UPDATE_THREADS
    for key, mode, units, thr in (("", True, target, threads), ("_base_threads", True, target, 0),
                                  ("_level_units", True, 0, 0), ("_whole_copies", False, 0, 0)):
        config.CRP_UPDATE_DIRTY_RANGES, config.CRP_UPDATE_TARGET_UNITS, config.CRP_UPDATE_THREADS = mode, units, thr
        ov.customize(metric, device="gpu")
        t0 = time.perf_counter()
        ov.update(ids, costs, device="gpu")
        ov._state.tree  # noqa: B018
        first = time.perf_counter() - t0
        wall, wall_t, dev, lev, parts = [], [], [], [], []
        for _ in range(max(reps, 3)):
            for c in (base, costs):
                t0 = time.perf_counter()
                u = ov.update(ids, c, device="gpu")
                wall.append(time.perf_counter() - t0)
                ov._state.tree  # noqa: B018
                wall_t.append(time.perf_counter() - t0)
                lev.append(sum(u["level_seconds"]))
                dev.append(u.get("device_seconds", {}).get("total", float("nan")))
                parts.append(u.get("device_seconds") or {})
        out.update({f"gpu_seconds{key}": med(wall), f"gpu_seconds_with_trees{key}": med(wall_t),
                    f"gpu_device_level_seconds_total{key}": med(lev), f"gpu_first_update_seconds{key}": first})
        if mode:
            out[f"gpu_device_seconds{key}"] = med(dev)
        if not key:
            out.update(device_copy_summary(parts, u))
            out.update(target_units=units, update_threads=thr, device_parts=u.get("device_seconds"), copied=u.get("copied"),
                       gpu_device_level_seconds=u["level_seconds"], cells=u["cells"])
        gots[key or "_dirty_units"] = (ov._state.clique.copy(), ov._state.turn_cost.copy(),
                                       ov._state.q_turn_cost.copy(), ov._state.tree.copy())
    config.CRP_UPDATE_DIRTY_RANGES, config.CRP_UPDATE_TARGET_UNITS, config.CRP_UPDATE_THREADS = True, target, threads
    two = None
    if other is not None:  # two sets of arcs in turn: each update's spare catches up with the other set's cells
        oids, ocosts = other
        ov.customize(metric, device="gpu")
        mbase, obase = np.asarray(ov.arc_cost)[ids].copy(), np.asarray(ov.arc_cost)[oids].copy()
        parts = []
        for _ in range(max(reps, 3)):
            for i_, c_ in ((ids, costs), (oids, ocosts), (ids, mbase), (oids, obase)):
                u = ov.update(i_, c_, device="gpu")
                ov._state.tree  # noqa: B018
                parts.append(u.get("device_seconds") or {})
        two = (ov._state.clique.copy(), ov._state.tree.copy())  # back to the metric itself
        out["two_sets"] = dict(device_copy_summary(parts, u), cells=u["cells"])
    if ov._gpu_cust is not None and ov._gpu_cust.current is not None and ov._gpu_cust.current["tree"] is not None:
        try:  # (a measurement beside the update's: its failure must not lose the rest)
            out["copy_kernels"] = bench_copy_kernels(ov, ids, reps)
        except Exception as e:  # noqa: BLE001
            out["copy_kernels"] = {"error": f"{type(e).__name__}: {e}"}
    ov.customize(metric, device="cpu")
    if two is not None:
        out["two_sets"]["exact"] = bool(np.array_equal(two[0], ov._state.clique))
    t0 = time.perf_counter()
    ov.update(ids, costs, device="cpu")
    cpu_s = time.perf_counter() - t0
    st = ov._state
    # cliques and costs equal the CPU's; the GPU's trees equal across the three ways
    exact = {k: bool(np.array_equal(v[0], st.clique) and np.array_equal(v[1], st.turn_cost)
                     and np.array_equal(v[2], st.q_turn_cost)) for k, v in gots.items()}
    trees_equal = all(np.array_equal(v[3], gots["_dirty_units"][3]) for v in gots.values())
    emit(rows, what=what, metric=mname, cpu_seconds=cpu_s, exact=all(exact.values()), exact_by_way=exact,
         gpu_trees_equal=trees_equal, **out)


def plan_overrides(spec):
    """``BODY;CRP_NAME=INT;...`` -> (BODY, {CRP_NAME: int}): a plan with gpuroute.config tunables set while it runs
    (e.g. ``off;CRP_GPU_PUSH_BIG_SMEM_BYTES=98304``). Raises SystemExit naming a bad item."""
    body, *sets = spec.split(";")
    over = {}
    for item in sets:
        key, _, val = item.partition("=")
        if not key.startswith("CRP_") or not hasattr(config, key) or not val.lstrip("-").isdigit():
            raise SystemExit(f"plan {spec!r}: {item!r} must be CRP_NAME=INT with CRP_NAME a gpuroute.config tunable")
        over[key] = int(val)
    return body, over


def parse_plan(spec, part):
    """(mezzanine dict or False, config overrides dict, label) of a plan spec (see the module docstring)."""
    body, over = plan_overrides(spec)
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
            setattr(config, k, v if defaults[k] is None or isinstance(defaults[k], str) else type(defaults[k])(v))
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


def push_way(spec):
    """Config overrides of a ``--push-ways`` spec: ``pull`` (the pull kernel on every level), ``push`` (the
    defaults), or ``CRP_NAME=INT,CRP_NAME=INT``."""
    if spec == "pull":
        return {"CRP_GPU_PUSH_MAX_CELLS": 0}
    if spec == "push":
        return {}
    over = {}
    for item in spec.split(","):
        key, _, val = item.partition("=")
        if not key.startswith("CRP_") or not hasattr(config, key) or not val.lstrip("-").isdigit():
            raise SystemExit(f"--push-ways {spec!r}: {item!r} must be CRP_NAME=INT with CRP_NAME a gpuroute.config tunable")
        over[key] = int(val)
    return over


def compare_push(rows, args, g, part, metrics):
    """The push kernel against the pull kernel on NY (see the module docstring, ``--push``)."""
    defaults = {k: getattr(config, k) for k in dir(config) if k.startswith("CRP_")}

    def set_way(spec):
        for k, v in defaults.items():
            setattr(config, k, v)
        for k, v in push_way(spec).items():  # (a None default -- CRP_GPU_PUSH_MAX_CELLS -- takes the int)
            setattr(config, k, v if defaults[k] is None or isinstance(defaults[k], str) else type(defaults[k])(v))

    rng = np.random.default_rng(0)
    ids = rng.integers(0, g.n_arcs, 1000)
    centre = int(rng.integers(0, g.n_nodes))
    tails = np.repeat(np.arange(g.n_nodes), np.diff(g.first_out))
    near = np.flatnonzero(gpuroute.haversine_m(g.coords[tails, 0], g.coords[tails, 1], g.coords[centre, 0],
                                               g.coords[centre, 1]) <= 5000.0)
    cids = rng.choice(near, min(1000, near.size), replace=False)
    plans = [("off", False)]
    for spec in args.push_plans:
        mz, _, _ = parse_plan(spec, part)
        plans.append((spec, mz))
    base = Overlay.build(g, part, mezzanine=False)
    refs = {}
    for mname, metric in metrics.items():
        base.customize(metric, device="cpu")
        refs[mname] = base._state.clique.copy()
    for label, mz in plans:
        set_way("push")
        if mz is False:
            ov = Overlay.build(g, part, mezzanine=False)
        else:
            ext, cached, _ = mezzanine_partition(g, part, mz)
            ov = Overlay.build(g, part, mezzanine=ext)
        pull_trees = {}
        for way in (args.push_ways if mz is False else args.push_plan_ways):
            set_way(way)
            ov._gpu_cust = None
            t0 = time.perf_counter()
            try:
                ov.customize(metrics["distance"], device="gpu")
            except Exception as e:  # noqa: BLE001 (a way that cannot run must not lose the others)
                emit(rows, what="push customize", plan=label, way=way, error=f"{type(e).__name__}: {e}"[:400])
                continue
            first = time.perf_counter() - t0
            gc = ov._gpu_cust
            lv_desc = [None if lv is None else {"push": lv["push"], "threads": lv["push_threads"], "units": lv["n_units"],
                                                "edges": lv["n_edges"]}
                       for lv in gc.levels]
            for mname, metric in metrics.items():
                ov.customize(metric, device="gpu")
                wall, lv, plv, rounds = [], [], [], None
                for _ in range(args.reps):
                    t0 = time.perf_counter()
                    info = ov.customize(metric, device="gpu")
                    wall.append(time.perf_counter() - t0)
                    lv.append(info["level_seconds"])
                    plv.append([d["seconds"] for d in info["plan"]])
                    rounds = [d["rounds"] for d in info["plan"]]
                tree = np.asarray(ov._state.tree).copy()
                if way == "pull":
                    pull_trees[mname] = tree
                emit(rows, what="push customize", plan=label, way=way, overrides=push_way(way), metric=mname,
                     seconds=med(wall), device_seconds=med(np.sum(plv, axis=1)),
                     device_level_seconds=np.median(np.array(lv), axis=0).tolist(),
                     device_plan_level_seconds=np.median(np.array(plv), axis=0).tolist(), rounds=rounds,
                     levels=lv_desc, first_seconds=first, setup_seconds=gc.setup_seconds,
                     exact=bool(np.array_equal(ov._state.clique, refs[mname])),
                     trees_equal_pull=(bool(np.array_equal(tree, pull_trees[mname])) if mname in pull_trees else None))
        # traffic, both ways, steady state; exact against the CPU update of the overlay without mezzanine levels
        metric = metrics["distance"]
        kinds = []
        for what, arcs in (("update 1000 random arcs", ids), (f"update {cids.size} arcs in a 5 km disc", cids)):
            costs = np.maximum(1, np.asarray(base.arc_cost)[arcs] * rng.integers(1, 4, arcs.size))
            base.customize(metric, device="cpu")
            before = np.asarray(base.arc_cost)[arcs].copy()
            base.update(arcs, costs, device="cpu")
            kinds.append((what, arcs, costs, before, base._state.clique.copy()))
        for way in (args.push_update_ways if mz is False else args.push_plan_ways):
            set_way(way)
            ov._gpu_cust = None
            for what, arcs, costs, before, ref_c in kinds:
                try:
                    ov.customize(metric, device="gpu")
                    u = ov.update(arcs, costs, device="gpu")
                    ov._state.tree  # noqa: B018
                    parts, levels, wall = [], [], []
                    for _ in range(max(3, args.reps)):
                        for c in (before, costs):
                            t0 = time.perf_counter()
                            u = ov.update(arcs, c, device="gpu")
                            wall.append(time.perf_counter() - t0)
                            ov._state.tree  # noqa: B018
                            parts.append(u.get("device_seconds") or {})
                            levels.append(u["level_seconds"])
                except Exception as e:  # noqa: BLE001
                    emit(rows, what=what, plan=label, way=way, error=f"{type(e).__name__}: {e}"[:400])
                    continue
                emit(rows, what=what, plan=label, way=way, overrides=push_way(way), metric="distance",
                     cells=u["cells"], gpu_seconds=med(wall),
                     device_parts_median={k: med([x[k] for x in parts if k in x]) for k in (parts[-1] if parts else {})},
                     device_level_seconds=np.median(np.array(levels), axis=0).tolist(),
                     exact=bool(np.array_equal(ov._state.clique, ref_c)))
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
