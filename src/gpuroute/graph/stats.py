"""Statistics of a graph (what ``gpuroute info`` prints): sizes, cleaning, degrees, weights with their
units, arc attributes, turn restrictions, bounding box and connectivity."""
from __future__ import annotations

import numpy as np


def graph_stats(graph):
    """A JSON-ready dict describing ``graph``.

    Returns
    -------
    dict
        ``name``, ``source``, ``nodes``, ``arcs``, ``self_loops_dropped``, ``parallel_arcs_dropped``,
        ``out_degree`` (min/mean/max, histogram of 0..4 and 5+), ``weights`` (per weight: unit symbol,
        quantity, scale, min/median/mean/max), ``arc_attributes`` (name -> dtype and unit), ``turns``
        (counts by kind, unsupported/unresolved counts from the loader, or None), ``coord_system``,
        ``bbox``, ``strong``/``weak`` (component count and largest size).
    """
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    n, m = graph.n_nodes, graph.n_arcs
    deg = graph.out_degree()
    hist = np.bincount(np.minimum(deg, 5), minlength=6) if n else np.zeros(6, np.int64)
    stats = {
        "name": graph.name,
        "source": graph.meta.get("source"),
        "nodes": n,
        "arcs": m,
        "self_loops_dropped": graph.meta.get("self_loops_dropped"),
        "parallel_arcs_dropped": graph.meta.get("parallel_arcs_dropped"),
        "out_degree": {"min": int(deg.min()) if n else 0, "mean": float(deg.mean()) if n else 0.0,
                       "max": int(deg.max()) if n else 0, "histogram": [int(h) for h in hist]},
        "weights": {},
        "arc_attributes": {k: {"dtype": str(v.dtype), "unit": graph.attr_units[k].symbol}
                           for k, v in graph.arc_attrs.items()},
        "turns": None,
        "coord_system": graph.coord_system,
        "bbox": None,
    }
    for name, w in graph.weights.items():
        u = graph.units[name]
        entry = {"unit": u.symbol, "quantity": u.quantity, "scale": u.scale, "approximate": u.approximate,
                 "note": u.note}
        if m:
            entry.update(min=int(w.min()), median=float(np.median(w)), mean=float(w.mean()), max=int(w.max()))
        stats["weights"][name] = entry
    if graph.turns is not None:
        t = dict(graph.turns.counts())
        t["total"] = len(graph.turns)
        t.update({k: v for k, v in graph.turns.meta.items() if isinstance(v, (int, np.integer))})
        stats["turns"] = t
    if graph.coords is not None and n:
        lo, hi = graph.coords.min(axis=0), graph.coords.max(axis=0)
        stats["bbox"] = [float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1])]
    if n:
        a = sp.csr_matrix((np.ones(m, dtype=np.int8), graph.head, graph.first_out), shape=(n, n))
        for kind in ("strong", "weak"):
            k, labels = connected_components(a, directed=True, connection=kind)
            stats[kind] = {"count": int(k), "largest": int(np.bincount(labels).max())}
    else:
        stats["strong"] = stats["weak"] = {"count": 0, "largest": 0}
    return stats
