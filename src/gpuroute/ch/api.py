"""``ContractionHierarchy``: build once (slow, saved), query many times (fast) -- STYLE's "phases are
objects". The arrays are a :class:`~gpuroute.ch.hierarchy.Hierarchy`; this facade validates inputs,
picks the device and the implementation, and returns arrays in the caller's array module."""
from __future__ import annotations

import time

import numpy as np

from .. import config
from ..backend import is_cupy_array, resolve_device
from ..graph.constants import INF
from .hierarchy import Hierarchy

METHODS = ("cu-ch", "sequential")


def node_ids(n, x, what):
    """``(ids, scalar)``: node ids as int64 (k,) from an int, a list, NumPy or CuPy (copied to the host), and
    whether ``x`` was one id. Validated by :func:`gpuroute.ch.query.id_array` (IndexError naming the bad id,
    ValueError for more than one dimension, TypeError for non-integers)."""
    from .query import id_array

    if is_cupy_array(x):
        x = x.get()
    a = np.asarray(x)
    return id_array(a, n, what), a.ndim == 0


class ContractionHierarchy:
    """A contraction hierarchy of one graph and one weight, with every query over it.

    Build with :meth:`build` (or :meth:`load` a saved one). Queries: :meth:`route` (one path),
    :meth:`distances` (paired distances), :meth:`tree` (PHAST one-to-all), :meth:`table` (many-to-many),
    :meth:`within` (one-to-all within a bound).

    Attributes
    ----------
    graph : RoadGraph or None
        The graph it was built from (needed for paths and predecessors).
    weight : str
        The weight it was built for.
    h : Hierarchy
        The arrays.
    method : {"cu-ch", "sequential"}
    params : dict
        The build parameters (C, K, witness limits, ...).
    stats : dict
        Build statistics: ``time_s``, ``device``, per-iteration lists (CU-CH: nodes contracted,
        shortcuts added, overlay nodes and arcs, time per step).
    graph_fingerprint, weight_fingerprint : str
    """

    def __init__(self, h, *, graph=None, weight=None, method="sequential", params=None, stats=None,
                 graph_fingerprint=None, weight_fingerprint=None):
        self.h = h
        self.graph = graph
        self.weight = weight
        self.method = method
        self.params = dict(params or {})
        self.stats = dict(stats or {})
        self.graph_fingerprint = graph_fingerprint or (graph.fingerprint() if graph is not None else None)
        self.weight_fingerprint = weight_fingerprint or (
            weight_fingerprint_of(graph, weight) if graph is not None else None)
        self._queries = {}
        self._gpu = None
        self._gpu_lab = None  # GPUHubLabels, once hub labels exist and a GPU query asked for them
        self._selections = {}  # RPHAST target selections of the last target sets (insertion order: oldest first)

    # ------------------------------------------------------------------ build, save, load
    @classmethod
    def build(cls, graph, weight=None, *, method="cu-ch", device="auto", progress=True, **options):
        """Contract ``graph`` for ``weight``.

        Parameters
        ----------
        graph : RoadGraph
        weight : str, optional
            Default: the graph's first weight.
        method : {"cu-ch", "sequential"}
            ``"cu-ch"``: Karimi, Koppelman, Michael, ICS '19, Algorithm 1 (on the GPU, or its numba twin
            on the CPU: the same hierarchy); options ``C`` (selection fraction, default
            ``config.CH_SELECTION_FRACTION``) and ``K`` (core cutoff, default ``config.CH_CORE_CUTOFF``).
            ``"sequential"``: Geisberger et al., WEA 2008 (CPU only), options of
            :func:`gpuroute.ch.sequential.build_sequential`.
        device : {"auto", "cpu", "gpu"}
        progress : bool
            A progress bar on the CPU.

        Returns
        -------
        ContractionHierarchy

        Raises
        ------
        ValueError
            Unknown method; ``"sequential"`` with ``device="gpu"``.
        KeyError
            Unknown weight.
        GPUUnavailableError
            ``device="gpu"`` without a GPU.
        """
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        wname = graph.default_weight if weight is None else weight
        graph.weight(wname)
        dev = resolve_device(device, method == "cu-ch")
        if method == "sequential" and dev == "gpu":
            raise ValueError("method='sequential' runs on the CPU; use method='cu-ch' on the GPU")
        t0 = time.perf_counter()
        if method == "sequential":
            from .sequential import build_sequential

            h, stats, params = build_sequential(graph, wname, progress=progress, **options)
        elif dev == "gpu":
            from .cuch_gpu import build_cuch_gpu

            h, stats, params = build_cuch_gpu(graph, wname, **options)
        else:
            from .cuch import build_cuch_cpu

            h, stats, params = build_cuch_cpu(graph, wname, progress=progress, **options)
        stats = dict(stats, time_s=time.perf_counter() - t0, device=dev)
        return cls(h, graph=graph, weight=wname, method=method, params=params, stats=stats)

    def save(self, directory):
        """Write the hierarchy to ``directory`` (arrays + a manifest with the graph's and the weight's
        fingerprints and the format version; atomic). See :func:`gpuroute.ch.store.save_hierarchy`."""
        from .store import save_hierarchy

        return save_hierarchy(self, directory)

    @classmethod
    def load(cls, directory, graph=None):
        """Read a saved hierarchy; with ``graph``, check that it was built from this graph and weight.
        See :func:`gpuroute.ch.store.load_hierarchy` (errors name what differs)."""
        from .store import load_hierarchy

        return load_hierarchy(directory, graph=graph)

    # ------------------------------------------------------------------ queries
    @property
    def n_nodes(self):
        return self.h.n_nodes

    def _need_graph(self, what):
        if self.graph is None:
            raise ValueError(f"{what} needs the graph the hierarchy was built from: "
                             "ContractionHierarchy.load(directory, graph=...)")

    def query(self):
        """A point-to-point query object (reuses its buffers across calls; one per thread)."""
        from .query import CHQuery

        return CHQuery(self)

    def route(self, source, target):
        """Shortest path ``source -> target`` by a bidirectional CH search on the CPU with path
        unpacking (Geisberger et al. 2008, sec. 4).

        Returns
        -------
        PathResult
            ``distance`` (INF when unreachable), ``nodes`` and ``arcs`` of the graph (the arcs' weights
            sum to the distance), ``settled`` (nodes settled by both searches), ``method="ch"``.

        Raises
        ------
        IndexError
            An id outside ``[0, n)``.
        ValueError
            The hierarchy was loaded without its graph.
        """
        self._need_graph("route")
        q = self._queries.get("p2p")
        if q is None:
            q = self._queries["p2p"] = self.query()
        return q.route(source, target)

    def distances(self, sources, targets, *, device="auto"):
        """Distances of the pairs ``(sources[i], targets[i])``: int64 (k,), INF where unreachable.

        CPU: bidirectional CH searches in parallel (numba), or hub-label merges once :meth:`hub_labels` built
        them; GPU: with hub labels, one warp a pair merging the two labels (``ch/labels_gpu.py``), else
        PHAST passes over the distinct sources, each gathering its pairs' targets. Same results.

        Raises
        ------
        ValueError
            ``sources`` and ``targets`` of different lengths.
        IndexError
            An id outside ``[0, n)``.
        """
        want_cupy = is_cupy_array(sources)
        s, _ = node_ids(self.n_nodes, sources, "sources")
        t, _ = node_ids(self.n_nodes, targets, "targets")
        if s.shape != t.shape:
            raise ValueError(f"sources and targets must pair up: {s.size} sources, {t.size} targets")
        dev = resolve_device(device)
        if dev == "gpu":
            lab = self._gpu_labels()
            d = lab.distances(s, t) if lab is not None else self._gpu_engine().distances(s, t)
            return d if want_cupy else d.get()
        from .query import distances_cpu

        d = distances_cpu(self.h, s, t)
        return _to(d, want_cupy)

    def tree(self, sources, *, device="auto", return_predecessors=False, dtype="int64"):
        """PHAST one-to-all distances (Delling, Goldberg, Nowatzyk, Werneck, "PHAST: Hardware-
        Accelerated Shortest Path Trees", IPDPS 2011; the CU-CH query of Karimi et al., sec. 3.8):
        an upward search from each source, then the downward sweep level by level.

        Parameters
        ----------
        sources : int or array_like of int, shape (k,)
        device : {"auto", "cpu", "gpu"}
        return_predecessors : bool
            Also the canonical predecessors (the smallest tail of a tight arc of the graph, as
            :func:`gpuroute.sssp` returns them; PHAST's third pass).
        dtype : {"int64", "uint32"}

        Returns
        -------
        dist : ndarray, shape (n,) for one source, (k, n) for several; INF (or INF_U32) where
            unreachable. NumPy, or CuPy for CuPy sources (GPU results stay on the device).
        pred : ndarray int32, same shape (with ``return_predecessors``)
        """
        want_cupy = is_cupy_array(sources)
        s, scalar = node_ids(self.n_nodes, sources, "sources")
        if return_predecessors:
            self._need_graph("predecessors")
        dev = resolve_device(device)
        if dev == "gpu":
            dist, pred = self._gpu_engine().tree(s, return_predecessors, dtype=dtype, to_host=not want_cupy)
        else:
            from .phast import tree_cpu

            dist = tree_cpu(self.h, s)
            pred = None
            if return_predecessors:
                from ..sssp.common import cpu_predecessors

                g = self.graph
                pred = cpu_predecessors(g, g.weight(self.weight), dist, s, True)
            if dtype == "uint32":
                from ..sssp.api import narrow_to_uint32

                dist = narrow_to_uint32(dist)
            dist, pred = _to(dist, want_cupy), (_to(pred, want_cupy) if pred is not None else None)
        if scalar:
            dist = dist[0]
            pred = pred[0] if pred is not None else None
        return (dist, pred) if return_predecessors else dist

    def table(self, sources, targets, *, device="auto", dtype="int64"):
        """Many-to-many distances (|S|, |T|): int64 with INF (or uint32 with INF_U32).

        GPU: once the hub labels exist (:meth:`hub_labels`), for at least ``config.CH_RPHAST_TABLE_MIN_SOURCES``
        sources and at most ``config.CH_RPHAST_TABLE_MAX_TARGETS`` targets whose selection is kept already
        (:meth:`select_targets` or :meth:`one_to_many` made it: selecting costs tens of milliseconds on the CPU,
        more than a table by labels on NY), RPHAST (the upward pass from the sources' labels on the device, a
        sweep over the targets' selection only); else, with
        hub labels built
        (:meth:`hub_labels`) and at most ``config.CH_LABELS_TABLE_MAX_TARGETS`` targets, one warp a cell
        merging two labels; else batched PHAST, full sweeps of up to ``config.CH_PHAST_BATCH_ITEMS`` distances
        per pass, each pass gathering the target columns on the device; CPU: CH buckets (Knopp et al.,
        "Computing Many-to-Many Shortest Paths Using Highway Hierarchies", ALENEX 2007). Same results on
        every path.
        """
        want_cupy = is_cupy_array(sources)
        s, _ = node_ids(self.n_nodes, sources, "sources")
        t, _ = node_ids(self.n_nodes, targets, "targets")
        dev = resolve_device(device)
        if dev == "gpu":
            lab = self._gpu_labels() if t.size <= int(config.CH_LABELS_TABLE_MAX_TARGETS) else None
            glab = lab if lab is not None else self._gpu_labels()
            sel = self._selection(t, build=False) if self._rphast_pays(s.size, t.size) and glab is not None else None
            if sel is not None:
                from .rphast_gpu import rphast_gpu

                d = rphast_gpu(self.h, sel, s, gpu_labels=glab, to_host=not want_cupy)
                if dtype == "uint32":
                    from ..sssp.api import narrow_to_uint32

                    d = narrow_to_uint32(d)
                return d
            if lab is None:
                return self._gpu_engine().table(s, t, dtype=dtype, to_host=not want_cupy)
            d = lab.table(s, t)
            if dtype == "uint32":
                from ..sssp.api import narrow_to_uint32

                d = narrow_to_uint32(d)
            return d if want_cupy else d.get()
        from .phast import table_cpu

        d = table_cpu(self.h, s, t)
        if dtype == "uint32":
            from ..sssp.api import narrow_to_uint32

            d = narrow_to_uint32(d)
        return _to(d, want_cupy)

    @staticmethod
    def _rphast_pays(k, t):
        """Whether a GPU table of ``k`` sources to ``t`` targets runs RPHAST (see :meth:`table`)."""
        return 0 < t <= int(config.CH_RPHAST_TABLE_MAX_TARGETS) and k >= int(config.CH_RPHAST_TABLE_MIN_SOURCES)

    def select_targets(self, targets):
        """RPHAST's target selection of ``targets`` (Delling, Goldberg, Werneck, ATMOS 2011, sec. 4): the
        nodes from which a downward path reaches them, renumbered by depth, with their downward in-arcs
        (:class:`gpuroute.ch.rphast.TargetSelection`). The last ``config.CH_RPHAST_SELECTIONS`` target sets
        are kept (a repeated set is not selected again). ``targets`` and the errors are those of
        :meth:`TargetSelection.build <gpuroute.ch.rphast.TargetSelection.build>`; CuPy targets are accepted too.
        """
        t, _ = node_ids(self.n_nodes, targets, "targets")
        return self._selection(t, build=True)

    def _selection(self, t, build):
        """The kept selection of the validated targets ``t`` (int64 (t,)), now the newest; when none is kept,
        selected and kept (``build``) or None."""
        key = t.tobytes()
        sel = self._selections.pop(key, None)
        if sel is None:
            if not build:
                return None
            from .rphast import TargetSelection

            sel = TargetSelection.build(self.h, t)
        self._selections[key] = sel  # the newest last
        while len(self._selections) > max(1, int(config.CH_RPHAST_SELECTIONS)):
            self._selections.pop(next(iter(self._selections)))
        return sel

    def one_to_many(self, sources, targets, *, device="auto", upward="auto"):
        """Distances from each source to a fixed target set by RPHAST (Delling, Goldberg, Werneck, "Faster
        Batched Shortest Paths in Road Networks", ATMOS 2011): each source's upward search (or, once
        :meth:`hub_labels` built them, its forward label), then the downward sweep over the targets'
        selection only; the selection is built once per target set and reused.

        Parameters
        ----------
        sources : array_like of int, shape (k,)
        targets : array_like of int, shape (t,), or TargetSelection
            A :meth:`select_targets` result skips the selection.
        device : {"auto", "cpu", "gpu"}
            CPU: :func:`gpuroute.ch.rphast.rphast_cpu` (numba); GPU: :func:`gpuroute.ch.rphast_gpu.rphast_gpu`
            (the same results).
        upward : {"auto", "search", "labels"}

        Returns
        -------
        ndarray int64, shape (k, t)
            ``INF`` where unreachable; NumPy, or CuPy for CuPy sources.

        Raises
        ------
        IndexError
            An id outside ``[0, n)``.
        ValueError
            A selection of another hierarchy; an unknown ``upward``; ``upward="labels"`` before the labels.
        """
        from .rphast import TargetSelection, rphast_cpu

        want_cupy = is_cupy_array(sources)
        s, _ = node_ids(self.n_nodes, sources, "sources")
        sel = targets if isinstance(targets, TargetSelection) else self.select_targets(targets)
        if resolve_device(device) == "gpu":
            from .rphast_gpu import rphast_gpu

            return rphast_gpu(self.h, sel, s, upward=upward, gpu_labels=self._gpu_labels() if upward != "search"
                              else None, to_host=not want_cupy)
        return _to(rphast_cpu(self.h, sel, s, upward=upward), want_cupy)

    def within(self, source, bound, *, device="auto"):
        """Every node at distance <= ``bound`` from ``source``: ``(nodes int32 (r,), dist int64 (r,))``
        sorted by node id; the primitive of isochrones and accessibility.

        Raises
        ------
        ValueError
            A negative bound.
        """
        s, _ = node_ids(self.n_nodes, source, "source")
        if s.size != 1:
            raise ValueError("within() takes one source")
        if bound < 0:
            raise ValueError(f"bound must be >= 0, got {bound}")
        dev = resolve_device(device)
        if dev == "gpu":
            return self._gpu_engine().within(int(s[0]), int(bound))
        from .phast import within_cpu

        return within_cpu(self.h, int(s[0]), int(bound))

    def hub_labels(self):
        """Build (once) the hub labels of this hierarchy (Abraham, Delling, Goldberg, Werneck, "A Hub-Based
        Labeling Algorithm for Shortest Paths on Road Networks", SEA 2011, sec. 4: labels from the CH
        search spaces, pruned). Opt-in: on DIMACS NY about 0.5 GB and 3-11 s to build; from then on
        :meth:`route` and :meth:`distances` on the CPU merge two sorted labels instead of searching
        (NY: ~17 us a route with its path, ~1M distances/s on 2 cores; same results), and on the GPU
        :meth:`distances` and small :meth:`table` calls merge them one warp a pair (the labels are
        uploaded on the first such call). Kept while the hierarchy lives.

        Returns
        -------
        gpuroute.ch.query.HubLabels

        Raises
        ------
        ValueError
            A hierarchy whose core does not hold the highest ranks.
        """
        from .query import hub_labels

        return hub_labels(self.h)

    # ------------------------------------------------------------------ GPU side
    def _gpu_engine(self):
        if self._gpu is None:
            from .phast_gpu import GPUHierarchy

            self._gpu = GPUHierarchy(self)
        return self._gpu

    def _gpu_labels(self):
        """The GPU copy of the hub labels, once :meth:`hub_labels` built them (uploaded on first use), else
        None."""
        from .query import built_hub_labels

        lab = built_hub_labels(self.h)
        if lab is None:
            return None
        if self._gpu_lab is None or self._gpu_lab.labels is not lab:
            from .labels_gpu import GPUHubLabels

            self._gpu_lab = GPUHubLabels(lab)
        return self._gpu_lab

    def release(self):
        """Free the GPU copies of the hierarchy, of its hub labels and of its kept RPHAST selections (made on
        first GPU query)."""
        self._gpu = None
        self._gpu_lab = None
        for sel in self._selections.values():
            sel._device.pop("gpu", None)

    def __repr__(self):
        h = self.h
        return (f"ContractionHierarchy({self.method}, weight={self.weight!r}, n={h.n_nodes:,}, up={h.n_up:,}, "
                f"down={h.n_down:,}, levels={h.n_levels}, core={h.core.size})")


def weight_fingerprint_of(graph, weight):
    """SHA-256 (16 hex) of one weight array: a hierarchy is valid for exactly this metric."""
    import hashlib

    w = graph.weight(weight)
    return hashlib.sha256(np.ascontiguousarray(w).tobytes() + str(weight).encode()).hexdigest()[:16]


def _to(a, want_cupy):
    if want_cupy:
        import cupy as cp

        return cp.asarray(a)
    return a


__all__ = ["ContractionHierarchy", "METHODS", "weight_fingerprint_of", "INF", "Hierarchy", "config"]
