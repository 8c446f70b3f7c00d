"""Path helpers: the nodes of a path from a predecessor array, the arcs and the length of a node
sequence."""
from __future__ import annotations

import operator

import numpy as np

from ..backend import to_numpy
from ..graph.constants import INDEX_DTYPE, NO_PREDECESSOR
from . import _kernels as K

__all__ = ["extract_path", "path_arcs", "path_length"]


def extract_path(pred, source, target):
    """Nodes of the path ``source -> target`` in a shortest-path tree given by predecessors.

    Parameters
    ----------
    pred : array_like of int, shape (n,)
        ``pred[v]`` is the node before ``v``; ``NO_PREDECESSOR`` (-1) for the root and unreachable
        nodes (as returned by ``sssp(..., return_predecessors=True)`` for one source). NumPy or CuPy.
    source, target : int

    Returns
    -------
    ndarray int32, shape (k,)
        ``source, ..., target``; ``[source]`` if they are equal; empty if ``pred[target]`` is -1
        (target unreachable).

    Raises
    ------
    ValueError
        ``pred`` is not 1-D, or is malformed: the walk from ``target`` runs into a cycle (more than ``n``
        steps) or into -1 / an id outside ``[0, n)`` before reaching ``source``.
    IndexError
        ``source`` or ``target`` outside ``[0, n)``.
    """
    p = to_numpy(pred)
    if p.ndim != 1:
        raise ValueError(f"pred must be 1-D (one source's tree), got shape {p.shape}")
    if p.size and p.dtype.kind not in "iu":
        raise ValueError(f"pred must hold integer node ids, got dtype {p.dtype}")
    n = p.size
    s = operator.index(source)
    t = operator.index(target)
    for what, v in (("source", s), ("target", t)):
        if v < 0 or v >= n:
            raise IndexError(f"{what} {v} is outside the node range [0, {n})")
    if s == t:
        return np.array([s], dtype=INDEX_DTYPE)
    if p[t] == NO_PREDECESSOR:
        return np.zeros(0, dtype=INDEX_DTYPE)
    out = np.empty(n, dtype=np.int64)
    k = K.walk_predecessors(np.ascontiguousarray(p, dtype=np.int64), s, t, out)
    if k == -2:
        raise ValueError(f"malformed predecessor array: following pred from target {t} does not reach "
                         f"source {s} within n={n} steps (a cycle)")
    if k == -1:
        raise ValueError(f"malformed predecessor array: following pred from target {t} hits -1 or an id "
                         f"outside [0, {n}) before reaching source {s}")
    return out[:k][::-1].astype(INDEX_DTYPE)


def _as_nodes(graph, nodes):
    v = np.asarray(to_numpy(nodes))
    if v.ndim != 1:
        raise ValueError(f"nodes must be a 1-D sequence, got shape {v.shape}")
    if v.size and v.dtype.kind not in "iu":
        raise TypeError(f"nodes must be integer node ids, got dtype {v.dtype}")
    v = v.astype(np.int64)
    bad = (v < 0) | (v >= graph.n_nodes)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise IndexError(f"node {int(v[i])} at position {i} is outside the node range [0, {graph.n_nodes})")
    return v


def path_arcs(graph, nodes, weight=None):
    """Arc ids joining consecutive nodes of a path.

    Parameters
    ----------
    graph : RoadGraph
    nodes : array_like of int, shape (k,)
    weight : str, optional
        Only matters if the graph holds parallel arcs (possible for a graph built directly with the
        ``RoadGraph`` constructor): the lightest under this weight is chosen. Graphs from
        ``RoadGraph.from_arcs`` have exactly one arc per (u, v).

    Returns
    -------
    ndarray int32, shape (max(k - 1, 0),)

    Raises
    ------
    ValueError
        Two consecutive nodes are not joined by an arc (the message names them and their position).
    IndexError
        A node id outside ``[0, n_nodes)``.
    """
    v = _as_nodes(graph, nodes)
    w = graph.weight(weight)
    out = np.empty(max(v.size - 1, 0), dtype=INDEX_DTYPE)
    if v.size < 2:
        return out
    i = K.arcs_between(graph.first_out, graph.head, w, v, out)
    if i >= 0:
        raise ValueError(f"no arc {int(v[i])} -> {int(v[i + 1])} (path positions {i}, {i + 1}) "
                         f"in graph {graph.name!r}")
    return out


def path_length(graph, nodes, weight=None):
    """Length of a path given by its nodes: the sum of its arcs' weights.

    Parameters
    ----------
    graph : RoadGraph
    nodes : array_like of int, shape (k,)
        ``k >= 1``; a single node has length 0.
    weight : str, optional
        Default: the graph's first weight.

    Returns
    -------
    int
        In the weight's unit (``graph.units[weight]``).

    Raises
    ------
    ValueError
        An empty path (an unreachable target has distance ``INF``, not a path), or two consecutive
        nodes not joined by an arc.
    IndexError, KeyError
        A bad node id; an unknown weight.
    """
    v = _as_nodes(graph, nodes)
    if v.size == 0:
        raise ValueError("an empty path has no length (an unreachable target's distance is INF)")
    arcs = path_arcs(graph, v, weight)
    return int(graph.weight(weight)[arcs].astype(np.int64).sum())
