"""What every SSSP family shares: one options record per algorithm (used by both twins), one stats
layout, and the CPU twins' per-source runner.

Options
-------
Each algorithm declares its options once (:class:`Spec`); ``sssp(..., **options)`` is checked against
that declaration before either twin runs, so the CPU and GPU twins accept exactly the same names (an
option that only changes how a GPU kernel is launched is accepted on the CPU and has no effect there;
its doc says so). Unknown names raise ``TypeError`` listing the accepted ones.

Stats layout
------------
``sssp_full(...).stats`` has the same keys for every algorithm and device::

    algorithm, device, variant   str (variant may be None)
    phases     int64 (k,)        phases (or rounds) per source
    updated    list of k int64 arrays, or None   per-phase counts (each family's doc says what it counts)
    frontier   list of k int64 arrays, or None   per-phase frontier sizes, where measured
    times_us   list of k float64 arrays, or None per-phase times (phase_times=True)
    params     dict   the parameters the run used (resolved defaults): the keys the algorithm declares
    extra      dict   per-source details the algorithm declares (lists of k entries, or None where the
                      device does not measure them)

:func:`collect` builds it and raises on a key the algorithm did not declare (nothing is dropped).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..graph.constants import DIST_DTYPE

STATS_KEYS = ("algorithm", "device", "variant", "phases", "updated", "frontier", "times_us", "params", "extra")
_PER_SOURCE = ("updated", "frontier", "times_us")


@dataclass(frozen=True)
class Option:
    """One option of an algorithm: its default and what it means (``gpu_only``: accepted by the CPU
    twin, no effect there)."""

    name: str
    default: object = None
    doc: str = ""
    gpu_only: bool = False


@dataclass(frozen=True)
class Spec:
    """An algorithm's declaration: its options, variants, and the keys of ``params`` and ``extra`` in
    its stats (the same on every device)."""

    name: str
    options: tuple = ()
    variants: tuple = (None,)
    params: tuple = ()
    extra: tuple = ()
    doc: str = ""
    option_names: tuple = field(init=False, default=())

    def __post_init__(self):
        names = tuple(o.name for o in self.options) + ("phase_times",)
        object.__setattr__(self, "option_names", names)

    def parse(self, kwargs):
        """The full options record: ``kwargs`` checked against the declaration, defaults filled in.

        Raises
        ------
        TypeError
            An option this algorithm does not take (the message lists the accepted ones).
        """
        bad = sorted(set(kwargs) - set(self.option_names))
        if bad:
            raise TypeError(f"algorithm {self.name!r} got unexpected option(s) {bad}; it accepts "
                            f"{sorted(self.option_names)}")
        out = {o.name: o.default for o in self.options}
        out["phase_times"] = False
        out.update(kwargs)
        out["phase_times"] = bool(out["phase_times"])
        return out


def collect(spec, device, variant, runs, params):
    """The stats dict of :data:`STATS_KEYS` from per-source run records.

    Parameters
    ----------
    spec : Spec
    device : {"cpu", "gpu"}
    variant : str or None
    runs : list of dict
        One per source: ``phases`` (int), optionally ``updated``, ``frontier``, ``times_us`` (arrays) and
        any of ``spec.extra``.
    params : dict
        Must have exactly ``spec.params`` as keys.

    Raises
    ------
    KeyError
        A run or ``params`` holds a key the algorithm did not declare, or ``params`` misses one (a bug in
        a twin: the layout is enforced, never silently trimmed).
    """
    if set(params) != set(spec.params):
        raise KeyError(f"{spec.name} on the {device}: params {sorted(params)} != declared {sorted(spec.params)}")
    allowed = {"phases", *_PER_SOURCE, *spec.extra}
    for r in runs:
        bad = set(r) - allowed
        if bad:
            raise KeyError(f"{spec.name} on the {device}: undeclared stats key(s) {sorted(bad)}")
    stats = {"algorithm": spec.name, "device": device, "variant": variant,
             "phases": np.asarray([int(r["phases"]) for r in runs], dtype=np.int64), "params": dict(params)}
    for key in _PER_SOURCE:
        vals = [r.get(key) for r in runs]
        stats[key] = None if all(v is None for v in vals) else vals
    extra = {}
    for key in spec.extra:
        vals = [r.get(key) for r in runs]
        extra[key] = None if all(v is None for v in vals) else vals
    stats["extra"] = extra
    return stats


def cpu_predecessors(graph, w, dist, sources, want_pred):
    """Canonical predecessors of every row of ``dist`` (int64 (k, n)) on the CPU, or None."""
    if not want_pred:
        return None
    from .dijkstra import canonical_predecessors_many

    return canonical_predecessors_many(graph.rev_first_out, graph.rev_tail, graph.rev_arc, w, dist, sources)


def run_each(graph, w, sources, run_one):
    """Run ``run_one(source, dist_row) -> run record`` for every source; returns ``(dist (k, n), runs)``."""
    dist = np.empty((sources.size, graph.n_nodes), dtype=DIST_DTYPE)
    runs = [run_one(int(s), dist[i]) for i, s in enumerate(sources)]
    return dist, runs


def check_variant(name, variant, allowed):
    if variant not in allowed:
        raise ValueError(f"algorithm {name!r} takes variant in {allowed}, got {variant!r}")


def mean_weight_delta(graph, weight, factor=None):
    """The bucket width of near-far and delta-stepping on both devices: ``max(1, round(factor x mean arc
    weight))`` with ``factor`` defaulting to ``config.SSSP_DELTA_FACTOR`` (64); 1 without arcs."""
    from .. import config

    f = config.SSSP_DELTA_FACTOR if factor is None else float(factor)
    w = graph.weight(weight)
    return max(1, int(round(float(w.mean()) * f))) if w.size else 1


def resolve_delta(graph, weight, delta, delta_factor):
    """``delta`` (positive integer, weight units, or ``float("inf")`` for no far pile) or the default
    from ``delta_factor``.

    Raises
    ------
    ValueError
        A delta that is not a positive integer or inf.
    """
    if delta is None:
        if delta_factor is not None and float(delta_factor) == float("inf"):
            return float("inf")
        return mean_weight_delta(graph, weight, delta_factor)
    if delta == float("inf"):
        return float("inf")
    if isinstance(delta, bool) or not float(delta).is_integer() or int(delta) < 1:
        raise ValueError(f"delta must be a positive integer (in the weight's unit) or inf, got {delta!r}")
    return int(delta)


class GPURunner:
    """Runs a GPU solver source by source: the registry's GPU object for the families without a batched
    mode. ``run_one(source, want_pred, phase_times[, dtype]) -> (dist (n,), pred (n,) or None, record)``
    returns device arrays; ``takes_dtype``: whether ``run_one`` produces 32-bit distances itself."""

    def __init__(self, solver, params, run_one, takes_dtype=False):
        self.solver, self.params, self.run_one, self.takes_dtype = solver, params, run_one, takes_dtype

    def solve(self, sources, want_pred, phase_times, dtype="int64", to_host=False):
        """``(dist (k, n), pred (k, n) or None, runs, params)``; NumPy arrays when ``to_host``."""
        import cupy as cp

        from ..backend.flags import DINF
        from ..graph.constants import INF

        dists, preds, runs = [], [], []
        for s in sources:
            if self.takes_dtype:
                d, p, rec = self.run_one(int(s), want_pred, phase_times, dtype)
            else:
                d, p, rec = self.run_one(int(s), want_pred, phase_times)
                if dtype == "uint32":
                    d = cp.where(d == INF, DINF, d).astype(cp.uint32)
            dists.append(d)
            preds.append(p)
            runs.append(rec)
        dist = dists[0][None] if len(dists) == 1 else cp.stack(dists)
        pred = None
        if want_pred:
            pred = preds[0][None] if len(preds) == 1 else cp.stack(preds)
        if to_host:
            dist = dist.get()
            pred = pred.get() if pred is not None else None
        return dist, pred, runs, dict(self.params)
