"""Turn a benchmark JSON (sssp_one_to_all.py's output) into the Markdown tables of BENCHMARKS.md.

    python3 benchmarks/report.py benchmarks/results/sssp_one_to_all_h200_2026-11-22.json [--commit SHA]
"""
from __future__ import annotations

import argparse
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("--commit", default=None)
    a = ap.parse_args()
    r = json.load(open(a.json))
    commit = a.commit or r.get("commit")
    pc = r["phase_costs"]
    print(f"Device {r['device']}, commit {commit}, date {r['date']}. Measured ceilings: device copy "
          f"{r['copy_Bps'] / 1e12:.2f} TB/s (read + write); empty kernel replayed in a CUDA graph "
          f"{pc['graph_launch_us']:.2f} us; host launch + flag read-back {pc['host_phase_us']:.1f} us; "
          f"persistent-kernel round {pc['persistent_round_us']:.2f} us.\n")
    graphs = []
    for row in r["rows"]:
        if row["graph"] not in graphs:
            graphs.append(row["graph"])
    for g in graphs:
        rows = [x for x in r["rows"] if x["graph"] == g]
        base = {x["method"]: x["ms"] for x in rows if "ms" in x}
        scipy_ms = base.get("scipy dijkstra (CPU)")
        print(f"#### {g}\n")
        print("| method | time (ms) | phases | vs scipy | bytes floor (ms) | sync floor (ms) | exact |")
        print("|---|---:|---:|---:|---:|---:|:---:|")
        for x in rows:
            if "error" in x:
                print(f"| {x['method']} | error: {x['error'][:60]} | | | | | |")
                continue
            if "trees_per_s" in x:
                print(f"| {x['method']} ({x['sources']} sources) | {x['ms']:.1f} | | {x['trees_per_s']:,.0f} trees/s | | | "
                      f"{'yes' if x.get('exact') else 'NO'} |")
                continue
            ratio = scipy_ms / x["ms"] if scipy_ms else None
            sp = "" if ratio is None else (f"{ratio:.1f}x" if ratio >= 0.1 else f"{ratio:.3f}x")
            bf = f"{x['bytes_floor_ms']:.3f}" if "bytes_floor_ms" in x else ""
            sf = f"{x['sync_floor_ms']:.2f}" if "sync_floor_ms" in x else ""
            ex = "" if "exact" not in x else ("yes" if x["exact"] else "NO")
            print(f"| {x['method']} | {x['ms']:.2f} | {x.get('phases', '') or ''} | {sp} | {bf} | {sf} | {ex} |")
        print()


if __name__ == "__main__":
    main()
