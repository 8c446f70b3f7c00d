"""``Overlay``: Customizable Route Planning's three phases as one object -- the metric-independent
topology (built once from a graph and a nested partition), customization (a metric, fast, repeated),
traffic updates (only the affected cells), and exact turn-aware queries.

Follows Delling, Kobitzsch, Werneck, "Customizing Driving Directions with GPUs" (Euro-Par 2014),
sec. 2-4, and Delling, Goldberg, Pajor, Werneck, "Customizable Route Planning in Road Networks"
(Transportation Science 2017), sec. 3-4. The model and array layout are described in
:mod:`gpuroute.crp.topology`; the CPU customization in :mod:`gpuroute.crp.customize`; the query in
:mod:`gpuroute.crp.search`.
"""
from __future__ import annotations

import json
import os
import time

import numba
import numpy as np

from .. import config, store
from ..backend import resolve_device
from ..ch.query import id_array
from ..graph.constants import INF
from ..graph.units import Unit, parse_unit
from ..partition import Partition
from ..partition.multilevel import topology_fingerprint
from ..query.p2p import PathResult
from . import search
from .customize import CustomizationPlan, unpack
from .metric import CLOSED, FORBIDDEN, RESTRICTED, Metric, TurnTable, decode_turn_costs
from .state_buffers import StateBuffers, index_ranges, move_ranges_fast, update_ranges
from .topology import build_topology

__all__ = ["Overlay", "OverlayQuery", "OverlayState", "FORMAT", "FORMAT_VERSION", "metric_unit", "arrays_sha"]

FORMAT = "gpuroute-overlay"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
#: File name prefix of the saved microinstruction program's arrays (``micro_words.npy``, ...).
MICRO_PREFIX = "micro_"
#: Manifest formats :meth:`Overlay.load` also reads: an overlay directory (:mod:`gpuroute.pipeline.overlay_dir`) and a
#: dataset directory (:mod:`gpuroute.engine.dataset`), each holding an ``overlay/`` of :data:`FORMAT`.
_STAGES_FORMAT = "gpuroute-crp-stages"
_DATASET_FORMAT = "gpuroute-dataset"
DEVICES = ("auto", "cpu", "gpu")


def metric_unit(graph, metric) -> Unit:
    """The :class:`~gpuroute.graph.units.Unit` of a metric's costs: the graph weight's own Unit when one has
    the metric's unit symbol (``"ds"`` -> ``graph.units["travel_time"]``, with its scale and note), else
    the symbol read by :func:`~gpuroute.graph.units.parse_unit` (costs of the caller's own: no scale)."""
    symbol = getattr(metric, "units", "") or ""
    units = getattr(graph, "units", None) or {}
    if symbol:
        for u in units.values():
            if isinstance(u, Unit) and u.symbol == symbol:
                return u
    return parse_unit(symbol)


def node_ids(n, x, what):
    """Node ids as int64 (k,) and whether ``x`` was a scalar (:func:`gpuroute.ch.query.id_array`: IndexError
    naming the first bad id)."""
    return id_array(x, n, what), np.ndim(x) == 0


@numba.njit(cache=True, parallel=True)
def _gather(src, idx):
    """``src[idx]`` (int64), in parallel: the costs in the query's state numbering."""
    out = np.empty(idx.size, np.int64)
    for i in numba.prange(idx.size):
        out[i] = src[idx[i]]
    return out


def arc_durations(durations, m):
    """``durations`` as int64 (m,) deciseconds, each in [1, 2^31); None stays None. Raises ValueError."""
    if durations is None:
        return None
    d = np.asarray(durations)
    if d.shape != (m,) or (d.size and d.dtype.kind not in "iu"):
        raise ValueError(f"durations must be integers of shape ({m},), got {d.dtype}{list(d.shape)}")
    d = d.astype(np.int64)
    bad = (d <= 0) | (d > np.iinfo(np.int32).max)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"durations[{i}] = {int(d[i])} must be a positive integer below 2^31 (deciseconds)")
    return d


class OverlayState:
    """One customized metric: everything a query reads, swapped as one reference (a query never sees
    half of a metric). ``tree`` may still be arriving from the GPU (an asynchronous copy, the seed's
    sec. 5): reading it waits for the copy."""

    __slots__ = ("metric", "arc_cost", "turn_cost", "clique", "_tree", "_tree_wait", "seconds", "q_arc_cost",
                 "q_turn_cost", "arc_duration")

    def __init__(self, metric, arc_cost, turn_cost, clique, tree, seconds, qg, tree_wait=None, arc_duration=None,
                 q_arc_cost=None, q_turn_cost=None):
        self.metric = metric
        # the arcs' travel times under this metric's traffic (int64 (m,), deciseconds) where they are not
        # the graph's (speed updates on a metric that is not a time); None: the graph's travel times
        self.arc_duration = arc_duration
        self.arc_cost = arc_cost
        self.turn_cost = turn_cost
        self.clique = clique
        self._tree = tree
        self._tree_wait = tree_wait
        self.seconds = seconds
        # the same costs in the query's state numbering (see _query_graph; a traffic update passes them,
        # made from the previous state's by copying the changed entries only)
        self.q_arc_cost = _gather(arc_cost, qg["order"]) if q_arc_cost is None else q_arc_cost
        self.q_turn_cost = _gather(turn_cost, qg["torder"]) if q_turn_cost is None else q_turn_cost

    @property
    def tree(self):
        w = self._tree_wait
        if w is not None:
            w()  # idempotent: waits for the copy's event
            self._tree_wait = None
        return self._tree


class Overlay:
    """The multi-level overlay of one graph and one nested partition, with its current metric.

    Build with :meth:`build` (metric-independent, once), then :meth:`customize` with a metric (repeated:
    a new metric or new traffic replaces the old one atomically), :meth:`update` for changed arc costs,
    and query with :meth:`route` / :meth:`distances` (or one :meth:`query` object per thread).

    Attributes
    ----------
    graph : RoadGraph
    partition : Partition
        Nested, level 0 finest (``partition.cells`` int32 (L, n)).
    turns : TurnTable
        Every turn of the arc-based model, with its kind (restricted turns are never taken).
    n_levels : int
    n_cells : tuple of int
        Cells per level.
    stats : dict
        Entry and exit points and clique entries per level, topology build seconds.
    metric : Metric or None
        The metric customized last (None before :meth:`customize`).
    """

    def __init__(self, graph, partition, turns=None, mezzanine=None, _micro=None):
        t0 = time.perf_counter()
        if not isinstance(partition, Partition):
            raise TypeError(f"partition must be a gpuroute.Partition, got {type(partition).__name__}")
        partition.check_graph(graph)
        self.graph = graph
        self.partition = partition
        self.turns = turns if turns is not None else TurnTable.build(graph)
        restricted = self.turns.kind == RESTRICTED
        topo = build_topology(graph.tail, graph.head, partition.cells, self.turns.first, self.turns.out_arc,
                              restricted)
        self._topo = topo
        self._qg = _query_graph(graph, self.turns, topo)
        # the levels customization runs (mezzanine levels, microinstructions) and the trees' layout
        self._plan = CustomizationPlan(graph, partition, self.turns, topo, mezzanine, _micro)
        self._tree_first = self._plan.tree_first.copy()
        self._tree_dtype = self._plan.tree_dtype
        self.n_levels = partition.cells.shape[0]
        self.n_cells = topo["n_cells"]
        self._state = None
        self._gpu_cust = None   # GPUCustomizer, built on the first GPU customization
        self._gpu_token = None  # the OverlayState whose cliques and trees the GPU copy holds
        # copy-on-write buffers of the customized states: an update copies only what it changes
        self._buffers = StateBuffers()
        cb = topo["cell_base"]
        ne = np.diff(topo["ent_first"])
        nx = np.diff(topo["ex_first"])
        self.stats = {
            "topology_s": time.perf_counter() - t0,
            "entry_points": [int(ne[cb[p]:cb[p + 1]].sum()) for p in range(self.n_levels)],
            "exit_points": [int(nx[cb[p]:cb[p + 1]].sum()) for p in range(self.n_levels)],
            "clique_entries": [int((ne * nx)[cb[p]:cb[p + 1]].sum()) for p in range(self.n_levels)],
            "search_graph_edges": [int(lg.e_to.size) for lg in topo["levels"]],
            "turns": int(self.turns.out_arc.size),
        }

    # ------------------------------------------------------------------------------------------ build
    @classmethod
    def build(cls, graph, partition=None, *, turns=None, mezzanine=None, **partition_options):
        """The overlay topology of ``graph`` over a nested partition (metric-independent).

        Parameters
        ----------
        graph : RoadGraph
        partition : Partition, optional
            Default: ``Partition.build(graph, **partition_options)``.
        turns : TurnTable, optional
            Default: ``TurnTable.build(graph)`` (the graph's turn restrictions, U-turns, left/right).
        mezzanine : None, dict, Partition or False
            Mezzanine levels customization runs under the partition's levels
            (:func:`gpuroute.crp.customize.resolve_mezzanine`): None = :data:`gpuroute.config.CRP_MEZZANINE`.

        Returns
        -------
        Overlay
            Not yet customized: call :meth:`customize`.

        Raises
        ------
        TypeError, ValueError
            A partition of another graph (node count or fingerprint differs).
        """
        if partition is None:
            partition = Partition.build(graph, **partition_options)
        return cls(graph, partition, turns, mezzanine)

    @property
    def partition_fingerprint(self) -> str:
        """Hash of the partition's cells (the one recorded by :meth:`save`)."""
        return arrays_sha(self.partition.cells)

    @property
    def metric(self):
        st = self._state
        return None if st is None else st.metric

    @property
    def customized(self) -> bool:
        return self._state is not None

    # ------------------------------------------------------------------------------------ customization
    def _run_levels(self, turn_cost, clique, tree, cells_per_level):
        """CPU customization through the level driver; returns (seconds per query level, per plan level)."""
        plan = self._plan
        times = plan.run_cpu(turn_cost, clique, tree, cells_per_level, self._tree_first)
        return plan.query_seconds(times), times

    def _gpu(self):
        if self._gpu_cust is None:
            from .customize_gpu import GPUCustomizer

            self._gpu_cust = GPUCustomizer(self)
        return self._gpu_cust

    def _run_gpu(self, met, arc, cells_per_level=None, base_state=None, decode=True):
        """Customize on the GPU (all cells, or ``cells_per_level`` on top of ``base_state``) while the host
        decodes the turn costs the queries read (``decode``; an update patches them itself, and gets None);
        returns (turn costs, clique, tree, level seconds, rounds, the pending run)."""
        g = self._gpu()
        keep = bool(self._tree_first[-1] > 0)
        base = None
        if cells_per_level is not None and (self._gpu_token is not base_state or g.current is None):
            base = (base_state.clique, base_state.tree if keep else None)
        t0 = time.perf_counter()
        run = g.launch(arc, met.turn_penalty, met.turn_cost, cells_per_level, base, keep)
        t1 = time.perf_counter()
        tcost = np.ascontiguousarray(decode_turn_costs(met, self.turns), dtype=np.int64) if decode else None
        t2 = time.perf_counter()
        clique, tree, level_s, rounds = g.finish(run)
        if tree is None:
            tree = np.empty(0, self._tree_dtype)
        run["host_seconds"] = {"launch": t1 - t0, "host_decode": t2 - t1, "wait_and_copy": time.perf_counter() - t2}
        return tcost, clique, tree, level_s, rounds, run

    def _commit_gpu(self, run):
        self._gpu_cust.commit(run)
        self._gpu_token = self._state

    def customize(self, metric=None, *, device="auto", durations=None, devices=None):
        """Customize the overlay for ``metric``: every cell's clique, level by level, bottom-up.

        Parameters
        ----------
        metric : str, Profile, array_like or (array_like, dict), optional
            Anything :meth:`gpuroute.crp.Metric.resolve` accepts (``"distance"``, ``"time"``,
            ``"time-uturn"``, a :class:`~gpuroute.crp.Profile`, per-arc costs, per-arc costs and turn
            penalties). Default: the graph's default weight, no turn penalties.
        durations : array_like of int (m,), optional
            The arcs' travel times (deciseconds, positive) that go with this metric when they are not the
            graph's (saved live traffic on a metric that is not a time); carried by the state
            (``OverlayState.arc_duration``). None: the graph's.
        device : {"auto", "cpu", "gpu"}
            ``"cpu"`` runs the numba customization (parallel over the cells of a level); ``"gpu"`` the
            GPU customization of :mod:`gpuroute.crp.customize_gpu` (Bellman-Ford per cell in shared
            memory, sec. 3 of the paper; the same cliques); ``"auto"`` the GPU where one is usable.
        devices : sequence of int, optional
            Customize on several devices (:func:`gpuroute.crp.customize_multi.customize_multi`, the seed's
            sec. 5: subtrees of cells split across GPUs, the upper levels on ``devices[0]``; the same cliques
            and trees bit for bit). With ``device="cpu"`` they are virtual devices (a CPU customizer per
            part: the split and the merge, emulated). The returned dict is then ``seconds``,
            ``decode_seconds``, ``device``, ``devices`` and ``multi`` (per-device busy time, the split,
            bytes exchanged: :class:`gpuroute.crp.customize_multi.MultiStats`).

        Returns
        -------
        dict
            ``seconds`` (total), ``level_seconds`` (per level, measured on the device for the GPU),
            ``decode_seconds``, ``device``; for the GPU also ``rounds`` (Bellman-Ford rounds of the
            slowest unit, per level); ``plan``: the levels customization ran, mezzanine levels included
            (:meth:`gpuroute.crp.customize.CustomizationPlan.describe` with ``seconds`` and, on the GPU,
            ``rounds`` of each; a level's ``level_seconds`` include its mezzanine levels').

        Raises
        ------
        ValueError
            An unknown metric or device, or costs that are not positive (the overlay keeps its current
            metric: nothing is half-applied).
        GPUUnavailableError
            ``device="gpu"`` without a usable GPU.
        """
        if devices is not None:
            from .customize_multi import customize_multi

            kind = "cpu" if resolve_device(device) == "cpu" else "gpu"
            return customize_multi(self, metric, devices=devices, device_kind=kind, durations=durations)[1]
        st, info, run = self._customized(metric, device)
        st.arc_duration = arc_durations(durations, self.graph.n_arcs)
        self._state = st
        self._install_buffers(st)
        if run is not None:
            self._commit_gpu(run)
        return info

    def _install_buffers(self, st):
        """A whole customization's arrays become the current generation of the state's buffers
        (:mod:`gpuroute.crp.state_buffers`): arrays this overlay made, handed over; the arc costs may be the
        caller's or the graph's (recycled only where they own their memory and nothing references them)."""
        b = self._buffers
        b.install("arc_cost", st.arc_cost)
        b.install("metric_arc", st.metric.arc_cost)
        for name in ("turn_cost", "clique", "q_arc_cost", "q_turn_cost"):
            b.install(name, getattr(st, name), own=True)
        b.install("tree", st._tree, own=True)  # (may still be arriving from the GPU: the same array)

    def customized_state(self, metric=None, *, device="auto"):
        """A whole customization of ``metric`` into a separate state, NOT installed as the overlay's current
        one (the overlay's metric, its queries and its traffic updates are untouched): what a search that
        takes its state explicitly reads (:func:`gpuroute.crp.phantom_search.search`,
        :func:`gpuroute.crp.many_to_many.table` ``state=``), e.g. the current metric with some arcs closed
        (OSRM's ``exclude=``, :mod:`gpuroute.engine.exclude`).

        Parameters
        ----------
        metric, device
            As :meth:`customize`.

        Returns
        -------
        OverlayState
            ``metric``, ``arc_cost``, ``turn_cost``, ``clique``, ``tree`` and ``seconds`` (the
            customization's); the cost of one :meth:`customize` of every cell, and the memory of one more
            customization (cliques, trees, decoded turn costs).

        Raises
        ------
        ValueError, GPUUnavailableError
            As :meth:`customize`.

        Notes
        -----
        On the GPU it runs in the customizer's buffers without becoming the device copy that traffic
        updates start from; as for :meth:`customize`, callers run one GPU customization at a time
        (:class:`gpuroute.engine.traffic.TrafficRouter` holds its lock).
        """
        return self._customized(metric, device)[0]

    def _customized(self, metric, device):
        """One whole customization: ``(state, info, run)``, ``run`` the GPU run to commit (None on the CPU);
        nothing installed."""
        dev = resolve_device(device)
        t0 = time.perf_counter()
        if metric is None:
            g = self.graph
            name = g.default_weight
            unit = g.units.get(name) if isinstance(getattr(g, "units", None), dict) else None
            metric = Metric(g.weight(name), name=name, units=getattr(unit, "symbol", unit or ""))
        met = Metric.resolve(self.graph, metric, turns=self.turns)
        arc = np.ascontiguousarray(met.arc_cost, dtype=np.int64)
        if dev == "gpu":
            t1 = time.perf_counter()
            tcost, clique, tree, level_s, rounds, run = self._run_gpu(met, arc)
            total = time.perf_counter() - t0
            st = OverlayState(met, arc, tcost, clique, tree, total, self._qg, run.get("tree_wait"))
            return st, {"seconds": total, "decode_seconds": t1 - t0,
                        "level_seconds": self._plan.query_seconds(level_s), "device": "gpu",
                        "rounds": [rounds[q] for q in self._plan.ext_of_query],
                        "host_seconds": run["host_seconds"], "plan": self._plan_info(level_s, rounds)}, run
        tcost = np.ascontiguousarray(decode_turn_costs(met, self.turns), dtype=np.int64)
        t1 = time.perf_counter()
        clique = np.empty(int(self._topo["cq_first"][-1]), np.int64)
        tree = np.empty(int(self._tree_first[-1]), self._tree_dtype)
        level_s, plan_s = self._run_levels(tcost, clique, tree, None)
        total = time.perf_counter() - t0
        st = OverlayState(met, arc, tcost, clique, tree, total, self._qg)
        return st, {"seconds": total, "decode_seconds": t1 - t0, "level_seconds": level_s, "device": "cpu",
                    "plan": self._plan_info(plan_s)}, None

    def _plan_info(self, seconds, rounds=None):
        """The plan's levels (:meth:`gpuroute.crp.customize.CustomizationPlan.describe`) with their seconds
        (and Bellman-Ford rounds on the GPU)."""
        out = self._plan.describe()
        for q, d in enumerate(out):
            d["seconds"] = seconds[q]
            if rounds is not None:
                d["rounds"] = rounds[q]
        return out

    def update(self, arc_ids, costs, *, device="auto", durations=None):
        """Apply new costs to some arcs (live traffic) and re-customize only the cells that hold them,
        bottom-up; exact, and atomic (queries see the old metric or the new one, never a mix).

        Parameters
        ----------
        arc_ids : array_like of int, shape (k,)
            The graph's arc ids (positions in its CSR). A repeated id takes its last cost.
        costs : array_like of int, shape (k,)
            New costs in the metric's unit, positive integers below 2^31, or
            :data:`gpuroute.crp.metric.CLOSED` (int64, the named ``INF``): the arc is closed (no route, table
            or isochrone enters it; the turns into it are forbidden, as OSRM's speed 0). A later positive
            cost reopens it.
        device : {"auto", "cpu", "gpu"}
            Where the touched cells are re-customized (as :meth:`customize`).
        durations : array_like of int, shape (m,), optional
            Every arc's travel time (deciseconds, positive) under the new traffic, installed with the new
            costs in the same state (``OverlayState.arc_duration``); None keeps the current state's.

        Returns
        -------
        dict
            ``seconds``, ``cells`` (re-customized cells per level), ``level_seconds``, ``device``;
            ``copied``: the bytes and ranges this update copied per array (:class:`gpuroute.crp.state_buffers.
            CopyStats`: host buffers brought up to date, and on the GPU the device copy's, uploads, downloads);
            on the GPU from its device copy also ``device_seconds`` (``sync``, ``levels``, ``pack``, ``total``:
            CUDA events).

        Notes
        -----
        The new state is the current one's arrays with the changed ranges rewritten (the changed arcs' and
        turns' costs, the touched cells' cliques and trees), in buffers no snapshot references
        (:mod:`gpuroute.crp.state_buffers`): a query that holds the state before keeps it unchanged. The first
        update after a whole customization copies each array once (its second buffer); later ones copy only the
        ranges the update before changed. ``config.CRP_UPDATE_DIRTY_RANGES = False`` copies everything.

        Raises
        ------
        RuntimeError
            Not customized yet.
        IndexError
            An arc id outside ``[0, m)`` (named, with its position).
        ValueError
            Shapes differ, or a cost is not a positive finite integer (named, with its position).
        """
        st = self._state
        if st is None:
            raise RuntimeError("customize() the overlay before updating it")
        dev = resolve_device(device)
        t0 = time.perf_counter()
        m = self.graph.n_arcs
        ids = np.atleast_1d(np.asarray(arc_ids))
        c = np.atleast_1d(np.asarray(costs))
        if ids.ndim != 1 or c.shape != ids.shape:
            raise ValueError(f"arc_ids and costs must be 1-D of one length, got shapes {ids.shape} and {c.shape}")
        if ids.size and ids.dtype.kind not in "iu":
            raise TypeError(f"arc_ids must be integers (dtype {ids.dtype})")
        ids = ids.astype(np.int64)
        bad = (ids < 0) | (ids >= m)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise IndexError(f"arc_ids[{i}] = {int(ids[i])} is outside the arc range [0, {m})")
        if c.size and c.dtype.kind == "f":
            badf = ~np.isfinite(c) | (c != np.round(c))
            if badf.any():
                i = int(np.flatnonzero(badf)[0])
                raise ValueError(f"costs[{i}] = {c[i]!r} (arc {int(ids[i])}) is not a finite integer")
        elif c.size and c.dtype.kind not in "iu":
            raise TypeError(f"costs must be numbers (dtype {c.dtype})")
        c = c.astype(np.int64)
        dur = st.arc_duration if durations is None else arc_durations(durations, m)
        badc = ((c <= 0) | (c > np.iinfo(np.int32).max)) & (c != CLOSED)
        if badc.any():
            i = int(np.flatnonzero(badc)[0])
            raise ValueError(f"costs[{i}] = {int(c[i])} (arc {int(ids[i])}) must be a positive integer below 2^31 "
                             f"or CLOSED={CLOSED}")
        bufs = self._buffers
        bufs.stats.reset()
        dirty_only = bool(config.CRP_UPDATE_DIRTY_RANGES)
        if not dirty_only:
            bufs.forget()  # every array copied whole (config.CRP_UPDATE_DIRTY_RANGES)
        uniq = np.unique(ids)
        arc_r = index_ranges(uniq)
        # every array of the new state is the current one's with its changed ranges rewritten, in a buffer
        # no snapshot holds (gpuroute.crp.state_buffers): old snapshots stay as they were
        arc = bufs.derive("arc_cost", st.arc_cost, arc_r)
        arc[ids] = c
        tr = self.turns
        rv = tr.reverse()
        lo = np.asarray(rv.first_in[uniq], np.int64)
        cnt = np.asarray(rv.first_in[uniq + 1], np.int64) - lo  # the turns into each changed arc
        into = rv.turn_id[np.repeat(lo - np.cumsum(cnt) + cnt, cnt) + np.arange(int(cnt.sum()), dtype=np.int64)]
        into = np.asarray(into, np.int64)
        # the decoder again on those turns (a closed out-arc forbids them; reopened, they get their penalty
        # back): what decode_turn_costs of the new metric gives, without decoding every turn
        old = st.metric
        out_arc = np.asarray(tr.out_arc[into], np.int64)
        kind = np.asarray(tr.kind[into], np.int64)
        if old.turn_cost is not None:
            pen = np.asarray(old.turn_cost, np.int64)[into]
            shut = (kind == RESTRICTED) | (pen == FORBIDDEN)
        else:
            pen = np.asarray(old.turn_penalty, np.int64)[np.minimum(kind, len(old.turn_penalty) - 1)]
            shut = kind == RESTRICTED
        shut |= arc[out_arc] == CLOSED
        tvals = np.where(shut, FORBIDDEN, pen + np.where(shut, 0, arc[out_arc]))
        tcost = bufs.derive("turn_cost", st.turn_cost, index_ranges(into))
        tcost[into] = tvals
        qg = self._qg
        qa = qg["perm"][uniq]
        q_arc = bufs.derive("q_arc_cost", st.q_arc_cost, index_ranges(qa))
        q_arc[qa] = arc[uniq]
        qt = qg["tinv"][into]
        q_turn = bufs.derive("q_turn_cost", st.q_turn_cost, index_ranges(qt))
        q_turn[qt] = tvals
        met = self._updated_metric(old, arc, uniq, c)
        # an arc's cost is paid inside its head's cell, and, where it is an exit point, by the cliques of
        # its tail's cell (a clique ends by traversing the exit arc)
        hc, tc = self._topo["hc"], self._topo["tc"]
        cells = [np.unique(np.concatenate([hc[p, uniq], tc[p, uniq]])).astype(np.int64)
                 for p in range(self.n_levels)]
        tree_wait = None
        run = None
        if dev == "gpu":
            clique, tree, level_s, tree_wait, run = self._update_gpu(st, met, arc, cells, into, tvals)
        else:
            rng = update_ranges(self._plan, self._tree_first, cells)
            clique = bufs.derive("clique", st.clique, rng["clique"])
            tree = bufs.derive("tree", st.tree, rng["tree"])
            level_s, _ = self._run_levels(tcost, clique, tree, cells)
        total = time.perf_counter() - t0
        if not dirty_only:  # regathered whole, as before
            q_arc = q_turn = None
        self._state = OverlayState(met, arc, tcost, clique, tree, total, qg, tree_wait, dur, q_arc, q_turn)
        if run is not None:
            self._commit_gpu(run)
        out = {"seconds": total, "cells": [int(x.size) for x in cells], "level_seconds": level_s, "device": dev,
               "copied": bufs.stats.snapshot()}
        if run is not None and "device_seconds" in run:
            out["device_seconds"] = run["device_seconds"]
        return out

    def _updated_metric(self, old, arc, uniq, c):
        """The metric of an update: ``old`` with the arc costs ``arc`` (int64 (m,)), made without checking
        every arc again (the new costs are checked; the rest were). Its int32 costs, where no arc is closed,
        are the previous ones' buffer with the changed entries rewritten."""
        if old.arc_cost.dtype == np.int32 and not (c == CLOSED).any():
            ma = self._buffers.derive("metric_arc", old.arc_cost, index_ranges(uniq))
            ma[uniq] = arc[uniq]
            met = Metric.__new__(type(old))
            met.name, met.units = old.name, old.units
            met.arc_cost = ma
            met.turn_penalty = old.turn_penalty
            met.turn_cost = old.turn_cost
            return met
        return Metric(arc, old.turn_penalty, turn_cost=old.turn_cost, name=old.name, units=old.units)

    def _update_gpu(self, st, met, arc, cells, into, tvals):
        """An update's cells re-customized on the GPU: from the device copy of ``st`` when it holds one
        (only the changed turn costs go up, only the re-customized cells' cliques and trees come back), else
        from ``st``'s host arrays (uploaded whole). Returns (clique, tree, level seconds, the trees' wait or
        None, the run to commit)."""
        g = self._gpu()
        keep = bool(self._tree_first[-1] > 0)
        bufs = self._buffers
        if not config.CRP_UPDATE_DIRTY_RANGES:  # the whole device copy copied, every clique and tree back
            _, clique, tree, level_s, _, run = self._run_gpu(met, arc, cells, st, decode=False)
            return clique, tree, self._plan.query_seconds(level_s), run.get("tree_wait"), run
        if self._gpu_token is not st or not g.can_update(keep):
            self._gpu_token = None  # start from st's host arrays
            _, clique, tree, level_s, _, run = self._run_gpu(met, arc, cells, st, decode=False)
            bufs.install("clique", clique)
            bufs.install("tree", tree)
            return clique, tree, self._plan.query_seconds(level_s), run.get("tree_wait"), run
        rng = update_ranges(self._plan, self._tree_first, cells)
        run = g.launch_update(into, tvals, cells, rng, keep, bufs.stats)
        src_tree = st.tree  # (waits for the trees of the state before, still arriving from the GPU)
        clique = bufs.derive("clique", st.clique, rng["clique"])
        tree = bufs.derive("tree", src_tree, rng["tree"]) if keep else np.empty(0, self._tree_dtype)
        level_s, packed_clique, wait = g.finish_update(run, bufs.stats)
        c_at, t_at = run["pack_at"]  # each range's place in the packed arrays (aligned as on the device)
        cs, cd, cl = rng["clique_copy"]
        move_ranges_fast(packed_clique, c_at, clique, cd, cl)
        tree_wait = None
        if keep:
            ts, tl = rng["tree"]

            def tree_wait(wait=wait, tree=tree, ts=ts, tl=tl, t_at=t_at):
                move_ranges_fast(wait(), t_at, tree, ts, tl)

        return clique, tree, self._plan.query_seconds(level_s), tree_wait, run

    def release(self):
        """Free the GPU customizer (its device copy of the cliques, trees and buffers; made again by the next
        GPU customization, which then starts from the current state). Queries and the current metric stay."""
        self._gpu_cust = None
        self._gpu_token = None
        self._multi_cust = None  # the multi-device customizer's parts (gpuroute.crp.customize_multi)

    @property
    def arc_cost(self):
        """Current cost of every arc (int64 (m,), the metric's unit)."""
        return self._need_state().arc_cost

    @property
    def turn_cost(self):
        """Current cost of every turn (int64 (T,): penalty + cost of the out-arc; -1 forbidden)."""
        return self._need_state().turn_cost

    def _need_state(self):
        st = self._state
        if st is None:
            raise RuntimeError("the overlay is not customized: call customize(metric) first")
        return st

    # ---------------------------------------------------------------------------------------- queries
    def query(self):
        """A point-to-point query object with its own buffers (one per thread)."""
        return OverlayQuery(self)

    def route(self, source, target):
        """Shortest path ``source -> target`` honouring the metric's turn costs and restrictions.

        Returns
        -------
        PathResult
            ``distance`` (int, the metric's unit; ``INF`` if unreachable), ``nodes`` int32 (k,) and
            ``arcs`` int32 (k - 1,): the first arc's cost plus the cost of every turn along the path
            equals the distance; ``weight`` (the metric's name), ``unit`` (its
            :class:`~gpuroute.graph.units.Unit`, :func:`metric_unit`: the graph weight's own for a named
            metric, as ``shortest_path`` gives it), ``settled`` (search states scanned), ``method="crp"``.

        Raises
        ------
        IndexError
            An id outside ``[0, n)``.
        RuntimeError
            Not customized yet.
        """
        q = getattr(self, "_route_query", None)
        if q is None:
            q = self._route_query = OverlayQuery(self)
        return q.route(source, target)

    def distances(self, sources, targets):
        """Distances of the pairs ``(sources[i], targets[i])``: int64 (k,), ``INF`` where unreachable.
        Bidirectional overlay searches in parallel on the CPU (numba, one chunk of pairs per thread).

        Raises
        ------
        ValueError
            ``sources`` and ``targets`` of different lengths.
        IndexError
            An id outside ``[0, n)``.
        """
        st = self._need_state()
        n = self.graph.n_nodes
        s, _ = node_ids(n, sources, "sources")
        t, _ = node_ids(n, targets, "targets")
        if s.shape != t.shape:
            raise ValueError(f"sources and targets must pair up: {s.size} sources, {t.size} targets")
        out = np.empty(s.size, np.int64)
        if s.size == 0:
            return out
        topo = self._topo
        qg = self._qg
        chunks = int(min(s.size, numba.get_num_threads()))
        search.many(s, t, chunks, self.partition.cells, self.graph.first_out, qg["fwd_st"], self.graph.rev_first_out,
                    qg["rev_st"], qg["tfirst"], qg["tout"], st.q_turn_cost, qg["rfirst"], qg["rin"], qg["rturn"],
                    st.q_arc_cost, qg["hc"], qg["tc"], qg["entry_idx"], qg["exit_idx"], topo["cell_base"],
                    topo["ent_first"], qg["ent_st"], topo["ex_first"], qg["ex_st"], topo["cq_first"], st.clique, out)
        return out

    # ------------------------------------------------------------------------------------------ store
    def save(self, directory, *, spec=None):
        """Write the partition and the current customization (atomically) to ``directory``, in the layout
        of an overlay directory of ``gpuroute partition`` / ``gpuroute customize``
        (:func:`gpuroute.pipeline.overlay_dir.save_overlay`): ``manifest.json``, ``partition/`` and ``overlay/``.
        One name, one layout: :meth:`load`, ``gpuroute customize DIR`` and ``gpuroute route --overlay
        DIR`` read it.

        Parameters
        ----------
        directory : str or path-like
            New, empty, or an overlay directory to replace (also one in the older single-directory
            layout); anything else is refused.
        spec : str, optional
            What reopens the graph (a shipped name or a path); default: its name when it is a shipped
            dataset, else its recorded source.

        Returns
        -------
        str
            The absolute path.

        Raises
        ------
        RuntimeError
            Not customized yet.
        FileExistsError
            ``directory`` holds something else (nothing is written).
        """
        from ..pipeline.overlay_dir import save_overlay

        self._need_state()
        return save_overlay(self, directory, spec=spec)

    def _save_files(self, directory):
        """Write the customized overlay's own files (atomically) to ``directory``: the ``overlay/`` part of
        an overlay directory or of a dataset directory.

        Layout: ``manifest.json`` (format ``gpuroute-overlay``, version, graph and partition
        fingerprints, metric name and fingerprint, SHA-256 of each file) and ``cells.npy``,
        ``arc_cost.npy``, ``turn_cost.npy``, ``clique.npy`` (int32 where every value fits, else int64:
        :func:`gpuroute.store.narrowest`; read back as int64), ``tree.npy`` (the kept shortest-path trees,
        :data:`gpuroute.config.CRP_KEEP_TREES`); where customization runs on mezzanine levels, ``mezzanine.npy``
        (their partition, every level, finest first) and the lowest one's microinstructions
        (``micro_<array>.npy``, :class:`gpuroute.crp.microcode.MicroProgram`; its scalars in the manifest's
        ``mezzanine`` entry), so that :meth:`load` runs neither kaffpa nor the contraction simulation again. The topology is rebuilt from the graph on load (it is
        metric-independent and built in well under a second).
        """
        st = self._need_state()
        # the costs in int32 where their values fit (load widens them to int64 as ever; issue 20: a third of
        # the overlay's bytes); the metric's fingerprint below is of the int64 arrays, as before
        arrays = {"cells": self.partition.cells, "arc_cost": store.narrowest(st.arc_cost),
                  "turn_cost": store.narrowest(st.turn_cost), "clique": store.narrowest(st.clique), "tree": st.tree}
        mezzanine = None
        if not self._plan.identity:  # the customization's partition: loaded with the overlay, no kaffpa again
            ext = self._plan.partition
            arrays["mezzanine"] = ext.cells
            keep = ("query_levels", "refines", "mezzanine", "kahip_mode", "seed", "imbalance")
            mezzanine = {"cell_sizes": list(ext.cell_sizes), "method": ext.method,
                         "meta": {k: ext.meta[k] for k in keep if k in ext.meta}}
            if self._plan.micro is not None:  # its microinstructions too (metric-independent; seconds to build)
                mezzanine["micro"] = self._plan.micro.scalars()
                arrays.update({MICRO_PREFIX + k: v for k, v in self._plan.micro.arrays().items()})
        manifest = {
            "format": FORMAT, "version": FORMAT_VERSION,
            "graph_fingerprint": self.graph.fingerprint(), "n_nodes": int(self.graph.n_nodes),
            "n_arcs": int(self.graph.n_arcs), "graph": _graph_entry(self.graph),
            "cell_sizes": list(self.partition.cell_sizes),
            "partition_method": self.partition.method,
            "partition_fingerprint": self.partition_fingerprint,
            "turns_fingerprint": arrays_sha(self.turns.out_arc, self.turns.kind),
            # the trees' layout (mezzanine levels and microinstructions change it): load drops other layouts
            "tree_layout": arrays_sha(self._tree_first),
            # the mezzanine levels customization ran on (mezzanine.npy; None: the query levels alone)
            "mezzanine": mezzanine,
            "metric": {"name": st.metric.name, "units": st.metric.units,
                       "fingerprint": arrays_sha(st.arc_cost, st.turn_cost)},
            "files": {},
        }
        with store.atomic_directory(directory) as tmp:
            # files keyed by array name (not file name), as overlays have always been saved
            manifest["files"] = {name: store.write_array(os.path.join(tmp, name + ".npy"), a)
                                 for name, a in arrays.items()}
            store.write_manifest(tmp, manifest, what="overlay's manifest")
        return os.fspath(directory)

    @classmethod
    def load(cls, directory, graph=None):
        """Read an overlay saved by :meth:`save` (topology rebuilt, customization restored).

        Parameters
        ----------
        directory : str or path-like
            An overlay directory (:meth:`save`, or ``gpuroute partition`` + ``gpuroute customize``: its
            customization is checked to come from its partition, :func:`gpuroute.pipeline.overlay_dir.
            open_overlay`), its inner ``overlay/`` directory, or a dataset directory (``gpuroute
            build``: its ``overlay/``).
        graph : RoadGraph, optional
            The graph it was built for; default: reopened from the manifest (the shipped dataset's name
            or the recorded source path, :func:`gpuroute.open_graph`).

        Raises
        ------
        FileNotFoundError
            ``graph`` not given and the recorded one cannot be reopened.
        ValueError
            The directory is not a saved overlay, its format version differs, it was built for another
            graph (node/arc counts or fingerprint differ: named), or a file was changed or truncated (its
            SHA-256 differs: named); an overlay directory not customized yet or customized from another
            partition (:class:`gpuroute.pipeline.overlay_dir.StageError`). Nothing is returned half-read.
        """
        directory = os.fspath(directory)
        mpath = os.path.join(directory, MANIFEST)
        try:
            with open(mpath, encoding="utf-8") as f:
                man = json.load(f)
        except (OSError, ValueError) as e:
            raise ValueError(f"{directory}: not a saved overlay ({e})") from None
        fmt = man.get("format") if isinstance(man, dict) else None
        if fmt == _STAGES_FORMAT:  # the layout save() and the CLI write: check, then read its overlay/
            from ..pipeline.overlay_dir import open_overlay

            return open_overlay(directory, graph)[0]
        if fmt == _DATASET_FORMAT:
            part = (man.get("parts") or {}).get("overlay") if isinstance(man.get("parts"), dict) else None
            sub = part.get("directory") if isinstance(part, dict) else None
            if not isinstance(sub, str) or os.path.basename(sub) != sub:
                raise ValueError(f"{mpath}: a dataset directory without an overlay part (run gpuroute build again)")
            return cls.load(os.path.join(directory, sub), graph)
        if fmt != FORMAT:
            raise ValueError(f"{mpath}: not a {FORMAT} manifest")
        if man.get("version") != FORMAT_VERSION:
            raise ValueError(f"{mpath}: format version {man.get('version')}, this gpuroute reads {FORMAT_VERSION}")
        if store.INTEGRITY in man:  # overlays saved before the store recorded it open without
            store.verify_integrity(man, mpath, remedy="customize and save the overlay again")
        if graph is None:
            graph = _reopen(directory, man)
        for key, have in (("n_nodes", graph.n_nodes), ("n_arcs", graph.n_arcs), ("graph_fingerprint", graph.fingerprint())):
            if man.get(key) != have:
                raise ValueError(f"{directory}: built for another graph ({key} {man.get(key)!r}, this graph {have!r})")
        arrays = {}
        mz = man.get("mezzanine")
        if mz is not None and not (isinstance(mz, dict) and isinstance(mz.get("cell_sizes"), list)):
            raise ValueError(f"{mpath}: 'mezzanine' is not an entry with cell_sizes")
        from .microcode import MicroProgram

        names = ("cells", "arc_cost", "turn_cost", "clique", "tree") + (("mezzanine",) if mz else ())
        if mz and mz.get("micro"):
            names += tuple(MICRO_PREFIX + k for k in MicroProgram.ARRAYS)
        for name in names:
            path = os.path.join(directory, name + ".npy")
            entry = man.get("files", {}).get(name)
            if entry is None or not os.path.exists(path):
                raise ValueError(f"{directory}: {name}.npy is missing")
            if store.sha256_file(path) != entry["sha256"]:
                raise ValueError(f"{path}: changed or truncated since it was saved (SHA-256 differs)")
            arrays[name] = np.load(path, allow_pickle=False)
        part = Partition(arrays["cells"].astype(np.int32), tuple(man["cell_sizes"]), man["partition_method"],
                         topology_fingerprint(graph), meta={"loaded_from": directory})
        ext = None  # saved without mezzanine levels: config.CRP_MEZZANINE decides, as before they were saved
        if mz:
            ext = Partition(arrays["mezzanine"].astype(np.int32), tuple(mz["cell_sizes"]),
                            str(mz.get("method") or "mezzanine"), part.fingerprint,
                            meta={**(mz.get("meta") or {}), "loaded_from": directory})
        micro = None
        if mz and mz.get("micro"):
            micro = MicroProgram.from_saved({k: arrays[MICRO_PREFIX + k] for k in MicroProgram.ARRAYS}, mz["micro"])
        ov = cls(graph, part, mezzanine=ext, _micro=micro)
        if arrays_sha(ov.turns.out_arc, ov.turns.kind) != man.get("turns_fingerprint"):
            raise ValueError(f"{directory}: the graph's turns (restrictions) differ from the saved overlay's")
        if arrays["clique"].size != int(ov._topo["cq_first"][-1]) or arrays["turn_cost"].size != ov.turns.out_arc.size:
            raise ValueError(f"{directory}: clique or turn arrays do not match the rebuilt topology")
        arc_cost = arrays["arc_cost"].astype(np.int64)
        saved_tc = arrays["turn_cost"].astype(np.int64)
        # the metric's turn part (type penalties or per-turn costs) is what the saved decoded costs hold
        # beyond the out-arcs' costs: keep it as per-turn costs, so that a traffic update (on either
        # device) decodes the same turns again
        part = np.where(saved_tc == FORBIDDEN, FORBIDDEN,
                        np.maximum(saved_tc - arc_cost[ov.turns.out_arc], 0)) if saved_tc.size else saved_tc
        closed = (saved_tc == FORBIDDEN) & (ov.turns.kind != RESTRICTED)
        if saved_tc.size and ((part > 0).any() or closed.any()):
            met = Metric(arc_cost, turn_cost=part, name="custom")
        else:
            met = Metric.resolve(graph, arc_cost, turns=ov.turns)
        met.name = man.get("metric", {}).get("name") or met.name
        met.units = man.get("metric", {}).get("units") or met.units
        tree = arrays["tree"]
        layout = man.get("tree_layout")
        if tree.size != int(ov._tree_first[-1]) or tree.dtype != ov._tree_dtype or \
                (layout is not None and layout != arrays_sha(ov._tree_first)):
            # saved with CRP_KEEP_TREES set otherwise: no trees (unpacking searches the cells)
            ov._tree_first = np.zeros_like(ov._tree_first)
            tree = np.zeros(0, ov._tree_dtype)
        ov._state = OverlayState(met, arrays["arc_cost"].astype(np.int64), arrays["turn_cost"].astype(np.int64),
                           arrays["clique"].astype(np.int64), tree, 0.0, ov._qg)
        return ov

    def __repr__(self):
        return (f"Overlay({self.graph.name!r}, levels={self.n_levels}, cells={self.n_cells}, "
                f"metric={getattr(self.metric, 'name', None)!r})")


def _query_graph(graph, turns, topo):
    """The query's state numbering and every metric-independent array the query reads in it.

    States are the arcs reordered by their head's cell at every level, top level first, the boundary
    arcs of a level-0 cell before its other arcs: the states of one cell, and the entry points of one
    cell, sit next to each other, so the records a clique row touches share cache lines. ``order``
    (state -> arc) and ``perm`` (arc -> state); the turn CSR regrouped by in-state (``torder``: new turn
    position -> turn id), its reverse by out-state, and the per-state level arrays (state-major).
    """
    m = graph.n_arcs
    hc, tc = topo["hc"], topo["tc"]
    L = hc.shape[0]
    inner = hc[0] == tc[0]
    keys = [np.arange(m)] + [inner] + [hc[p] for p in range(L)]
    order = np.lexsort(keys).astype(np.int64)
    perm = np.empty(m, np.int64)
    perm[order] = np.arange(m, dtype=np.int64)

    def regroup(first, order):
        counts = np.diff(first)[order]
        nf = np.zeros(m + 1, np.int64)
        np.cumsum(counts, out=nf[1:])
        pos = np.repeat(first[:-1][order] - nf[:-1], counts) + np.arange(int(nf[-1]), dtype=np.int64)
        return nf, pos

    tfirst, torder = regroup(turns.first, order)
    tinv = np.empty(torder.size, np.int64)
    tinv[torder] = np.arange(torder.size, dtype=np.int64)
    rv = turns.reverse()
    rfirst, rorder = regroup(rv.first_in, order)
    return {
        "order": order, "perm": perm, "torder": torder,
        "fwd_st": perm.astype(np.int64), "rev_st": perm[graph.rev_arc],
        "tfirst": tfirst, "tout": perm[turns.out_arc[torder]],
        "rfirst": rfirst, "rin": perm[rv.in_arc[rorder]], "rturn": tinv[rv.turn_id[rorder]], "tinv": tinv,
        "hc": np.ascontiguousarray(hc.T[order]), "tc": np.ascontiguousarray(tc.T[order]),
        "entry_idx": np.ascontiguousarray(topo["entry_idx"].T[order]),
        "exit_idx": np.ascontiguousarray(topo["exit_idx"].T[order]),
        "ent_st": perm[topo["ent_arc"]], "ex_st": perm[topo["ex_arc"]],
    }


def _graph_entry(graph):
    """``{"name", "source"}`` of a graph, so that the CLI can reopen it (an existing source path is made
    absolute)."""
    source = graph.meta.get("source") if isinstance(graph.meta, dict) else None
    if isinstance(source, (str, os.PathLike)):
        source = os.fspath(source)
        if os.path.exists(source):
            source = os.path.abspath(source)
    else:
        source = None
    return {"name": graph.name, "source": source}


def _reopen(directory, manifest):
    """The graph a saved overlay names (dataset name first, then its source path)."""
    from .. import datasets
    from ..opener import open_graph

    entry = manifest.get("graph") if isinstance(manifest.get("graph"), dict) else {}
    name, source = entry.get("name"), entry.get("source")
    if isinstance(name, str) and name in datasets.names():
        return open_graph(name)
    if isinstance(source, str) and os.path.exists(source):
        return open_graph(source)
    raise FileNotFoundError(f"{directory}: cannot reopen the graph the overlay was built for (name {name!r}, "
                            f"source {source!r}); give the graph explicitly")


def arrays_sha(*arrays):
    """SHA-256 (hex) of arrays' dtypes, shapes and bytes, in order: the fingerprint of an overlay's parts."""
    return store.sha256_arrays(*arrays, layout=True)[:32]


class OverlayQuery:
    """Point-to-point queries on a customized :class:`Overlay`, reusing its buffers (one per thread).

    It reads the overlay's current metric at the start of each query, so a concurrent
    :meth:`Overlay.customize` or :meth:`Overlay.update` is seen whole or not at all.
    """

    def __init__(self, overlay):
        self.overlay = overlay
        m = overlay.graph.n_arcs
        self._R = search.new_records(m)
        self._touched = np.empty(m, np.int64)
        self._h = [np.empty(m, np.int64) for _ in range(4)]
        self._unp = None

    def _search(self, st, s, t):
        ov = self.overlay
        topo = ov._topo
        qg = ov._qg
        g = ov.graph
        hk, hv, hk2, hv2 = self._h
        best, meet, nt = search.bidir(
            s, t, ov.partition.cells, g.first_out, qg["fwd_st"], g.rev_first_out, qg["rev_st"], qg["tfirst"],
            qg["tout"], st.q_turn_cost, qg["rfirst"], qg["rin"], qg["rturn"], st.q_arc_cost, qg["hc"], qg["tc"],
            qg["entry_idx"], qg["exit_idx"], topo["cell_base"], topo["ent_first"], qg["ent_st"], topo["ex_first"],
            qg["ex_st"], topo["cq_first"], st.clique, self._R, self._touched, hk, hv, hk2, hv2)
        return int(best), int(meet), int(nt)

    def route_arcs(self, src_arcs, src_costs, dst_arcs, dst_costs):
        """Shortest path between phantom nodes given as arcs (segment snapping): it starts on one of
        ``src_arcs`` having already paid ``src_costs[i]`` (the part of the arc still ahead, say) and ends
        on one of ``dst_arcs``, to whose full cost ``dst_costs[j]`` is added (e.g. minus the part of the
        arc beyond the target point). Turn costs and restrictions apply between arcs as everywhere.

        Parameters
        ----------
        src_arcs, dst_arcs : array_like of int, shape (k,) and (l,)
            Graph arc ids.
        src_costs, dst_costs : array_like of int, shape (k,) and (l,)
            In the metric's unit; ``dst_costs`` may be negative.

        Returns
        -------
        (distance, arcs)
            int (``INF`` if no path) and int32 (k,): the arcs from the chosen source arc to the chosen
            target arc, both included (one arc when they coincide).

        A source arc that is also a target arc gives the one-arc path at ``src + dst`` cost: when the
        target point lies *behind* the source point on that arc, the caller must leave that pair out
        (the path then has to leave the arc and come back).

        Raises
        ------
        IndexError
            An arc id outside ``[0, m)``. ValueError: lengths differ or a list is empty.
        """
        ov = self.overlay
        st = ov._need_state()
        m = ov.graph.n_arcs
        arrs = []
        for what, a in (("src_arcs", src_arcs), ("src_costs", src_costs), ("dst_arcs", dst_arcs),
                        ("dst_costs", dst_costs)):
            a = np.atleast_1d(np.asarray(a)).astype(np.int64)
            if a.ndim != 1 or a.size == 0:
                raise ValueError(f"{what} must be a non-empty 1-D array")
            arrs.append(a)
        sa, sc, da, dc = arrs
        if sa.size != sc.size or da.size != dc.size:
            raise ValueError("each arc needs one cost (src_arcs/src_costs, dst_arcs/dst_costs)")
        for what, a in (("src_arcs", sa), ("dst_arcs", da)):
            bad = (a < 0) | (a >= m)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise IndexError(f"{what}[{i}] = {int(a[i])} is outside the arc range [0, {m})")
        qg = ov._qg
        topo = ov._topo
        cells = ov.partition.cells
        g = ov.graph
        keep = np.ascontiguousarray(cells[:, np.concatenate([g.head[sa], g.head[da]])], dtype=np.int32)
        hk, hv, hk2, hv2 = self._h
        best, meet, nt = search.bidir_states(
            keep, qg["perm"][sa], sc, qg["perm"][da], dc, qg["tfirst"], qg["tout"], st.q_turn_cost,
            qg["rfirst"], qg["rin"], qg["rturn"], qg["hc"], qg["tc"], qg["entry_idx"], qg["exit_idx"],
            topo["cell_base"], topo["ent_first"], qg["ent_st"], topo["ex_first"], qg["ex_st"], topo["cq_first"],
            st.clique, self._R, self._touched, hk, hv, hk2, hv2)
        try:
            if meet < 0 or best >= INF:
                return INF, np.zeros(0, np.int32)
            states, refs = search.chain(meet, self._R)
        finally:
            search.reset(self._R, self._touched, nt)
        return int(best), self._unpacked(st, qg["order"][states], np.where(refs >= 0, qg["torder"][np.maximum(refs, 0)], refs))

    def distance(self, source, target):
        """Distance ``source -> target`` (int; ``INF`` if unreachable). Raises IndexError on a bad id."""
        ov = self.overlay
        st = ov._need_state()
        n = ov.graph.n_nodes
        s = int(node_ids(n, source, "source")[0][0])
        t = int(node_ids(n, target, "target")[0][0])
        if s == t:
            return 0
        best, meet, nt = self._search(st, s, t)
        search.reset(self._R, self._touched, nt)
        return best

    def route(self, source, target):
        """See :meth:`Overlay.route`."""
        ov = self.overlay
        st = ov._need_state()
        g = ov.graph
        n = g.n_nodes
        s = int(node_ids(n, source, "source")[0][0])
        t = int(node_ids(n, target, "target")[0][0])
        unit = metric_unit(g, st.metric)
        name = getattr(st.metric, "name", "")
        if s == t:
            return PathResult(0, np.array([s], np.int32), np.zeros(0, np.int32), name, unit, settled=0,
                              method="crp", device="cpu")
        best, meet, nt = self._search(st, s, t)
        try:
            if meet < 0 or best >= INF:
                return PathResult(INF, np.zeros(0, np.int32), np.zeros(0, np.int32), name, unit, settled=nt,
                                  method="crp", device="cpu")
            states, refs = search.chain(meet, self._R)
            qg = ov._qg
            states = qg["order"][states]
            refs = np.where(refs >= 0, qg["torder"][np.maximum(refs, 0)], refs)
            meet = int(qg["order"][meet])
        finally:
            search.reset(self._R, self._touched, nt)
        arcs = self._unpacked(st, states, refs)
        nodes = np.empty(arcs.size + 1, np.int32)
        nodes[0] = g.tail[arcs[0]]
        nodes[1:] = g.head[arcs]
        return PathResult(best, nodes, arcs, name, unit, settled=nt, method="crp", device="cpu",
                          stats={"meet_arc": meet})

    def _unpacked(self, st, states, refs):
        """The graph arcs of a search-graph path (states as arcs, refs as turn ids or clique positions),
        every clique arc unpacked (:func:`gpuroute.crp.customize.unpack`)."""
        ov = self.overlay
        g = ov.graph
        if self._unp is None:
            mv, me, L = ov._plan.unpack_buffer_sizes()
            mv, me = mv + 1, me + 1
            self._unp = (np.empty(mv, np.int64), np.empty(mv, np.int64), np.empty(me, np.int64),
                         np.empty(me, np.int64), np.empty((L + 1) * mv + g.n_arcs, np.int64),
                         np.empty(mv, np.int64), np.empty(g.n_arcs + 1, np.int64))
        dist, par, hk, hv, stack, tmp, outbuf = self._unp
        # the customization's topology where it kept trees through mezzanine levels (the microcode cells'
        # trees cached per query object), else the overlay's
        if getattr(self, "_mc_cache", None) is None:
            self._mc_cache = {}
        refs, args = ov._plan.unpack_arrays(ov._tree_first, st.tree, st.clique, st.turn_cost, refs, self._mc_cache)
        k = unpack(states, refs, ov.turns.out_arc, *args, dist, par, hk, hv, stack, tmp, outbuf)
        return outbuf[:k].astype(np.int32)
