"""Cell-local Bellman-Ford on the CPU (numba twin of ``gpu.py`` / ``cell_bf.cu``, in its round schedule;
the GPU's asynchronous loop relaxes the same cells in another order and reaches the same distances).
Method and correctness argument: the header of ``cell_bf.cu``. Cells come from
:mod:`gpuroute.partition.cells`.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ...graph.constants import DIST_DTYPE, INF
from ...partition.cells import layout
from ..common import cpu_predecessors
from .options import cell_params


@njit(cache=True)
def cell_bf_one(n, cell_size, lfo, lhd, lw, xfo, xhd, xw, source, dist):
    """Cell-local Bellman-Ford from ``source`` (new id) into ``dist`` (new ids), CPU twin of ``cells.cu``.

    Rounds: every cell dirty at the start of a round runs Bellman-Ford over its internal arcs until
    nothing changes (iterations over its active nodes), then relaxes the boundary arcs of the nodes it
    improved and marks the heads' cells dirty. Returns ``(rounds, updated_per_round, local_iterations,
    critical)``: ``critical`` sums over rounds the most local iterations one cell ran.
    """
    n_cells = (n + cell_size - 1) // cell_size
    lastd = np.full(n, INF, dtype=np.int64)
    for v in range(n):
        dist[v] = INF
    dist[source] = 0
    dirty = np.zeros(n_cells, dtype=np.bool_)
    dirty[source // cell_size] = True
    active = np.zeros(cell_size, dtype=np.bool_)
    nxt = np.zeros(cell_size, dtype=np.bool_)
    updated = np.zeros(16, dtype=np.int64)
    rounds = 0
    local_its = 0
    critical = 0  # sum over rounds of the most local iterations one cell ran (the GPU's critical path)
    while True:
        todo = np.nonzero(dirty)[0]
        if todo.size == 0:
            break
        if rounds > n:  # proven bound n + 1 rounds; never reached on valid input
            raise RuntimeError("cell Bellman-Ford exceeded its round bound")
        dirty[:] = False
        if rounds >= updated.size:
            updated = np.concatenate((updated, np.zeros(updated.size, dtype=np.int64)))
        round_max = 0
        for c in todo:
            cell_its = 0
            v0 = c * cell_size
            nc = min(cell_size, n - v0)
            for i in range(nc):
                active[i] = dist[v0 + i] < lastd[v0 + i]
            for _ in range(nc + 1):
                any_ = False
                for i in range(nc):
                    nxt[i] = False
                for i in range(nc):
                    if active[i]:
                        dv = dist[v0 + i]
                        for a in range(lfo[v0 + i], lfo[v0 + i + 1]):
                            nd = dv + lw[a]
                            hh = v0 + lhd[a]
                            if nd < dist[hh]:
                                dist[hh] = nd
                                nxt[lhd[a]] = True
                                any_ = True
                local_its += 1
                cell_its += 1
                for i in range(nc):
                    active[i] = nxt[i]
                if not any_:
                    break
            round_max = max(round_max, cell_its)
            for i in range(nc):
                v = v0 + i
                d = dist[v]
                if d < lastd[v]:
                    lastd[v] = d
                    updated[rounds] += 1
                    for a in range(xfo[v], xfo[v + 1]):
                        nd = d + xw[a]
                        hh = xhd[a]
                        if nd < dist[hh]:
                            dist[hh] = nd
                            dirty[hh // cell_size] = True
        critical += round_max
        rounds += 1
    return rounds, updated[:rounds].copy(), local_its, critical


def cell_bf_cpu(graph, weight, sources, want_pred, variant, opts):
    """Cell-local Bellman-Ford in rounds on the CPU. Cell size = ``threads`` x ``nodes_per_thread``
    (defaults from ``config.CELL_THREADS`` / ``config.CELL_NODES_PER_THREAD``, as on the GPU); ``order``
    groups nodes into cells; the GPU-only options change nothing here.

    ``phases``: rounds; ``updated``: nodes improved per round; ``extra``: ``local_iterations`` (all
    cells) and ``critical_iterations`` (sum over rounds of the most one cell ran: the GPU's critical
    path).
    """
    params = cell_params(opts, graph.n_nodes)
    size = params["cell_size"]
    lay = layout(graph, weight, size, opts["order"])
    n = graph.n_nodes
    dist = np.empty((sources.size, n), dtype=DIST_DTYPE)
    row = np.empty(n, dtype=DIST_DTYPE)
    runs = []
    for i, s in enumerate(sources):
        r, upd, its, crit = cell_bf_one(n, size, lay.lfo, lay.lhd, lay.lw, lay.xfo, lay.xhd, lay.xw,
                                        int(lay.rank[s]), row)
        dist[i] = row[lay.rank]
        runs.append({"phases": r, "updated": upd, "local_iterations": its, "critical_iterations": crit})
    params.update(n_cells=lay.n_cells, loop="rounds")
    w = graph.weight(weight)
    return dist, cpu_predecessors(graph, w, dist, sources, want_pred), runs, params
