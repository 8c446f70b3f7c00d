"""Benchmark suite: map matching, ``/match`` (issue 22, deliverable 3: :mod:`gpuroute.engine.services.match`).

Targets (issue 22): a 100-point trace matched in <= 5 ms on the H100 (osrm-routed on the same machine in the same
run as the peer); 1,000 traces batched (:meth:`gpuroute.engine.Engine.match_many`) >= 10x faster than one
:meth:`~gpuroute.engine.Engine.match` after the other.

The dataset is what users run: ``gpuroute build monaco.osm.pbf --profile <OSRM's car.lua> -o DIR`` (built into
``out/match/`` once; ``--pbf`` another extract, e.g. ``../shared/data/osm/andorra.osm.pbf``). Traces come from
real routes with Gaussian GPS noise (tests/match_traces.py, seeded): the 100-point trace at ``--dt`` s sampling
and ``--sigma`` m noise; the batch of ``--traces`` traces of 20 to ``--batch-points`` points.

Measured (wall-clock seconds, ``time.perf_counter``, in this process, after one warm-up of each path):

Per transition mode (``config.SERVE_MATCH_TRANSITIONS``: ``search``, and ``table`` -- the engine's many-to-many,
the GPU twin -- where a GPU is usable; ``--transitions`` picks):

* ``single_100``: median / p90 of ``--repeat`` matches of the 100-point trace (``Engine.match``, device
  ``--device``), and the transition searches it ran;
* ``one_at_a_time``: the batch matched one trace after the other; ``batched``: the same traces in one
  ``match_many``; ``speedup`` = one_at_a_time / batched; ``same_answers``: the batched answers equal the
  single ones (matched lengths and tracepoints);
* ``stages``: one more run of each (``batched``, ``one_at_a_time``) with each stage of :data:`STAGES` timed
  (:func:`stage_breakdown`), its CPU seconds over wall seconds, numba's threads and threading layer;
* ``gpu`` (with ``--gpu-transitions on``: the key ``<mode>+gpu``; ``both`` times the CPU's and the GPU's): the
  batched run's transition searches on the GPU (``config.SERVE_MATCH_TRANSITIONS_DEVICE = "gpu"``,
  :mod:`gpuroute.engine.match_gpu`), its kernel's own time (CUDA events around each launch) and work (searches,
  launches, heap pops, turns relaxed; an estimate of the memory traffic: 32-byte sectors touched, 4 a pop and 5 a
  turn, against the H100's ~2.9 TB/s), and ``same_as_cpu``: its answers byte for byte (JSON) those of the CPU's
  batched run;
* ``osrm`` (where the osrm-bindings wheel's binaries are, ``make osrm-bin``): osrm-routed ``--algorithm mld``
  on the same extract with car.lua, the 100-point trace over loopback HTTP (median of ``--repeat``) and the
  batch one request after the other; both engines' matched-length error against the truth.

Prints one JSON object (also written to ``--json``), naming device, commit and date.

Usage (from the repo root; on the H100 in one call):
    .venv/bin/python benchmarks/match.py [--traces 1000] [--repeat 50] [--device auto] [--json OUT.json]
    [--gpu-transitions off|on|both]
    [--src DIR]  (gpuroute imported from DIR: another tree, e.g. the "before" of a change, timed the same way)
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# --src DIR: gpuroute imported from DIR (e.g. another commit's ``git archive``, the "before" of a change) instead
SRC = next((sys.argv[i + 1] for i, x in enumerate(sys.argv[:-1]) if x == "--src"), str(ROOT / "src"))
sys.path.insert(0, SRC)
sys.path.insert(0, str(ROOT / "tests"))

OUT = ROOT / "out" / "match"
MONACO = ROOT / "src" / "gpuroute" / "datasets" / "data" / "monaco.osm.pbf"


def osrm_bin():
    """The osrm-* binaries' directory, or None."""
    found = sorted((ROOT / ".venv" / "osrm").glob("**/bin/osrm-routed"))
    if found:
        return found[0].parent
    try:
        r = subprocess.run(["bash", str(ROOT / ".ci" / "fetch_osrm.sh")], capture_output=True, text=True, cwd=ROOT,
                           timeout=600)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (ROOT / r.stdout.strip().splitlines()[-1]).resolve() if r.returncode == 0 else None


def car_lua(bindir):
    if bindir is not None and (bindir / ".." / "share" / "profiles" / "car.lua").is_file():
        return (bindir / ".." / "share" / "profiles" / "car.lua").resolve()
    return "car"  # gpuroute's built-in name for OSRM's car.lua


def dataset(pbf, lua):
    from gpuroute.engine.dataset import drop_traffic, is_dataset
    from gpuroute.pipeline import build_dataset

    d = OUT / (Path(pbf).name.split(".")[0] + "-car")
    if not is_dataset(d):
        OUT.mkdir(parents=True, exist_ok=True)
        build_dataset(pbf, d, profile=lua, cell_sizes=(64, 1024))
    drop_traffic(d)
    return d


def commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                              timeout=10).stdout.strip() or None
    except OSError:
        return None


def device_name():
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception:  # noqa: BLE001 - no GPU
        return f"cpu ({platform.processor() or platform.machine()})"


def _fmt(coords):
    return ";".join(f"{x:.6f},{y:.6f}" for x, y in coords)


#: The batched run's stages (:func:`stage_breakdown`): name -> (module attribute path, what it times). Nested
#: ones say so; the pipeline (:data:`gpuroute.engine.services.match.PIPELINE_TRACES`) runs ``answers`` of one
#: batch beside the others of the next, so the stages' sum exceeds the wall time where they overlap.
STAGES = {
    "parse": ("engine.MatchParams.from_kwargs", "each trace's checks (Python; a pipeline's batch by batch beside the first solves)"),
    "traces": ("match.Traces", "the traces as flat arrays (tidy, dense-trace groups)"),
    "candidates": ("match._candidates", "balls, projections, candidates' rows (compiled, threads) and NumPy"),
    "step_inputs": ("match._step_inputs", "the bounds of the lazy pass's tables"),
    "viterbi_searches": ("match._viterbi", "the Viterbi pass with its bounded transition searches (parallel)"),
    "tables": ("match._Tables._search", "the tables searched up front (one trace; the GPU's: every batch's)"),
    "legs": ("match._leg_plans", "the matched legs' searches rerun with parents (threads)"),
    "leg_sums": ("match._Legs.sums", "the legs' weights, durations, lengths and points (threads)"),
    "answers": ("match._answers", "the OSRM answers (Python; waypoints and route objects inside)"),
    "answers.waypoints": ("match.waypoints", "inside answers: every matched point's waypoint"),
    "answers.route_objects": ("match._Legs.route_object", "inside answers: the matchings' route objects"),
}


def stage_breakdown(run):
    """One more call of ``run()`` (the batched run, or one trace after the other) with every stage of
    :data:`STAGES` timed (wall seconds summed over its calls, on whichever thread ran it; None: not in this tree),
    the run's wall and process CPU seconds (``cpu_per_wall``: the cores it kept busy), and the threads: a dict."""
    import os
    import threading

    import numba

    from gpuroute.engine import engine as engine_module
    from gpuroute.engine.services import match as match_service

    roots = {"engine": engine_module, "match": match_service}
    got = {k: 0.0 for k in STAGES}
    calls = dict.fromkeys(STAGES, 0)
    lock = threading.Lock()
    undo = []
    for name, (path, _) in STAGES.items():
        head, *mid, attr = path.split(".")
        owner = roots[head]
        for m in mid:
            owner = getattr(owner, m, None)
        if owner is None or not hasattr(owner, attr):  # not in this tree (--src)
            got[name] = None
            continue
        f = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
        call = getattr(owner, attr)  # a classmethod's is bound

        def timed(*args, _f=call, _name=name, **kw):
            t = time.perf_counter()
            try:
                return _f(*args, **kw)
            finally:
                dt = time.perf_counter() - t
                with lock:
                    got[_name] += dt
                    calls[_name] += 1

        setattr(owner, attr, staticmethod(timed) if isinstance(f, classmethod) else timed)
        undo.append((owner, attr, f))
    try:
        t, c = time.perf_counter(), time.process_time()
        run()
        wall, cpu = time.perf_counter() - t, time.process_time() - c
    finally:
        for owner, attr, f in reversed(undo):
            setattr(owner, attr, f)
    return {"wall_s": wall, "cpu_s": cpu, "cpu_per_wall": cpu / wall, "numba_threads": numba.get_num_threads(),
            "threading_layer": numba.threading_layer(), "cores": os.cpu_count(),
            "pipeline_traces": int(match_service.PIPELINE_TRACES),
            "pipeline_depth": int(getattr(match_service, "PIPELINE_DEPTH", 1)),
            "stages_s": got, "calls": calls, "stages": {k: v[1] for k, v in STAGES.items()}}


#: The H100's memory bandwidth (bytes/s) the GPU transition kernel's traffic estimate is set against.
H100_BYTES_S = 2.9e12
#: The estimate's sectors (32 bytes) touched per heap pop (heap root, record, key, turn range) and per turn relaxed
#: (turn and its cost, the arc's cost and length, the hash probe's key, target row and record).
SECTORS_PER_POP, SECTORS_PER_TURN = 4, 5


def run_mode(eng, a, c100, kw100, batch, items, matched_length, gpu=False):
    """The timings of one ``config.SERVE_MATCH_TRANSITIONS`` mode (see the module notes); ``gpu``: the batched
    run's searches on the GPU twin (the key ``_answers`` holds the batched answers for the comparison)."""
    eng.match(c100, device=a.device, **kw100)  # warm-up (numba kernels loaded)
    times = []
    for _ in range(a.repeat):
        t = time.perf_counter()
        res100 = eng.match(c100, device=a.device, **kw100)
        times.append(time.perf_counter() - t)
    single = {"points": 100, "sigma_m": a.sigma, "dt_s": a.dt, "median_s": statistics.median(times),
              "p90_s": float(np.quantile(times, 0.9)), "matchings": len(res100["matchings"]),
              "matched_points": sum(tp is not None for tp in res100["tracepoints"])}
    from gpuroute import config
    from gpuroute.engine.services import match as match_service

    keep = (config.SERVE_MATCH_PARALLEL_JOBS, match_service.VITERBI_CHUNK, match_service.LEG_CHUNK)
    try:  # warm-up of the parallel kernels and threaded paths too (numba loads or compiles them on first use)
        config.SERVE_MATCH_PARALLEL_JOBS = match_service.VITERBI_CHUNK = match_service.LEG_CHUNK = 1
        eng.match_many(items[:8], device=a.device, overview="false")
        import numba

        threads = numba.get_num_threads()
        numba.set_num_threads(1)  # the Viterbi pass that searches its own tables, on one thread ...
        try:
            eng.match_many(items[:8], device=a.device, overview="false")
        finally:
            numba.set_num_threads(threads)
        # ... and its parallel kernel: taken for match_service.LAZY_TRACES_PER_THREAD traces a thread and more
        # (its first call compiles it: ~10 s on the 16-core host, cached on disk afterwards)
        eng.match_many(items[: match_service.LAZY_TRACES_PER_THREAD * threads + 1], device=a.device, overview="false")
    finally:
        config.SERVE_MATCH_PARALLEL_JOBS, match_service.VITERBI_CHUNK, match_service.LEG_CHUNK = keep

    def one_by_one():
        one = []
        for c, ts, _ in batch:
            try:
                one.append(eng.match(c, timestamps=ts, radiuses=[a.sigma] * len(c), overview="false",
                                     device=a.device))
            except Exception as e:  # noqa: BLE001 - NoMatch and the like, as match_many returns them
                one.append({"code": getattr(e, "code", type(e).__name__), "message": str(e)})
        return one

    def batched():
        return eng.match_many(items, device=a.device, overview="false")

    totals = None
    if gpu:
        from gpuroute.engine import match_gpu

        config.SERVE_MATCH_TRANSITIONS_DEVICE = "gpu"
        batched()  # warm-up: the kernel compiled, the network uploaded
        match_gpu.totals(reset=True)
    t = time.perf_counter()
    one = one_by_one()
    t_one = time.perf_counter() - t
    t = time.perf_counter()
    many = batched()
    t_many = time.perf_counter() - t
    if gpu:
        totals = match_gpu.totals(reset=True)
    same = all(x.get("code") == y.get("code") and abs(matched_length(x) - matched_length(y)) < 0.05
               and [tp is None for tp in x.get("tracepoints", [])] == [tp is None for tp in y.get("tracepoints", [])]
               for x, y in zip(one, many, strict=True))
    err = [abs(matched_length(r) / L - 1.0) for r, (_, _, L) in zip(many, batch, strict=True)]
    stages = {"batched": stage_breakdown(batched), "one_at_a_time": stage_breakdown(one_by_one)}
    res = {"single_100": single, "stages": stages,
           "batch": {"traces": len(batch), "points": int(sum(len(c) for c, _, _ in batch)),
                     "one_at_a_time_s": t_one, "batched_s": t_many, "speedup": t_one / t_many,
                     "same_answers": bool(same), "within_2pct": float(np.mean(np.asarray(err) <= 0.02)),
                     "mean_error": float(np.mean(err))}, "_answers": json.dumps(many, sort_keys=True)}
    if gpu:
        config.SERVE_MATCH_TRANSITIONS_DEVICE = "cpu"
        sectors = SECTORS_PER_POP * totals.get("pops", 0) + SECTORS_PER_TURN * totals.get("turns", 0)
        k = totals.get("kernel_s", 0.0)
        res["gpu"] = {"totals": totals, "kernel_s": k,
                      "kernel_share_of_batched": k / t_many,
                      "method": {"bytes_est": 32 * sectors, "bytes_per_s_est": 32 * sectors / k if k else None,
                                 "of_h100_bandwidth": (32 * sectors / k) / H100_BYTES_S if k else None,
                                 "launches": totals.get("launches"), "searches": totals.get("jobs"),
                                 "calls": totals.get("calls"),
                                 "note": "sectors touched estimated: 4 a heap pop, 5 a turn relaxed (32 B each); "
                                         "one thread a search: latency-bound, not bandwidth-bound"}}
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pbf", default=str(MONACO), help="the OSM extract (default: the shipped Monaco)")
    ap.add_argument("--traces", type=int, default=1000, help="traces of the batch (default 1000)")
    ap.add_argument("--batch-points", type=int, default=40, help="most points of a batch trace (default 40)")
    ap.add_argument("--repeat", type=int, default=50, help="runs of the 100-point trace (default 50)")
    ap.add_argument("--sigma", type=float, default=10.0, help="GPS noise, m (default 10)")
    ap.add_argument("--dt", type=float, default=5.0, help="sampling step, s (default 5)")
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "gpu"))
    ap.add_argument("--transitions", default=None,
                    help="comma-separated config.SERVE_MATCH_TRANSITIONS modes to time (default: search, and table "
                         "too where a GPU is usable)")
    ap.add_argument("--no-osrm", action="store_true", help="skip the osrm-routed peer")
    ap.add_argument("--gpu-transitions", default="off", choices=("off", "on", "both"),
                    help="the batched run's transition searches on the GPU twin (on), the CPU's (off), or both timed "
                         "and their answers compared (key <mode>+gpu; default off)")
    ap.add_argument("--json", default=None, help="also write the result here")
    ap.add_argument("--src", default=SRC, help="import gpuroute from this directory (default: the repo's src)")
    a = ap.parse_args(argv)

    from match_traces import make_trace, matched_length

    from gpuroute.engine import Engine

    bindir = None if a.no_osrm else osrm_bin()
    lua = car_lua(bindir)
    d = dataset(a.pbf, lua)
    eng = Engine.open(d)
    eng.limits["max_locations_map_matching"] = 100000
    rng = np.random.default_rng(22)
    c100, ts100, truth100 = make_trace(eng, rng, a.sigma, a.dt, min_m=500.0, max_m=1e9, max_points=100)
    while len(c100) != 100:  # exactly 100 points: cut a longer one
        c100, ts100, truth100 = make_trace(eng, rng, a.sigma, a.dt, min_m=100 * a.dt * 12, max_m=1e9, max_points=400)
        if len(c100) >= 100:
            c100, ts100, _truth100 = c100[:100], ts100[:100], None
    c100 = [(round(x, 6), round(y, 6)) for x, y in c100]
    kw100 = {"timestamps": ts100, "radiuses": [a.sigma] * 100, "overview": "false"}
    batch = []
    for _ in range(a.traces):
        c, ts, L = make_trace(eng, rng, a.sigma, a.dt, min_m=200.0, max_m=1e9, max_points=a.batch_points)
        batch.append(([(round(x, 6), round(y, 6)) for x, y in c], ts, L))
    items = [{"coords": c, "timestamps": ts, "radiuses": [a.sigma] * len(c)} for c, ts, _ in batch]

    from gpuroute import config
    from gpuroute.backend import resolve_device

    modes = a.transitions.split(",") if a.transitions else (
        ["search", "table"] if resolve_device(a.device) == "gpu" else ["search"])
    out = {"suite": "match", "device": device_name(), "device_arg": a.device, "commit": commit(), "src": a.src,
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "dataset": str(d), "graph": {"nodes": int(eng.graph.n_nodes), "arcs": int(eng.graph.n_arcs)},
           "targets": {"single_100_s": 0.005, "batch_speedup": 10.0}, "transitions": {}}
    keep_dev = getattr(config, "SERVE_MATCH_TRANSITIONS_DEVICE", None)
    for mode in modes:
        config.SERVE_MATCH_TRANSITIONS = mode
        cpu_answers = None
        if a.gpu_transitions in ("off", "both"):
            if keep_dev is not None:
                config.SERVE_MATCH_TRANSITIONS_DEVICE = "cpu"
            r = run_mode(eng, a, c100, kw100, batch, items, matched_length)
            cpu_answers = r.pop("_answers")
            out["transitions"][mode] = r
        if a.gpu_transitions in ("on", "both"):
            r = run_mode(eng, a, c100, kw100, batch, items, matched_length, gpu=True)
            got = r.pop("_answers")
            if cpu_answers is not None:
                r["gpu"]["same_as_cpu"] = got == cpu_answers
                r["gpu"]["batched_speedup_over_cpu"] = out["transitions"][mode]["batch"]["batched_s"] / \
                    r["batch"]["batched_s"]
            out["transitions"][mode + "+gpu"] = r
    if keep_dev is not None:
        config.SERVE_MATCH_TRANSITIONS_DEVICE = keep_dev

    if bindir is not None and not a.no_osrm:
        from osrm_peer import OSRMRouted, build_mld

        work = OUT / ("osrm-" + Path(a.pbf).name.split(".")[0])
        base = work / (Path(a.pbf).name.split(".")[0] + ".osrm")
        if not (work / "done").exists():
            build_mld(bindir, a.pbf, lua, work, threads=4)
            (work / "done").write_text("ok\n")
        srv = OSRMRouted(bindir, base, algorithm="mld", extra=["--max-matching-size", "100000"])
        try:
            url100 = (f"/match/v1/driving/{_fmt(c100)}?timestamps={';'.join(map(str, ts100))}&radiuses="
                      + ";".join(f"{a.sigma:g}" for _ in c100) + "&overview=false")
            srv.get(url100)
            ot = []
            for _ in range(a.repeat):
                t = time.perf_counter()
                srv.get(url100)
                ot.append(time.perf_counter() - t)
            t = time.perf_counter()
            ores = [srv.get(f"/match/v1/driving/{_fmt(c)}?timestamps={';'.join(map(str, ts))}&radiuses="
                            + ";".join(f"{a.sigma:g}" for _ in c) + "&overview=false") for c, ts, _ in batch]
            t_o = time.perf_counter() - t
            oerr = [abs(matched_length(r) / L - 1.0) for r, (_, _, L) in zip(ores, batch, strict=True)]
            out["osrm"] = {"single_100_median_s": statistics.median(ot), "batch_one_at_a_time_s": t_o,
                           "within_2pct": float(np.mean(np.asarray(oerr) <= 0.02)), "mean_error": float(np.mean(oerr)),
                           "note": "osrm-routed -t 1 over loopback HTTP (JSON encoding and parsing included)"}
        finally:
            srv.close()
    text = json.dumps(out, indent=1)
    print(text)
    if a.json:
        Path(a.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
