"""Benchmark suite: Customizable Route Planning (gpuroute.Overlay, CPU) side by side with its peers in one
run on one machine: RoutingKit's CCH (``pyroutingkit``) and OSRM's MLD (the ``osrm-*`` binaries of the
``osrm-bindings`` wheel), with an exactness check of ours against an independent oracle.

For each graph (NY, Monaco, Andorra, Helsinki):

* ours: partition build (KaHIP, cached under ``out/crp_bench/``: KaHIP strong takes ~40 s on NY), overlay
  topology build, full customization per metric (``distance``, ``time``; ``time-uturn`` on the OSM graphs),
  re-customization after 1,000 random changed arcs (``Overlay.update``), p2p distance and route-with-path
  latency, batched distances (numba, all threads and 1 thread). Exactness on a sample of pairs: scipy's
  Dijkstra on the node graph where the metric has no turn costs and the graph no turn restrictions, else a
  Dijkstra on the turn-expanded graph (states = arcs, edges = turns; turn costs decoded here from the turn
  kinds, independently of the overlay). Route paths are re-priced turn by turn.
* RoutingKit CCH: topology (nested dissection), customization (sequential, parallel on 1 thread and on all
  cores), partial update of the same 1,000 arcs, p2p with path; node-based (no turns): checked against the
  node Dijkstra.
* OSRM MLD: osrm-extract (car.lua), osrm-partition, osrm-customize on 1 thread and all cores (wall time and
  what OSRM prints), osrm-customize with 1,000 changed segment speeds, and p2p through osrm-routed
  (HTTP on localhost: the round trip is included). OSRM's car profile prices another cost model on its
  own (compressed, edge-based) graph: its times are not comparable cost-for-cost, only in magnitude.

Peers that are missing (no pyroutingkit, no osrm binaries) are skipped with a note in the JSON.

Usage (from the repo root):
    .venv/bin/python benchmarks/crp.py [--quick] [--graphs NY Monaco Andorra Helsinki]
        [--out benchmarks/results]
    PYTHONPATH=src python3 benchmarks/crp.py --quick          # another machine
OSRM binaries: ``--osrm-bin DIR``, else $OSRM_BIN, else the unpacked wheel under local_data/osrm/ (unpacked
here from local_data/osrm/osrm_bindings-*.whl when needed), else osrm-customize on the PATH.
Writes OUT/crp_cpu_<date>.json (``_quick`` for --quick) and prints Markdown tables.
"""
from __future__ import annotations

import argparse
import datetime as dt
import glob
import http.client
import json
import os
import platform
import re
import shutil
import socket
import stat
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import gpuroute  # noqa: E402
from gpuroute.crp import RESTRICTED, Metric  # noqa: E402
from gpuroute.partition import Partition  # noqa: E402

CACHE = ROOT / "out" / "crp_bench"
OSM_DIRS = [ROOT / "shared" / "data" / "osm", ROOT / ".." / "shared" / "data" / "osm",
            Path("/work/shared/data/osm")]
OSRM_WHEELS = ROOT / "local_data" / "osrm"
INF = gpuroute.INF


def commit():
    if os.environ.get("GPUROUTE_COMMIT"):
        return os.environ["GPUROUTE_COMMIT"]
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True).strip()
    except Exception:
        return "unknown"


def osm_file(name):
    for d in OSM_DIRS:
        if (d / name).exists():
            return d / name
    return None


def load(name):
    """(graph, metrics {name: spec}, pbf path or None)."""
    if name == "NY":
        g = gpuroute.datasets.load("ny")
        gt = gpuroute.datasets.load("ny-time")  # same arcs in the same order: a second metric of one topology
        assert np.array_equal(g.tail, gt.tail) and np.array_equal(g.head, gt.head)
        return g, {"distance": "distance",
                   "time": Metric(gt.weight(), name="time", units=gt.units["travel_time"].symbol)}, None
    if name == "Monaco":
        g = gpuroute.datasets.load("monaco")
        pbf = Path(g.meta["source"])
    else:
        pbf = osm_file({"Andorra": "andorra.osm.pbf", "Helsinki": "Helsinki.osm.pbf"}[name])
        if pbf is None:
            raise FileNotFoundError(f"{name}: no PBF in {[str(d) for d in OSM_DIRS]}")
        g = gpuroute.load_osm(pbf, progress=False, name=name)
    return g, {"distance": "distance", "time": "time", "time-uturn": "time-uturn"}, pbf


def med(fn, reps):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


# ------------------------------------------------------------------------------------------------ oracles
def node_oracle(g, arc_cost, S, T):
    """scipy Dijkstra on the node graph (parallel arcs: the cheapest), float64 (k,), inf if unreachable."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import dijkstra

    n = g.n_nodes
    order = np.lexsort((arc_cost, g.head, g.tail))
    tl, hd, w = g.tail[order], g.head[order], arc_cost[order]
    keep = np.r_[True, (tl[1:] != tl[:-1]) | (hd[1:] != hd[:-1])]
    A = csr_matrix((w[keep].astype(np.float64), (tl[keep], hd[keep])), shape=(n, n))
    us, inv = np.unique(S, return_inverse=True)
    out = np.empty(len(S))
    for lo in range(0, us.size, 16):
        D = dijkstra(A, indices=us[lo:lo + 16])
        sel = (inv >= lo) & (inv < lo + 16)
        out[sel] = D[inv[sel] - lo, T[sel]]
    return out


def decode_here(turns, arc_cost, penalty):
    """Turn costs (penalty of the kind + cost of the out-arc; -1 restricted), computed here."""
    pen = np.zeros(5, np.int64)
    pen[:4] = penalty
    tc = pen[turns.kind] + arc_cost[turns.out_arc]
    tc[turns.kind == RESTRICTED] = -1
    return tc


def turn_oracle(g, turns, arc_cost, tcost, S, T):
    """Dijkstra (scipy) on the turn-expanded graph: states = arcs, edges = allowed turns."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import dijkstra

    m = g.n_arcs
    ok = tcost >= 0
    A = csr_matrix((tcost[ok].astype(np.float64), (turns.in_arc()[ok], turns.out_arc[ok])), shape=(m, m))
    out = np.empty(len(S))
    for i, (s, t) in enumerate(zip(S, T, strict=True)):
        s, t = int(s), int(t)
        outs = np.arange(g.first_out[s], g.first_out[s + 1])
        ins = g.rev_arc[g.rev_first_out[t]:g.rev_first_out[t + 1]]
        if s == t:
            out[i] = 0.0
        elif outs.size == 0 or ins.size == 0:
            out[i] = np.inf
        else:
            D = dijkstra(A, indices=outs)
            out[i] = float((D[:, ins] + arc_cost[outs][:, None]).min())
    return out


def path_cost(g, turns, arc_cost, tcost, s, t, arcs):
    """The cost of a path given by its arcs (first arc + every turn); None if it is not a valid s-t path."""
    arcs = np.asarray(arcs, np.int64)
    if arcs.size == 0 or g.tail[arcs[0]] != s or g.head[arcs[-1]] != t:
        return None
    if np.any(g.head[arcs[:-1]] != g.tail[arcs[1:]]):
        return None
    tid = turns.turn_index(arcs[:-1], arcs[1:])
    if np.any(tid < 0) or np.any(tcost[tid] < 0):
        return None
    return int(arc_cost[arcs[0]] + tcost[tid].sum())


def to_float(d):
    d = np.asarray(d, dtype=np.float64)
    d[d >= float(INF)] = np.inf
    return d


# ------------------------------------------------------------------------------------------------ OSRM
def osrm_bin(arg):
    """(directory of the osrm-* binaries, profiles directory or None, note)."""
    cands = [arg, os.environ.get("OSRM_BIN")]
    cands += sorted(glob.glob(str(OSRM_WHEELS / "wheel" / "osrm" / "bin")))
    wheels = sorted(glob.glob(str(OSRM_WHEELS / "osrm_bindings-*.whl")))
    if wheels and not (OSRM_WHEELS / "wheel" / "osrm" / "bin").exists():
        with zipfile.ZipFile(wheels[-1]) as z:
            z.extractall(OSRM_WHEELS / "wheel")
        cands.append(str(OSRM_WHEELS / "wheel" / "osrm" / "bin"))
    w = shutil.which("osrm-customize")
    if w:
        cands.append(os.path.dirname(w))
    for c in cands:
        if c and os.path.exists(os.path.join(c, "osrm-customize")):
            for f in glob.glob(os.path.join(c, "osrm-*")):
                os.chmod(f, os.stat(f).st_mode | stat.S_IXUSR)
            prof = None
            for p in (Path(c).parent / "share" / "profiles",
                      Path(c).parent.parent / "share" / "osrm" / "profiles",
                      Path(c).parent / "profiles"):
                if (p / "car.lua").exists():
                    prof = p
                    break
            try:
                r = subprocess.run([os.path.join(c, "osrm-customize"), "--version"], capture_output=True,
                                   text=True, timeout=30)
            except Exception as e:
                return None, None, f"osrm-customize in {c} does not run: {type(e).__name__}: {e}"
            if r.returncode != 0:
                return None, None, (f"osrm-customize in {c} does not run (exit {r.returncode}): "
                                    f"{(r.stderr or r.stdout).strip()[-400:]}")
            if prof is None:
                return None, None, f"osrm binaries in {c} run ({r.stdout.strip()}), no car.lua next to them"
            return c, prof, f"osrm {r.stdout.strip()} from {c}"
    return None, None, ("no osrm binaries: pip download --no-deps --only-binary=:all: --python-version 3.12 "
                        "--platform manylinux_2_28_x86_64 osrm-bindings -d local_data/osrm")


def osrm_run(cmd, timeout=600):
    """(wall seconds, {'what took': seconds} parsed from OSRM's log, stdout+stderr)."""
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t
    txt = r.stdout + r.stderr
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {r.returncode}: {txt[-600:]}")
    took = {}
    for k, v in re.findall(r"\] \[\w+\] (.+?) took ([0-9.eE+-]+) ?s", txt):
        took[k.strip()] = float(v)
    return wall, took, txt


def osm_segments(pbf, k, rng):
    """k random consecutive (OSM node id, OSM node id) pairs of highway ways, for a speed file."""
    import osmium

    pairs = []
    for w in osmium.FileProcessor(str(pbf), osmium.osm.WAY):
        if "highway" in w.tags:
            refs = [nd.ref for nd in w.nodes]
            pairs.extend(zip(refs[:-1], refs[1:], strict=True))
    idx = rng.choice(len(pairs), min(k, len(pairs)), replace=False)
    return [pairs[i] for i in idx]


def ny_osm(g, time_cost, path):
    """NY written as an OSM file for OSRM: one node per DIMACS node (its coordinates), one oneway way per arc
    (highway=primary, maxspeed from the arc's distance / travel time, 5..130 km/h). Cached at ``path``."""
    import osmium
    from osmium.osm.mutable import Node, Way

    if path.exists():
        return path
    tmp = path.with_name("tmp_" + path.name)
    if tmp.exists():
        tmp.unlink()
    du, tu = g.units[g.default_weight].scale, 0.0036  # m per distance step, s per DIMACS-t step
    kmh = np.clip(np.rint(g.weight() * du / np.maximum(time_cost * tu, 1e-9) * 3.6), 5, 130).astype(int)
    w = osmium.SimpleWriter(str(tmp))
    try:
        for i, (lon, lat) in enumerate(g.coords.tolist()):
            w.add_node(Node(id=i + 1, location=(lon, lat), version=1))
        for a, (u, v, s) in enumerate(zip(g.tail.tolist(), g.head.tolist(), kmh.tolist(), strict=True)):
            w.add_way(Way(id=a + 1, nodes=[u + 1, v + 1], version=1,
                          tags={"highway": "primary", "oneway": "yes", "maxspeed": str(s)}))
    finally:
        w.close()
    tmp.rename(path)
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def osrm_routed_p2p(bindir, base, coords, pairs, with_path):
    """Median us of /route requests to osrm-routed (MLD, 1 thread) over keep-alive HTTP on localhost."""
    port = free_port()
    proc = subprocess.Popen([os.path.join(bindir, "osrm-routed"), "--algorithm", "mld", "-i", "127.0.0.1",
                             "-p", str(port), "-t", "1", str(base)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        conn = None
        for _ in range(100):
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                conn.request("GET", "/nearest/v1/driving/0,0")
                conn.getresponse().read()
                break
            except OSError:
                conn = None
                time.sleep(0.1)
        if conn is None:
            raise RuntimeError("osrm-routed did not answer within 10 s")
        q = "overview=full&geometries=polyline&steps=false" if with_path else "overview=false&steps=false"
        ts, ok = [], 0
        for s, t in pairs:
            a, b = coords[s], coords[t]
            url = f"/route/v1/driving/{a[0]:.7f},{a[1]:.7f};{b[0]:.7f},{b[1]:.7f}?{q}"
            t0 = time.perf_counter()
            conn.request("GET", url)
            body = conn.getresponse().read()
            ts.append(time.perf_counter() - t0)
            ok += b'"code":"Ok"' in body
        return float(np.median(ts)) * 1e6, ok
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ------------------------------------------------------------------------------------------------ main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="Monaco only, few repetitions and queries (< 2 min)")
    ap.add_argument("--graphs", nargs="*", default=None, help="default: NY Monaco Andorra Helsinki")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--osrm-bin", default=None, help="directory of the osrm-* binaries")
    ap.add_argument("--no-osrm", action="store_true")
    ap.add_argument("--no-routingkit", action="store_true")
    ap.add_argument("--osrm-ny", action="store_true", help="also OSRM on NY written as an OSM file (slow)")
    ap.add_argument("--tag", default="", help="suffix of the JSON file name")
    ap.add_argument("--rebuild-partition", action="store_true", help="ignore the cached partitions")
    ap.add_argument("--changed-arcs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    graphs = args.graphs or (["Monaco"] if args.quick else ["NY", "Monaco", "Andorra", "Helsinki"])
    reps = 3 if args.quick else 5
    n_p2p = 100 if args.quick else 500
    n_batch = 2000 if args.quick else 10000
    n_check = 30 if args.quick else 100
    os.makedirs(args.out, exist_ok=True)
    import numba

    threads = numba.get_num_threads()
    cores = os.cpu_count()
    res = {"device": f"CPU {cores} cores ({platform.processor() or platform.machine()})",
           "host": platform.node(),
           "commit": commit(), "date": dt.date.today().isoformat(), "quick": args.quick,
           "numba_threads": threads, "cpu_count": cores, "python": platform.python_version(),
           "numba": numba.__version__, "loadavg_start": os.getloadavg(),
           "changed_arcs": args.changed_arcs, "peers": {}, "graphs": {}, "rows": []}
    rows = res["rows"]

    def row(graph, impl, what, value, unit, **kw):
        r = {"graph": graph, "impl": impl, "what": what, "value": value, "unit": unit, **kw}
        rows.append(r)
        extra = "".join(f" | {k}={v}" for k, v in kw.items())
        v = f"{value:,.3f}" if isinstance(value, float) else str(value)
        print(f"| {graph} | {impl} | {what} | {v} {unit}{extra} |", flush=True)

    # ---------------------------------------------------------------- peers available?
    prk = None
    if args.no_routingkit:
        res["peers"]["routingkit"] = "skipped (--no-routingkit)"
    else:
        try:
            import pyroutingkit as prk

            res["peers"]["routingkit"] = f"pyroutingkit (OpenMP {prk.HAS_OPENMP})"
        except ImportError as e:
            res["peers"]["routingkit"] = f"skipped: pyroutingkit not importable ({e})"
    bindir = prof = None
    if args.no_osrm:
        res["peers"]["osrm"] = "skipped (--no-osrm)"
    else:
        bindir, prof, note = osrm_bin(args.osrm_bin)
        res["peers"]["osrm"] = note if bindir else f"skipped: {note}"
    for k, v in res["peers"].items():
        print(f"# peer {k}: {v}", flush=True)
    print(f"# {res['device']}, numba threads {threads}, commit {res['commit']}", flush=True)

    rng = np.random.default_rng(args.seed)
    ours = f"gpuroute CRP (CPU, {threads} threads)"
    for gname in graphs:
        t = time.perf_counter()
        g, metrics, pbf = load(gname)
        n, m = g.n_nodes, g.n_arcs
        print(f"\n## {gname}: n={n:,}, m={m:,} (loaded in {time.perf_counter() - t:.1f} s)", flush=True)
        ginfo = res["graphs"][gname] = {"n_nodes": n, "n_arcs": m,
                                        "turn_restrictions": 0 if g.turns is None else len(g.turns)}
        # ------------------------------------------------------------ partition (cached)
        method = "kahip"
        try:
            import kahip  # noqa: F401
        except ImportError:
            method = "inertial"
            print("# kahip not importable: inertial flow partition", flush=True)
        from gpuroute import config

        sizes = '-'.join(map(str, config.CRP_CELL_SIZES))
        pdir = CACHE / f"part_{gname}_{method}_{config.CRP_KAHIP_MODE}_{sizes}"
        part, cached = None, False
        if pdir.exists() and not args.rebuild_partition:
            try:
                part = Partition.load(pdir, g)
                cached = True
            except Exception as e:
                print(f"# cached partition unusable ({e}); rebuilding", flush=True)
        if part is None:
            part = Partition.build(g, method=method)
            part.save(pdir)
        row(gname, ours, f"partition build ({method}"
            f"{' ' + config.CRP_KAHIP_MODE if method == 'kahip' else ''})", float(part.meta["seconds"]), "s",
            cached=cached, cells=list(part.n_cells), boundary_arcs=part.boundary_arcs(g).tolist())
        # ------------------------------------------------------------ overlay topology
        ov = gpuroute.Overlay.build(g, part)  # warm (numba)
        t_top = med(lambda g=g, part=part: gpuroute.Overlay.build(g, part), 3 if n > 100_000 else reps)
        ov = gpuroute.Overlay.build(g, part)
        row(gname, ours, "overlay topology build (incl. turn table)", t_top * 1e3, "ms",
            turns=ov.stats["turns"],
            clique_entries=ov.stats["clique_entries"])
        ginfo["overlay_stats"] = {k: v for k, v in ov.stats.items() if k != "topology_s"}
        turns = ov.turns
        S_chk, T_chk = rng.integers(0, n, n_check), rng.integers(0, n, n_check)
        S_p2p, T_p2p = rng.integers(0, n, n_p2p), rng.integers(0, n, n_p2p)
        S_b, T_b = rng.integers(0, n, n_batch), rng.integers(0, n, n_batch)
        node_costs = {}
        for mname, spec in metrics.items():
            # -------------------------------------------------------- customization
            ov.customize(spec)  # warm
            runs = [ov.customize(spec) for _ in range(reps)]
            i = int(np.argsort([r["seconds"] for r in runs])[len(runs) // 2])
            met = ov.metric
            base = np.asarray(met.arc_cost, np.int64)
            pen = np.asarray(met.turn_penalty, np.int64)
            row(gname, ours, f"customize {mname}", runs[i]["seconds"] * 1e3, "ms",
                decode_ms=round(runs[i]["decode_seconds"] * 1e3, 3),
                level_ms=[round(x * 1e3, 3) for x in runs[i]["level_seconds"]])
            numba.set_num_threads(1)
            try:
                t1 = med(lambda ov=ov, spec=spec: ov.customize(spec), reps)
            finally:
                numba.set_num_threads(threads)
            row(gname, "gpuroute CRP (CPU, 1 thread)", f"customize {mname}, 1 thread", t1 * 1e3, "ms")
            tc_here = decode_here(turns, base, pen)
            decoder_ok = bool(np.array_equal(tc_here, ov.turn_cost))
            node_model = not pen.any() and not (turns.kind == RESTRICTED).any()
            if not pen.any():
                node_costs[mname] = base
            # -------------------------------------------------------- queries
            q = ov.query()
            q.distance(int(S_p2p[0]), int(T_p2p[0]))
            t = time.perf_counter()
            for s, tt in zip(S_p2p, T_p2p, strict=True):
                q.distance(int(s), int(tt))
            row(gname, ours, f"p2p distance, 1 query at a time [{mname}]",
                (time.perf_counter() - t) / n_p2p * 1e6, "us")
            ov.route(int(S_p2p[0]), int(T_p2p[0]))
            t = time.perf_counter()
            for s, tt in zip(S_p2p, T_p2p, strict=True):
                ov.route(int(s), int(tt))
            row(gname, ours, f"p2p route with path [{mname}]", (time.perf_counter() - t) / n_p2p * 1e6, "us")
            ov.distances(S_b[:4], T_b[:4])
            tb = med(lambda ov=ov, S=S_b, T=T_b: ov.distances(S, T), 3)
            row(gname, ours, f"batched distances x{n_batch}, {threads} threads [{mname}]", n_batch / tb,
                "queries/s")
            numba.set_num_threads(1)
            try:
                tb1 = med(lambda ov=ov, S=S_b, T=T_b: ov.distances(S, T), 1 if args.quick else 2)
            finally:
                numba.set_num_threads(threads)
            row(gname, "gpuroute CRP (CPU, 1 thread)", f"batched distances x{n_batch}, 1 thread [{mname}]",
                n_batch / tb1, "queries/s")
            # -------------------------------------------------------- exactness
            if node_model:
                ref = node_oracle(g, base, S_chk, T_chk)
            else:
                ref = turn_oracle(g, turns, base, tc_here, S_chk, T_chk)
            d_batch = to_float(ov.distances(S_chk, T_chk))
            d_one = to_float([q.distance(int(s), int(tt)) for s, tt in zip(S_chk, T_chk, strict=True)])
            paths_ok, d_route = True, []
            for s, tt in zip(S_chk, T_chk, strict=True):
                pr = ov.route(int(s), int(tt))
                d_route.append(pr.distance)
                if pr.distance < INF and int(s) != int(tt):
                    paths_ok &= path_cost(g, turns, base, tc_here, int(s), int(tt), pr.arcs) == pr.distance
            d_route = to_float(d_route)
            exact = bool(np.array_equal(ref, d_batch) and np.array_equal(ref, d_one)
                         and np.array_equal(ref, d_route) and paths_ok and decoder_ok)
            row(gname, ours, f"exact [{mname}]", exact, "bool", pairs=n_check,
                oracle="scipy dijkstra (node graph)" if node_model else "scipy dijkstra (turn-expanded)",
                reachable=int(np.isfinite(ref).sum()), paths_repriced=bool(paths_ok),
                decoder_matches=decoder_ok)
            # -------------------------------------------------------- update (traffic)
            k = min(args.changed_arcs, m)
            cur = base.copy()
            ups = []
            for _ in range(reps):
                ids = rng.choice(m, k, replace=False)
                new = np.maximum(1, np.rint(base[ids] * rng.uniform(1.0, 3.0, k))).astype(np.int64)
                ups.append(ov.update(ids, new))
                cur[ids] = new
            j = int(np.argsort([u["seconds"] for u in ups])[len(ups) // 2])
            tc_cur = decode_here(turns, cur, pen)
            if node_model:
                ref_u = node_oracle(g, cur, S_chk, T_chk)
            else:
                ref_u = turn_oracle(g, turns, cur, tc_cur, S_chk, T_chk)
            exact_u = bool(np.array_equal(ref_u, to_float(ov.distances(S_chk, T_chk)))
                           and np.array_equal(cur, ov.arc_cost) and np.array_equal(tc_cur, ov.turn_cost))
            row(gname, ours, f"re-customize after {k} changed arcs (update) [{mname}]",
                ups[j]["seconds"] * 1e3, "ms",
                cells=ups[j]["cells"], level_ms=[round(x * 1e3, 3) for x in ups[j]["level_seconds"]],
                exact_after=exact_u)
        # ------------------------------------------------------------ RoutingKit CCH
        if prk is not None and g.coords is not None:
            try:
                routingkit(prk, g, node_costs, row, gname, reps, args.changed_arcs, cores, rng,
                           S_p2p, T_p2p, S_chk, T_chk)
            except Exception as e:
                row(gname, "RoutingKit CCH", f"failed: {type(e).__name__}: {e}", 0.0, "")
        elif prk is not None:
            row(gname, "RoutingKit CCH", "skipped: the graph has no coordinates", 0.0, "")
        # ------------------------------------------------------------ OSRM MLD
        if bindir and gname == "NY" and args.osrm_ny:
            t = time.perf_counter()
            pbf = ny_osm(g, np.asarray(metrics["time"].arc_cost), CACHE / "osrm" / "ny_dimacs.osm.pbf")
            print(f"# NY as OSM for OSRM: {pbf} ({time.perf_counter() - t:.1f} s)", flush=True)
        if bindir and pbf is not None:
            try:
                osrm(bindir, prof, pbf, g, row, gname, reps, min(n_p2p, 200), args.changed_arcs, cores, rng)
            except Exception as e:
                row(gname, "OSRM MLD", f"failed: {type(e).__name__}: {str(e)[-300:]}", 0.0, "")
        elif bindir:
            ginfo["osrm"] = "not run: no OSM file for this graph (NY as OSM for OSRM: --osrm-ny)"
    res["loadavg_end"] = os.getloadavg()
    date = res["date"]
    path = os.path.join(args.out, f"crp_cpu_{date}{'_quick' if args.quick else ''}{args.tag}.json")
    with open(path, "w") as f:
        json.dump(res, f, indent=1, default=lambda o: o.item() if hasattr(o, "item") else str(o))
    print(f"\nwrote {path}\n")
    table(res)
    summary(res)


def routingkit(prk, g, node_costs, row, gname, reps, k, cores, rng, S_p2p, T_p2p, S_chk, T_chk):
    impl = "RoutingKit CCH"
    n = g.n_nodes
    t = time.perf_counter()
    topo = prk.CCHTopology()
    topo.build(g.tail.astype(np.uint32), g.head.astype(np.uint32), g.coords[:, 1].astype(np.float32),
               g.coords[:, 0].astype(np.float32), n)
    row(gname, impl, "topology build (nested dissection, CCH)", (time.perf_counter() - t) * 1e3, "ms")
    for mname, cost in node_costs.items():
        w = cost.astype(np.uint32)
        met = prk.CCHMetric(topo)
        met.customize(w)
        for label, tc in (("sequential", 0), ("parallel, 1 thread", 1),
                          (f"parallel, {cores} threads", cores)):
            if tc == cores and cores == 1:
                continue
            tm = med(lambda met=met, w=w, tc=tc: met.customize(w, tc), reps)
            row(gname, impl, f"customize {mname} ({label})", tm * 1e3, "ms")
        met.customize(w)
        met.query(int(S_p2p[0]), int(T_p2p[0]))
        t = time.perf_counter()
        for s, tt in zip(S_p2p, T_p2p, strict=True):
            met.query(int(s), int(tt))
        row(gname, impl, f"p2p with path [{mname}]", (time.perf_counter() - t) / len(S_p2p) * 1e6, "us")
        d = np.array([met.query(int(s), int(tt))[0] for s, tt in zip(S_chk, T_chk, strict=True)], np.float64)
        d[d >= float(prk.INF_WEIGHT)] = np.inf
        ref = node_oracle(g, cost, S_chk, T_chk)
        row(gname, impl, f"exact vs node Dijkstra (no turns) [{mname}]", bool(np.array_equal(d, ref)), "bool",
            pairs=len(S_chk))
        ts = []
        cur = cost.copy()
        for _ in range(reps):
            ids = rng.choice(g.n_arcs, min(k, g.n_arcs), replace=False)
            new = np.maximum(1, np.rint(cost[ids] * rng.uniform(1.0, 3.0, ids.size))).astype(np.uint32)
            t = time.perf_counter()
            met.update_weights(ids.astype(np.uint32), new)
            ts.append(time.perf_counter() - t)
            cur[ids] = new
        d = np.array([met.query(int(s), int(tt))[0] for s, tt in zip(S_chk, T_chk, strict=True)], np.float64)
        d[d >= float(prk.INF_WEIGHT)] = np.inf
        ok = bool(np.array_equal(d, node_oracle(g, cur, S_chk, T_chk)))
        row(gname, impl, f"partial update, {min(k, g.n_arcs)} changed arcs [{mname}]",
            float(np.median(ts)) * 1e3, "ms", exact_after=ok)


def osrm(bindir, prof, pbf, g, row, gname, reps, n_p2p, k, cores, rng):
    impl = "OSRM MLD"
    reps = reps if g.n_nodes < 100_000 else 1  # osrm-customize takes ~20 s on NY written as OSM here
    work = CACHE / "osrm" / gname
    work.mkdir(parents=True, exist_ok=True)
    src = work / Path(pbf).name
    shutil.copyfile(pbf, src)
    base = work / (src.name.split(".")[0] + ".osrm")
    b = Path(bindir)
    wall, took, txt = osrm_run([b / "osrm-extract", "-p", Path(prof) / "car.lua", "-t", str(cores), src])
    ebg = re.findall(r"Loaded edge based graph: (\d+) edges, (\d+) nodes", txt)
    row(gname, impl, "osrm-extract (car.lua)", wall * 1e3, "ms")
    wall, took, txt = osrm_run([b / "osrm-partition", "-t", str(cores), base])
    row(gname, impl, "osrm-partition", wall * 1e3, "ms", osrm_bisection_s=took.get("Bisection"))
    for threads in sorted({1, cores}):
        walls, cells = [], []
        for _ in range(reps):
            wall, took, txt = osrm_run([b / "osrm-customize", "-t", str(threads), base])
            walls.append(wall)
            cells.append(took.get("Cells customization", float("nan")))
            ebg = re.findall(r"Loaded edge based graph: (\d+) edges, (\d+) nodes", txt) or ebg
        row(gname, impl, f"osrm-customize, {threads} threads (process wall)", float(np.median(walls)) * 1e3,
            "ms", cells_customization_ms=round(float(np.median(cells)) * 1e3, 3),
            edge_based_graph=ebg[0] if ebg else None)
    segs = osm_segments(pbf, k, rng)
    speed = work / "speeds.csv"
    with open(speed, "w") as f:
        for a, c in segs:
            f.write(f"{a},{c},{int(rng.integers(5, 50))}\n")
    walls, cells = [], []
    for _ in range(reps):
        wall, took, txt = osrm_run([b / "osrm-customize", "-t", str(cores), "--segment-speed-file", speed,
                                    base])
        walls.append(wall)
        cells.append(took.get("Cells customization", float("nan")))
    upd = {kk: v for kk, v in took.items() if "updat" in kk.lower() or "segment" in kk.lower()}
    used = re.findall(r"Used (\d+) speeds from \S*" + re.escape(speed.name), txt)  # segments OSRM matched
    upd.update({"segments_used": int(used[0]) if used else None,
                "updating_segment_data_ms": [float(x) for x in
                                             re.findall(r"Updating segment data took ([0-9.]+) ?ms", txt)]})
    row(gname, impl, f"osrm-customize with {len(segs)} changed segment speeds, {cores} threads (wall)",
        float(np.median(walls)) * 1e3, "ms", cells_customization_ms=round(float(np.median(cells)) * 1e3, 3),
        osrm_update_steps_s=upd)
    osrm_run([b / "osrm-customize", "-t", str(cores), base])  # back to the profile's speeds
    coords = g.coords
    pairs = list(zip(rng.integers(0, g.n_nodes, n_p2p).tolist(), rng.integers(0, g.n_nodes, n_p2p).tolist(),
                     strict=True))
    for with_path in (False, True):
        us, ok = osrm_routed_p2p(bindir, base, coords, pairs, with_path)
        what = "p2p route with path (osrm-routed, HTTP localhost)" if with_path else \
            "p2p route, no geometry (osrm-routed, HTTP localhost)"
        row(gname, impl, what, us, "us", answered_ok=f"{ok}/{len(pairs)}")


def table(res):
    print("| graph | implementation | what | value | notes |")
    print("|---|---|---|---:|---|")
    for r in res["rows"]:
        v = r["value"]
        v = f"{v:,.3f} {r['unit']}" if isinstance(v, float) else f"{v} {r['unit']}"
        notes = ", ".join(f"{k} {r[k]}" for k in ("exact_after", "cells", "cells_customization_ms", "cached",
                                                   "decode_ms", "answered_ok") if k in r)
        print(f"| {r['graph']} | {r['impl']} | {r['what']} | {v} | {notes} |")


def summary(res):
    """One line per graph and metric: customization, update and p2p of the three side by side."""
    rows = res["rows"]

    def get(graph, impl, what):
        for r in rows:
            if r["graph"] == graph and r["impl"].startswith(impl) and r["what"].startswith(what):
                return r
        return None

    def fmt(r, key="value"):
        if r is None or not isinstance(r.get(key), float):
            return "-"
        return f"{r[key]:,.1f}"

    print("\n| graph | metric | CRP customize ms (all / 1 thread) | CRP update 1k ms | CRP p2p us (path) | "
          "CRP exact (after update) | "
          "RK customize ms (seq / par all) | RK update 1k ms | RK p2p us (path) | OSRM customize ms "
          "(cells, all threads) | OSRM p2p us (HTTP) |")
    print("|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    cores = res["cpu_count"]
    for graph in res["graphs"]:
        mets = [r["what"].split("customize ")[1] for r in rows if r["graph"] == graph
                and r["impl"].startswith("gpuroute") and r["what"].startswith("customize ")
                and "1 thread" not in r["what"]]
        for mname in mets:
            ex = get(graph, "gpuroute", f"exact [{mname}]")
            k = res["changed_arcs"]
            up = get(graph, "gpuroute", f"re-customize after {k} changed arcs (update) [{mname}]")
            rk_u = get(graph, "RoutingKit", f"partial update, {k} changed arcs [{mname}]")
            rk_s = get(graph, "RoutingKit", f"customize {mname} (sequential)")
            rk_p = get(graph, "RoutingKit", f"customize {mname} (parallel, {cores} threads)")
            os_c = get(graph, "OSRM", f"osrm-customize, {cores} threads")
            print(f"| {graph} | {mname} | {fmt(get(graph, 'gpuroute', f'customize {mname}'))} / "
                  f"{fmt(get(graph, 'gpuroute', f'customize {mname}, 1 thread'))} | {fmt(up)} | "
                  f"{fmt(get(graph, 'gpuroute', f'p2p route with path [{mname}]'))} | "
                  f"{ex['value'] if ex else '-'} ({up['exact_after'] if up else '-'}) | "
                  f"{fmt(rk_s)} / {fmt(rk_p)} | "
                  f"{fmt(rk_u)} | "
                  f"{fmt(get(graph, 'RoutingKit', f'p2p with path [{mname}]'))} | "
                  f"{fmt(os_c, 'cells_customization_ms')} | "
                  f"{fmt(get(graph, 'OSRM', 'p2p route with path'))} |")


if __name__ == "__main__":
    main()
