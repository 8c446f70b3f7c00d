"""CU-CH on the GPU, repeated builds of NY and tiled 8x8 NY (labelled tiled) under one EXTRACT mode.

Usage: ``python benchmarks/cuch_extract_modes.py OUT.json MODE`` with MODE ``sort`` (two sorts of every arc an
iteration), ``default`` (merging for overlays of at least ``cuch_gpu.MERGE_MIN_ARCS`` arcs) or ``minN`` (merging
from N arcs on). Run one process per mode (the first build of a process grows CuPy's pools). Writes one row per
build: wall clock, the build's phases (``wall_s``) and the device time of each step (CUDA events, ms).
"""
import json
import sys
import time

import numpy as np

import gpuroute
from gpuroute.ch import cuch_gpu


def main(out, mode, reps=4):
    import cupy as cp

    cuch_gpu.MERGE_SORTED = mode != "sort"
    if mode.startswith("min"):
        cuch_gpu.MERGE_MIN_ARCS = int(mode[3:])
    ny = gpuroute.datasets.load("ny")
    rows = []
    for name, g in (("ny", ny), ("tiled8x8", gpuroute.datasets.tile(ny, 8, 8))):
        for rep in range(reps):
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            h, st, _ = cuch_gpu.build_cuch_gpu(g)
            t = time.perf_counter() - t0
            row = dict(graph=name, mode=mode, rep=rep, wall=round(t, 4),
                       wall_s={k: round(v, 4) for k, v in st["wall_s"].items()},
                       dev_ms={k[5:-2]: round(float(np.sum(v)) * 1e3, 1) for k, v in st.items()
                               if k.startswith("time_") and isinstance(v, list)})
            rows.append(row)
            print(json.dumps(row), flush=True)
            del h
    with open(out, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
