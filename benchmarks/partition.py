"""Benchmark: the nested multi-level partition of Customizable Route Planning (gpuroute.partition.Partition,
Delling, Kobitzsch, Werneck, Euro-Par 2014, sec. 2), both partitioners side by side on CPU.

For each graph and method (cell_sizes default, config.CRP_CELL_SIZES): boundary arcs per level (directed
arcs whose ends lie in different cells; fewer is better), cells per level, the largest cell per level and
the wall time of Partition.build. Graphs: NY (shipped), Monaco (shipped) and the Andorra and Helsinki OSM
extracts of the shared data (car profile).

Usage (from the repo root):
    .venv/bin/python benchmarks/partition.py [--graphs NY Monaco Andorra Helsinki] [--methods kahip inertial]
        [--kahip-modes eco] [--out benchmarks/results]
Writes OUT/partition_cpu_<date>.json and prints a Markdown table.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import gpuroute  # noqa: E402
from gpuroute import config  # noqa: E402
from gpuroute.partition import Partition  # noqa: E402

OSM = ROOT / ".." / "shared" / "data" / "osm"
if not OSM.exists():
    OSM = Path("/work/shared/data/osm")


def commit():
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True).strip()
    except Exception:
        return "unknown"


def load(name):
    if name == "NY":
        return gpuroute.datasets.load("ny")
    if name == "Monaco":
        return gpuroute.datasets.load("monaco")
    if name == "Andorra":
        return gpuroute.load_osm(OSM / "andorra.osm.pbf", progress=False)
    if name == "Helsinki":
        return gpuroute.load_osm(OSM / "Helsinki.osm.pbf", progress=False)
    raise ValueError(f"unknown graph {name!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--graphs", nargs="*", default=["NY", "Monaco", "Andorra", "Helsinki"])
    ap.add_argument("--methods", nargs="*", default=["kahip", "inertial"])
    ap.add_argument("--kahip-modes", nargs="*", default=[config.CRP_KAHIP_MODE])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for gname in args.graphs:
        g = load(gname)
        print(f"# {g}", flush=True)
        for method in args.methods:
            for mode in (args.kahip_modes if method == "kahip" else [None]):
                saved = config.CRP_KAHIP_MODE
                if mode is not None:
                    config.CRP_KAHIP_MODE = mode
                try:
                    p = Partition.build(g, method=method, seed=args.seed)
                finally:
                    config.CRP_KAHIP_MODE = saved
                row = {"graph": gname, "n_nodes": g.n_nodes, "n_arcs": g.n_arcs, "method": method,
                       "kahip_mode": mode, "cell_sizes": list(p.cell_sizes), "n_cells": list(p.n_cells),
                       "boundary_arcs": p.boundary_arcs(g).tolist(),
                       "max_cell": [int(p.cell_node_counts(lv).max()) for lv in range(p.n_levels)],
                       "seconds": round(p.meta["seconds"], 3),
                       "counters": {k: p.meta[k] for k in ("kaffpa_calls", "resplits", "max_flows")}}
                rows.append(row)
                print(json.dumps(row), flush=True)
    res = {"device": f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)",
           "commit": commit(), "date": dt.date.today().isoformat(), "seed": args.seed, "rows": rows}
    path = os.path.join(args.out, f"partition_cpu_{res['date']}.json")
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    print(f"\nwrote {path}\n")
    print("| graph | nodes | method | cells per level | boundary arcs per level | max cell per level | s |")
    print("|---|---:|---|---|---|---|---:|")
    for r in rows:
        meth = r["method"] + (f" ({r['kahip_mode']})" if r["kahip_mode"] else "")
        print(f"| {r['graph']} | {r['n_nodes']:,} | {meth} | {' / '.join(map(str, r['n_cells']))} | "
              f"{' / '.join(f'{b:,}' for b in r['boundary_arcs'])} | {' / '.join(map(str, r['max_cell']))} | "
              f"{r['seconds']:.1f} |")


if __name__ == "__main__":
    main()
