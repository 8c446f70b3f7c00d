"""Alternative routes: gpuroute's via-node alternatives (:mod:`gpuroute.crp.alternatives`) against
``osrm-routed --algorithm mld`` on the same pairs, and the latency of ``alternatives=true`` against a plain route.

Both sides are built from the same extract with the same unmodified OSRM ``car.lua`` (the osrm-bindings
wheel, ``.ci/fetch_osrm.sh``): gpuroute ``build PBF --profile car.lua`` (cached under
``out/alternatives_bench/NAME``, rebuilt when the extract, the profile or the source tree's build code
changes: pass ``--rebuild``), OSRM ``osrm-extract``, ``osrm-partition``, ``osrm-customize`` (cached under
``out/serve_bench/osrm_mld/``, :func:`serve.osrm_prepare`). Pairs: ``--pairs`` random pairs of points inside
segments of the dataset's snapping index (:func:`serve.snappable_points`, seed ``--seed``).

Per pair and per ``alternatives`` value (``true`` and ``3``): the number of alternatives each returns,
each alternative's stretch (its weight over its own main route's), and where both found one whether the
first alternatives are the same road (weight and distance within 1 % of OSRM's); gpuroute's main route weight against
OSRM's (the same profile: they agree to OSRM's weight rounding). Latency: gpuroute in process
(``Engine.route``, one thread, ``overview=false``; medians and p90 over the pairs, after one warm-up pass),
plain vs ``alternatives=true`` vs ``alternatives=3``; OSRM's over HTTP on one keep-alive connection (context:
it includes the HTTP round trip, gpuroute's does not).

    python benchmarks/alternatives_osrm.py [--graphs Monaco Andorra] [--pairs 200] [--seed 7]
        [--osrm-bin DIR] [--out benchmarks/results] [--label L]
"""
from __future__ import annotations

import argparse
import atexit
import datetime as dt
import http.client
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import serve  # noqa: E402  (the OSRM and dataset helpers of the serve benchmark)

CACHE = ROOT / "out" / "alternatives_bench"
#: The alternatives values compared (OSRM's grammar: true is one alternative).
VALUES = ("true", "3")


def build(pbf, lua, name, rebuild):
    """``gpuroute build PBF --profile LUA`` into ``out/alternatives_bench/NAME`` (cached by the extract's and the
    profile's digests); (directory, info)."""
    ds = CACHE / name
    stamp = CACHE / f"{name}.stamp.json"
    key = {"pbf": serve.file_sha256(pbf), "lua": serve.file_sha256(lua)}
    if not rebuild and stamp.exists() and json.loads(stamp.read_text()).get("key") == key and (ds / "manifest.json").exists():
        return ds, dict(json.loads(stamp.read_text())["info"], cached=True)
    import subprocess

    CACHE.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "gpuroute.cli", "build", str(pbf), "--profile", str(lua), "-o", str(ds),
                        "--json"], capture_output=True, text=True, env=serve.gpuroute_env(), timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(f"gpuroute build exited {r.returncode}: {(r.stdout + r.stderr)[-1500:]}")
    info = {"build_wall_s": round(time.perf_counter() - t, 2)}
    stamp.write_text(json.dumps({"key": key, "info": info}))
    return ds, dict(info, cached=False)


class Osrm:
    """GET on one keep-alive connection to osrm-routed."""

    def __init__(self, port):
        self.port = port
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def get(self, path):
        for attempt in (0, 1):
            try:
                self.c.request("GET", path)
                r = self.c.getresponse()
                return r.status, json.loads(r.read())
            except (http.client.HTTPException, OSError):
                self.c.close()
                self.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                if attempt:
                    raise


def stretches(routes):
    if not routes:
        return []
    w0 = routes[0]["weight"]
    return [r["weight"] / w0 for r in routes[1:]] if w0 > 0 else []


def summary(counts, stretch, k):
    c = np.asarray(counts)
    s = np.asarray(stretch, dtype=np.float64)
    return {"pairs": int(c.size), "alternatives": int(c.sum()), "mean_per_pair": round(float(c.mean()), 3) if c.size else None,
            "pairs_with_any": int((c > 0).sum()),
            "histogram": {str(i): int((c == i).sum()) for i in range(k + 1)},
            "stretch_mean": round(float(s.mean()), 4) if s.size else None,
            "stretch_median": round(float(np.median(s)), 4) if s.size else None,
            "stretch_max": round(float(s.max()), 4) if s.size else None}


def lat_stats(ms):
    a = np.asarray(ms)
    return {"median_ms": round(float(np.median(a)), 3), "p90_ms": round(float(np.percentile(a, 90)), 3),
            "mean_ms": round(float(a.mean()), 3), "n": int(a.size)}


def run_graph(name, args, bindir, prof, res):
    from gpuroute.engine import Engine, EngineError

    pbf = serve.find_pbf(name)
    lua = Path(prof) / "car.lua"
    ds, binfo = build(pbf, lua, name, args.rebuild)
    rng = np.random.default_rng(args.seed)
    pts = serve.snappable_points(ds, 2 * args.pairs, rng)
    pairs = [[tuple(map(float, pts[2 * i])), tuple(map(float, pts[2 * i + 1]))] for i in range(args.pairs)]
    cores = os.cpu_count() or 1
    base, oinfo = serve.osrm_prepare(bindir, prof, pbf, name, cores, algorithm="mld")
    port = serve.free_port()
    logp = CACHE / f"osrm_mld_{name}.log"
    CACHE.mkdir(parents=True, exist_ok=True)
    p = serve.start([Path(bindir) / "osrm-routed", "--algorithm", "mld", "-i", "127.0.0.1", "-p", port, "-t", 1,
                     "--max-alternatives", 3, base], logp)
    out = {"pbf": str(pbf), "gpuroute_build": binfo, "osrm_prepare": oinfo, "pairs": len(pairs)}
    try:
        serve.wait_ready(p, port, "/nearest/v1/driving/0,0", logp)
        osrm = Osrm(port)
        e = Engine.open(ds)
        out["nodes"], out["arcs"] = int(e.graph.n_nodes), int(e.graph.n_arcs)
        loc = [";".join(f"{x:.6f},{y:.6f}" for x, y in c) for c in pairs]
        # answers
        per = {v: {"gpuroute": [], "osrm": [], "gpuroute_stretch": [], "osrm_stretch": [], "both": []}
               for v in VALUES}
        main_diff, skipped = [], 0
        for c, ll in zip(pairs, loc, strict=True):
            try:
                plain = e.route(c, overview="false")
            except EngineError:
                skipped += 1
                continue
            st, op = osrm.get(f"/route/v1/driving/{ll}?overview=false")
            if st != 200 or op.get("code") != "Ok":
                skipped += 1
                continue
            main_diff.append((plain["routes"][0]["weight"], op["routes"][0]["weight"]))
            for v in VALUES:
                k = 1 if v == "true" else int(v)
                g = e.route(c, alternatives=k, overview="false")["routes"]
                _, o = osrm.get(f"/route/v1/driving/{ll}?overview=false&alternatives={v}")
                o = o.get("routes", [])
                if len(g) > 1 and len(o) > 1:  # both found one: is the first the same road (weight, distance)?
                    same = (abs(g[1]["weight"] - o[1]["weight"]) <= 0.01 * o[1]["weight"]
                            and abs(g[1]["distance"] - o[1]["distance"]) <= 0.01 * o[1]["distance"])
                    per[v]["both"].append(bool(same))
                per[v]["gpuroute"].append(len(g) - 1)
                per[v]["osrm"].append(max(0, len(o) - 1))
                per[v]["gpuroute_stretch"] += stretches(g)
                per[v]["osrm_stretch"] += stretches(o)
        out["skipped_pairs"] = skipped
        gw, ow = (np.asarray([x[i] for x in main_diff], dtype=np.float64) for i in (0, 1))
        md = np.abs(gw - ow)
        out["main_route_weight_vs_osrm"] = {"pairs": int(md.size), "equal_within_0.1": int((md <= 0.11).sum()),
                                            "within_1pct": int((md <= 0.01 * ow).sum()),
                                            "median_abs_diff": round(float(np.median(md)), 3) if md.size else None}
        out["answers"] = {v: {"gpuroute": summary(per[v]["gpuroute"], per[v]["gpuroute_stretch"], 1 if v == "true" else int(v)),
                              "osrm": summary(per[v]["osrm"], per[v]["osrm_stretch"], 1 if v == "true" else int(v)),
                              "both_found": len(per[v]["both"]),
                              "first_alternative_same_within_1pct": int(sum(per[v]["both"]))}
                          for v in VALUES}
        # latency: one warm-up pass, then timed passes (interleaved per pair so load drifts hit all alike)
        lat = {"plain": [], "true": [], "3": []}
        olat = {"plain": [], "true": [], "3": []}
        for c in pairs[:20]:
            for k in (0, 1, 3):
                try:
                    e.route(c, alternatives=k, overview="false")
                except EngineError:
                    pass
        for c, ll in zip(pairs, loc, strict=True):
            for key, k in (("plain", 0), ("true", 1), ("3", 3)):
                t = time.perf_counter()
                try:
                    e.route(c, alternatives=k, overview="false")
                except EngineError:
                    continue
                lat[key].append((time.perf_counter() - t) * 1e3)
                q = f"/route/v1/driving/{ll}?overview=false" + ("" if k == 0 else f"&alternatives={'true' if k == 1 else k}")
                t = time.perf_counter()
                osrm.get(q)
                olat[key].append((time.perf_counter() - t) * 1e3)
        out["latency"] = {"gpuroute_in_process": {k: lat_stats(v) for k, v in lat.items()},
                          "osrm_http": {k: lat_stats(v) for k, v in olat.items()}}
        g = out["latency"]["gpuroute_in_process"]
        out["latency"]["gpuroute_true_over_plain"] = round(g["true"]["median_ms"] / g["plain"]["median_ms"], 2)
        out["latency"]["gpuroute_3_over_plain"] = round(g["3"]["median_ms"] / g["plain"]["median_ms"], 2)
    finally:
        serve.stop(p)
    res["graphs"][name] = out
    print(json.dumps({name: {k: out[k] for k in ("answers", "latency", "main_route_weight_vs_osrm")}}, indent=1),
          flush=True)


def markdown(res):
    lines = ["| graph | alternatives= | pairs | gpuroute alts (pairs with any) | OSRM MLD alts (pairs with any) | "
             "gpuroute stretch mean / max | OSRM stretch mean / max | both found: same first |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for name, g in res["graphs"].items():
        for v, a in g["answers"].items():
            x, o = a["gpuroute"], a["osrm"]
            lines.append(f"| {name} | {v} | {x['pairs']} | {x['alternatives']} ({x['pairs_with_any']}) | "
                         f"{o['alternatives']} ({o['pairs_with_any']}) | {x['stretch_mean']} / {x['stretch_max']} | "
                         f"{o['stretch_mean']} / {o['stretch_max']} | {a['both_found']}: "
                         f"{a['first_alternative_same_within_1pct']} |")
    lines += ["", "| graph | gpuroute plain | alternatives=true | alternatives=3 | true / plain | OSRM HTTP plain | "
              "OSRM HTTP true | OSRM HTTP 3 |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, g in res["graphs"].items():
        L, O = g["latency"]["gpuroute_in_process"], g["latency"]["osrm_http"]
        lines.append(f"| {name} | {L['plain']['median_ms']} ms | {L['true']['median_ms']} ms | {L['3']['median_ms']} ms | "
                     f"{g['latency']['gpuroute_true_over_plain']}x | {O['plain']['median_ms']} ms | "
                     f"{O['true']['median_ms']} ms | {O['3']['median_ms']} ms |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", nargs="+", default=["Monaco", "Andorra"])
    ap.add_argument("--pairs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--osrm-bin", default=None)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--label", default="")
    ap.add_argument("--rebuild", action="store_true")
    args = ap.parse_args()
    atexit.register(serve.stop_all)
    bindir, prof, note = serve.osrm_bin(args.osrm_bin)
    if bindir is None:
        sys.exit(f"needs OSRM: {note}")
    from gpuroute import config

    res = {"benchmark": "alternatives_osrm", "date": dt.date.today().isoformat(), "commit": serve.commit(),
           "src_changes": serve.dirty(), "label": args.label,
           "host": {"hostname": platform.node(), "cpu": serve.cpu_model(), "cores": os.cpu_count(),
                    "platform": platform.platform(), "loadavg_before": serve.loadavg()},
           "versions": serve.versions(), "peer": note,
           "config": {"pairs": args.pairs, "seed": args.seed, "values": VALUES,
                      "stretch": config.SERVE_ALTERNATIVES_STRETCH, "sharing": config.SERVE_ALTERNATIVES_SHARING,
                      "alpha": config.SERVE_ALTERNATIVES_ALPHA, "candidates": config.SERVE_ALTERNATIVES_CANDIDATES,
                      "gpuroute": "gpuroute build PBF --profile car.lua; Engine.route in process, one thread",
                      "osrm": "osrm-extract -p car.lua; osrm-partition; osrm-customize; osrm-routed --algorithm mld "
                              "-t 1 --max-alternatives 3; one keep-alive HTTP connection"},
           "graphs": {}}
    for name in args.graphs:
        print(f"## {name}", flush=True)
        run_graph(name, args, bindir, prof, res)
    res["loadavg_after"] = serve.loadavg()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "_".join(x for x in ("alternatives_osrm", res["date"], args.label, res["commit"]) if x)
    (out / f"{stem}.json").write_text(json.dumps(res, indent=1) + "\n")
    print(markdown(res))
    print(f"wrote {out / (stem + '.json')}")


if __name__ == "__main__":
    main()
