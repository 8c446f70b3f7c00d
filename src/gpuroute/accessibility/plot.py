"""Pictures of accessibility results (matplotlib, PNG, no display needed): the network coloured by a
per-node value, and a histogram of travel times."""
from __future__ import annotations

import numpy as np


def _pyplot():
    from ..extras import require

    matplotlib = require("matplotlib", "accessibility plots")
    matplotlib.use("Agg", force=False)
    return require("matplotlib.pyplot", "accessibility plots")


def _save(fig, path):
    from ..store.atomic import atomic_file

    path = str(path)
    with atomic_file(path, "wb") as f:
        fig.savefig(f, format="png", dpi=fig.dpi)
    return path


def accessibility_map(graph, values, path, *, title=None, label=None, cmap="viridis", max_segments=400_000,
                      missing=None):
    """Draw the network coloured by a per-node value and save it as a PNG.

    Each arc is drawn from its tail to its head in the colour of the mean of its two nodes' values
    (graphs of more than ``max_segments`` arcs: each node as a dot instead). Node coordinates as stored
    (lon/lat degrees, drawn with the latitude's aspect, or planar x/y).

    Parameters
    ----------
    graph : RoadGraph
        With coordinates.
    values : array_like of float, shape (n,)
    path : str
        The PNG to write (atomically).
    title, label : str, optional
        The figure title and the colour bar's label.
    cmap : str
    max_segments : int
    missing : float, optional
        A value meaning "no data" (e.g. pandana's -1 for an empty min): drawn grey.

    Returns
    -------
    str
        ``path``.

    Raises
    ------
    ValueError
        No coordinates, or ``values`` of the wrong length.
    """
    if graph.coords is None:
        raise ValueError(f"graph {graph.name!r} has no node coordinates to draw")
    v = np.asarray(values, dtype=np.float64)
    if v.shape != (graph.n_nodes,):
        raise ValueError(f"values must hold one number per node: {graph.n_nodes} nodes, shape {v.shape}")
    plt = _pyplot()
    from ..extras import require

    LineCollection = require("matplotlib.collections", "accessibility plots").LineCollection

    xy = graph.coords
    ok = np.isfinite(v) if missing is None else np.isfinite(v) & (v != missing)
    lo, hi = (float(v[ok].min()), float(v[ok].max())) if ok.any() else (0.0, 1.0)
    fig, ax = plt.subplots(figsize=(8, 8), dpi=120)
    norm = plt.Normalize(lo, hi if hi > lo else lo + 1.0)
    if graph.n_arcs <= max_segments:
        t, h = graph.tail, graph.head
        seg = np.stack([xy[t], xy[h]], axis=1)
        both = ok[t] & ok[h]
        if (~both).any():
            ax.add_collection(LineCollection(seg[~both], colors="#bbbbbb", linewidths=0.3))
        lc = LineCollection(seg[both], cmap=cmap, norm=norm, linewidths=0.6)
        lc.set_array(0.5 * (v[t][both] + v[h][both]))
        ax.add_collection(lc)
        mappable = lc
    else:
        ax.scatter(xy[~ok, 0], xy[~ok, 1], s=0.2, c="#bbbbbb", linewidths=0)
        mappable = ax.scatter(xy[ok, 0], xy[ok, 1], s=0.3, c=v[ok], cmap=cmap, norm=norm, linewidths=0)
    ax.autoscale_view()
    if not graph.is_planar:
        ax.set_aspect(1.0 / max(np.cos(np.radians(float(np.mean(xy[:, 1])))), 1e-6))
        ax.set_xlabel("longitude")
        ax.set_ylabel("latitude")
    else:
        ax.set_aspect("equal")
    fig.colorbar(mappable, ax=ax, shrink=0.7, label=label or "")
    ax.set_title(title or f"{graph.name}: accessibility")
    fig.tight_layout()
    try:
        return _save(fig, path)
    finally:
        plt.close(fig)


def travel_time_histogram(times, path, *, unit="", title=None, bins=60):
    """A histogram of travel times (or distances), NaN and unreachable entries left out, saved as a PNG.

    Parameters
    ----------
    times : array_like of float
        Any shape; NaN (and ``inf``) are not drawn, their count is given in the title.
    path : str
    unit : str
        The axis label's unit.
    title : str, optional
    bins : int

    Returns
    -------
    str
        ``path``.
    """
    t = np.asarray(times, dtype=np.float64).ravel()
    ok = np.isfinite(t)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    if ok.any():
        ax.hist(t[ok], bins=bins, color="#3b6ea8")
        med = float(np.median(t[ok]))
        ax.axvline(med, color="#c0392b", linewidth=1.0, label=f"median {med:,.4g} {unit}".rstrip())
        ax.legend()
    ax.set_xlabel(f"travel time ({unit})" if unit else "travel time")
    ax.set_ylabel("pairs")
    n_bad = int((~ok).sum())
    ax.set_title((title or "travel times") + (f" ({n_bad:,} unreachable not shown)" if n_bad else ""))
    fig.tight_layout()
    try:
        return _save(fig, path)
    finally:
        plt.close(fig)
