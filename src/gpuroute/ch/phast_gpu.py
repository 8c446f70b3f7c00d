"""PHAST on the GPU (kernels in ``phast.cu``): one-to-all trees, batched trees, tables, bounded one-to-all
and paired distances over a :class:`~gpuroute.ch.hierarchy.Hierarchy` (Delling, Goldberg, Nowatzyk,
Werneck, "PHAST: Hardware-Accelerated Shortest Path Trees", IPDPS 2011; the CU-CH query of Karimi,
Koppelman, Michael, ICS '19, sec. 3.8: the upward pass runs on the GPU too).

The hierarchy is uploaded once (:class:`GPUHierarchy`): nodes renumbered by level, top first (the core
first, in ``core`` order, so the core distance matrix needs no permutation), upward and downward in-arcs
as CSRs by head over the new ids, 32-bit weights. A pass of ``k`` sources is one CUDA graph (captured once
per pass size): fill, sources, one pull kernel per level up, the dense core step, one per level down.
Once the hierarchy's hub labels exist (``ContractionHierarchy.hub_labels()``, ``config.CH_PHAST_FROM_LABELS``)
the upward pass is the sources' forward labels written into the rows (one launch) instead.
The CPU twin is :mod:`gpuroute.ch.phast`.
"""
from __future__ import annotations

import threading

import numpy as np

from .. import config
from ..backend.flags import DINF, check_overflow
from ..backend.kernels import load_module, multiprocessors
from ..graph.constants import INF


def balanced_passes(k, per):
    """Pass size: at most ``per``, the ``k`` items split into equal passes."""
    per = max(1, int(per))
    passes = -(-max(k, 1) // per)
    return -(-max(k, 1) // passes)


def to_u32(a, what):
    """``a`` (int64, INF where unreachable) as the kernels' uint32 distances, DINF for INF.

    Raises
    ------
    OverflowError
        A finite value ``>= DINF`` (the message names ``what``).
    """
    a = np.asarray(a, dtype=np.int64)
    fin = a != INF
    if fin.any() and int(a[fin].max()) >= DINF:
        raise OverflowError(f"{what} does not fit the GPU's 32-bit distances; use device='cpu'")
    return np.where(fin, a, DINF).astype(np.uint32)


def _csr(n, key, tail, weight):
    """``(first_out int32 (n+1,), tail int32, weight uint32)``: arcs grouped by ``key`` (stable).

    Raises
    ------
    OverflowError
        A weight ``>= DINF``.
    """
    w = np.asarray(weight, dtype=np.int64)
    if w.size and int(w.max()) >= DINF:
        raise OverflowError("a hierarchy arc weight does not fit the GPU's 32-bit distances; use device='cpu'")
    order = np.argsort(key, kind="stable")
    fo = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(key, minlength=n), out=fo[1:])
    return fo.astype(np.int32), tail[order].astype(np.int32), w[order].astype(np.uint32)


def host_layout(h):
    """The GPU's layout of hierarchy ``h``, on the host (the kernels' twin in CI): nodes renumbered by level, top
    first, the core first in ``h.core``'s order.

    Returns
    -------
    SimpleNamespace
        ``pos`` int64 (n,) node -> new id; ``c``; ``levels_down`` list of ``(lo, hi)`` new-id ranges of the non-core
        levels, top first (contiguous from ``c`` to ``n``); ``up`` / ``down``: ``(first_out int32 (n+1,), tail
        int32, weight uint32)``, the upward in-arcs (tail at a lower level) and the downward in-arcs (tail at a
        higher level or in the core) as CSRs by head over the new ids, core-core arcs left out (the core step's);
        ``up_out``: the upward arcs as a CSR by tail (``(first_out, head, weight)``).

    Raises
    ------
    OverflowError
        A weight that does not fit 32 bits.
    """
    from types import SimpleNamespace

    n = h.n_nodes
    core = h.core.astype(np.int64)
    c = core.size
    in_core = np.zeros(n, dtype=bool)
    in_core[core] = True
    lvl = h.level.astype(np.int64)
    rest = np.flatnonzero(~in_core)
    rest = rest[np.lexsort((rest, -lvl[rest]))]  # levels from the top down, ties by id
    new_order = np.concatenate([core, rest])  # new id -> node
    pos = np.empty(n, dtype=np.int64)
    pos[new_order] = np.arange(n)
    levels = []
    if rest.size:
        lv = lvl[rest]
        cuts = np.flatnonzero(np.diff(lv)) + 1
        starts = np.concatenate([[0], cuts]) + c
        ends = np.concatenate([cuts, [rest.size]]) + c
        levels = [(int(a), int(b)) for a, b in zip(starts, ends, strict=True)]
    # upward in-arcs: up arcs u -> v (rank v > rank u) except core-core, as a CSR by head (new ids)
    ut = np.repeat(np.arange(n, dtype=np.int64), np.diff(h.up_first_out))
    uh = h.up_head.astype(np.int64)
    keep = ~(in_core[ut] & in_core[uh])
    up = _csr(n, pos[uh[keep]], pos[ut[keep]], h.up_weight[keep])
    # the same arcs as a CSR by tail, for the one-block upward search of a single source
    up_out = _csr(n, pos[ut[keep]], pos[uh[keep]], h.up_weight[keep])
    # downward in-arcs: down arcs u -> v (rank u > rank v), stored at head v, except core-core
    dh = np.repeat(np.arange(n, dtype=np.int64), np.diff(h.down_first_out))
    dt = h.down_tail.astype(np.int64)
    keep = ~(in_core[dt] & in_core[dh])
    down = _csr(n, pos[dh[keep]], pos[dt[keep]], h.down_weight[keep])
    return SimpleNamespace(n=n, c=c, pos=pos, levels_down=levels, up=up, up_out=up_out, down=down)


def merged_down(lay, k, merge=None, cost=None):
    """The downward pass of a pass of ``k`` sources over :func:`host_layout` ``lay`` with its levels merged into
    phases (:func:`gpuroute.ch.phast.merge_phases`; ``merge``: levels a phase, 0 by the cost model; default
    ``config.CH_PHAST_MERGE_LEVELS``). Returns ``(phases, (first_out int32, tail int32, weight uint32))``,
    ``phases`` a list of ``(lo, hi, lg)``: new-id range and ``2**lg`` lanes an item (``rph_level``).

    Raises
    ------
    OverflowError
        A merged arc's weight (a sum of hierarchy weights) that does not fit 32 bits.
    """
    from .phast import lanes_lg, merge_phases, phase_cost

    merge = int(config.CH_PHAST_MERGE_LEVELS if merge is None else merge)
    cost = phase_cost() if cost is None else np.asarray(cost, dtype=np.float64)
    fo, tl, w = lay.down
    lb = np.array([lo for lo, _ in lay.levels_down] + [lay.n], dtype=np.int64)
    bounds, mfo, mtl, mw = merge_phases(lay.c, lb, fo.astype(np.int64), tl, w.astype(np.int64), levels=merge, k=k,
                                        cost=cost)
    if mfo[-1] >= 2**31:
        raise OverflowError("the merged downward pass has 2^31 arcs or more; lower config.CH_PHAST_MERGE_LEVELS")
    if mw.size and int(mw.max()) >= DINF:
        raise OverflowError("a merged downward arc (a sum of hierarchy weights) does not fit the GPU's 32-bit "
                            "distances; use device='cpu' or config.CH_PHAST_MERGE_LEVELS = 1")
    phases = []
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        lg = int(lanes_lg(int(mfo[hi] - mfo[lo]), hi - lo, int(k), int(cost[3]), int(cost[4])))
        phases.append((int(lo), int(hi), lg))
    return phases, (mfo.astype(np.int32), mtl.astype(np.int32), mw.astype(np.uint32))


class GPUHierarchy:
    """A hierarchy on the GPU, with its captured PHAST passes.

    Parameters
    ----------
    ch : ContractionHierarchy

    Raises
    ------
    OverflowError
        A hierarchy weight or core distance that does not fit the kernels' 32-bit distances.
    GPUUnavailableError
        Without a usable GPU.
    """

    #: The current pass's start (:meth:`_start_mode`, its bit mask or None): the fill until a pass is made.
    _pass_start = ("fill", None)

    def __init__(self, ch):
        import cupy as cp

        from ..backend import resolve_device

        resolve_device("gpu")
        self.cp = cp
        self.ch = ch
        h = ch.h
        self.n = h.n_nodes
        c = self.c = int(h.core.size)
        lay = self.layout = host_layout(h)
        self.pos_host = pos = lay.pos
        self.levels_down = lay.levels_down  # top first
        self.levels_up = lay.levels_down[::-1]  # level 0 first
        ufo, utl, uw = lay.up
        dfo, dtl, dw = lay.down
        D = to_u32(h.core_dist, "a core distance") if c else None
        self.up_fo_host, self.down_fo_host = ufo, dfo
        self.up = tuple(cp.asarray(a) for a in (ufo, utl, uw))
        self.down = tuple(cp.asarray(a) for a in (dfo, dtl, dw))
        self.up_out = tuple(cp.asarray(a) for a in lay.up_out)
        self.D = cp.asarray(D.ravel()) if c else cp.zeros(1, dtype=cp.uint32)
        self.pos = cp.asarray(pos.astype(np.int32))
        self.mod = load_module("ch/phast.cu")
        self.total_bytes = int(cp.cuda.runtime.memGetInfo()[1])
        self.k_sources = self.mod.get_function("ph_sources")
        self._unroll()  # the setting checked before anything runs
        self.k_levels = {u: self.mod.get_function(f"ph_level{u}" if u > 1 else "ph_level") for u in (1, 4, 8, 16)}
        # the same pulls with an item's own distance from the upward pass's bit mask ("m") or the sources ("s")
        self.k_levels_init = {(u, m): self.mod.get_function(f"ph_level{u}{m}") for u in (4, 8, 16) for m in "ms"}
        self.k_label_up_m = self.mod.get_function("ph_label_up_m")
        self.k_core = self.mod.get_function("ph_core")
        self.k_warp = self.mod.get_function("ph_level_warp")
        self.k_up_search = self.mod.get_function("ph_up_search")
        self.k_gather = self.mod.get_function("ph_gather")
        self.k_gather64 = self.mod.get_function("ph_gather64")
        self.k_lanes = None  # rph_level of rphast.cu (the merged phases' pull, 2**lg lanes an item), on first use
        self._merged = {}  # (merge, k, cost, max levels) -> (phases (lo, hi, lg), (fo, tl, w) on the device)
        self.k_table = self.mod.get_function("ph_table")
        self.k_pairs = self.mod.get_function("ph_pairs")
        self.k_label_up = self.mod.get_function("ph_label_up")
        self._lidpos = None  # (labels, int32 device array: label id -> renumbered node)
        self.flags = cp.zeros(8, dtype=cp.int32)
        cp.cuda.Device().synchronize()  # the uploads above ran on the default stream, the passes will not
        # non-blocking: work other threads put on the legacy default stream must not synchronise with this
        # stream while it is capturing a pass (a CUDA error); every public call synchronises it before
        # returning instead
        self.stream = cp.cuda.Stream(non_blocking=True)
        # one caller at a time: the passes (captured graphs and their rows), the flags and the stream are
        # shared by every call (the service's worker threads share one hierarchy)
        self.lock = threading.RLock()
        self.tpb = int(config.CH_PHAST_THREADS)
        self.sms = multiprocessors()
        self._passes = {}  # k -> (graph, d, src buffer)
        self._search_buf = None  # stamp + two frontiers of the one-source upward search (3n int32)
        cp.cuda.Device().synchronize()

    @property
    def n_levels(self):
        return len(self.levels_down) + (1 if self.c else 0)

    # ------------------------------------------------------------------ one pass
    def _labels(self):
        """``(GPUHubLabels, lidpos)`` when the upward pass can come from hub labels (built for this
        hierarchy, 32-bit distances, ``config.CH_PHAST_FROM_LABELS``), else None."""
        if not config.CH_PHAST_FROM_LABELS:
            return None
        from .query import built_hub_labels

        lab = built_hub_labels(self.ch.h)
        if lab is None or lab.dist.dtype != np.int32:
            return None
        gl = self.ch._gpu_labels()
        if self._lidpos is None or self._lidpos[0] is not lab:
            self._lidpos = (lab, self.cp.asarray(self.pos_host[lab.lid_node].astype(np.int32)))
        return gl, self._lidpos[1]

    def _source_ids(self, sources):
        """What a pass's source buffer holds for ``sources``: renumbered nodes, or label ids on the label
        path."""
        if self._labels() is not None:
            return self._lidpos[0].node_lid[sources].astype(np.int32)
        return self.pos_host[sources].astype(np.int32)

    def _pass(self, k):
        """The captured CUDA graph of a pass of ``k`` sources: ``(graph, d (n * k,), src (k,))``; ``src``
        holds :meth:`_source_ids`."""
        # the downward pass's phases follow the config of the call (the benchmark switches them)
        key = (k, self._labels() is not None, config.CH_PHAST_MERGE_LEVELS, config.CH_PHAST_MERGE_MAX_K,
               config.CH_PHASE_STEP_US, config.CH_PHASE_BYTES_PER_US, config.CH_PHASE_ITER_US,
               config.CH_PHASE_MAX_LEVELS, config.CH_PHAST_LANES_MAX_K, config.CH_PHAST_MAX_LANES,
               config.CH_PHAST_UP_SEARCH, config.CH_PHAST_NO_FILL)
        if key in self._passes:
            return self._passes[key]
        cp = self.cp
        self._passes.clear()  # one pass size at a time: free the other's rows
        with self.stream:  # ordered with the pass's launches on this (non-blocking) stream
            d = cp.empty(self.n * k, dtype=cp.uint32)
            src = cp.zeros(k, dtype=cp.int32)
        s = self.stream
        up_plan = self._up_plan(k)
        down_plan, down_arcs = self._down_plan(k)
        mode = self._start_mode(up_plan, down_plan)
        with s:
            mask = cp.empty(self.n * ((k + 31) // 32), dtype=cp.uint32) if mode == "mask" else None
        self._pass_start = (mode, mask)
        with s:
            s.begin_capture()
            starts = self._start_rows(k, d, src)
            self._launch_plan(up_plan, k, self.up, d, src)
            if self.c:
                self._core(k, d)
            self._launch_plan(down_plan, k, down_arcs, d)
            graph = s.end_capture()
        self.launches = (starts + len(up_plan) + len(down_plan) + (1 if self.c else 0)
                         + sum(p[0] == "search" for p in up_plan))
        # what the benchmark reports: the downward launches and the arcs they read (merged or not)
        self.down_launches, self.down_arcs = len(down_plan), int(down_arcs[1].size)
        self._passes[key] = (graph, d, src)
        return self._passes[key]

    @staticmethod
    def _start_mode(up_plan, down_plan):
        """How a pass's rows start. ``"fill"``: every row filled with DINF, then the sources' zeros (not on the
        label path: a label holds its own node at distance 0). With ``config.CH_PHAST_NO_FILL`` and pulls of 4 or
        more in-arcs in flight throughout: ``"mask"`` on the label path (only the core's rows filled; the labels
        set a bit per (hub, source) item below the core, which the downward pulls read instead of their own
        rows: ``ph_label_up_m``, ``ph_level*m``), ``"sources"`` for the upward pass pulled level by level (it
        writes every row, its first reads of an item's own distance being 0 at the source, else DINF:
        ``ph_level*s``): the n x k fill and the downward pass's reads of rows no label wrote are gone."""
        if not config.CH_PHAST_NO_FILL:
            return "fill"
        if up_plan[0][0] == "labels":
            return "mask" if all(p[0] == "level" and p[3] > 1 for p in down_plan) else "fill"
        return "sources" if all(p[0] == "level" and p[3] > 1 for p in up_plan) else "fill"

    def _start_rows(self, k, d, src):
        """Launch the current pass's start (:meth:`_start_mode`) on the current stream; returns its launches."""
        mode, mask = self._pass_start
        if mode == "sources":
            return 0
        if mode == "mask":
            if self.c:
                d[:self.c * k].fill(DINF)
            mask.fill(0)
            return 1 + bool(self.c)
        d.fill(DINF)
        if self._labels() is not None:
            return 1
        tpb = self.tpb
        self.k_sources(((k + tpb - 1) // tpb,), (tpb,), (np.int32(k), src, d))
        return 2

    def _up_plan(self, k):
        """The upward pass: the sources' forward hub labels where :meth:`_labels` allows (one launch); for
        one source and ``config.CH_PHAST_UP_SEARCH``, one block searching the upward search space
        (``ph_up_search``); else a pull launch per level, then the core's level."""
        if self._labels() is not None:
            return [("labels", 0, 0, 0)]
        if k == 1 and config.CH_PHAST_UP_SEARCH:
            return [("search", 0, self.n, 0)]
        return self._plan(self.levels_up + ([(0, self.c)] if self.c else []), k, self.up_fo_host)

    def _plan(self, ranges, k, fo_host):
        """Launches of a pass over level ``ranges`` (in order), one per level: a thread per (node, source)
        item, or, for few sources and levels whose nodes average at least
        ``config.CH_PHAST_WARP_DEGREE`` in-arcs (the top levels), a warp per item."""
        plan = []
        warp_deg = float(config.CH_PHAST_WARP_DEGREE)
        unroll = self._unroll()
        deep, deep_deg = int(config.CH_PHAST_DEEP_UNROLL), float(config.CH_PHAST_DEEP_DEGREE)
        if deep not in (0, 8, 16):
            raise ValueError(f"config.CH_PHAST_DEEP_UNROLL must be 0, 8 or 16, got {deep}")
        for lo, hi in ranges:
            arcs = int(fo_host[hi] - fo_host[lo])
            mean = arcs / (hi - lo) if hi > lo else 0.0
            if k < 32 and hi > lo and mean >= warp_deg:
                plan.append(("warp", lo, hi, 0))
            elif deep and hi > lo and mean >= deep_deg:
                plan.append(("level", lo, hi, deep))
            else:
                plan.append(("level", lo, hi, unroll))
        return plan

    @staticmethod
    def _unroll():
        unroll = int(config.CH_PHAST_LEVEL_UNROLL)
        if unroll not in (1, 4):
            raise ValueError(f"config.CH_PHAST_LEVEL_UNROLL must be 1 or 4, got {unroll}")
        return unroll

    def _down_plan(self, k):
        """The downward pass of ``k`` sources: ``(plan, arcs)``. With ``config.CH_PHAST_MERGE_LEVELS`` 1, a launch
        per level over the downward in-arcs (:meth:`_plan`); else a ``rph_level`` launch per phase of merged levels
        (:func:`merged_down`: 0, phases by the cost model for ``k`` sources, rounded up to a power of two; m, m levels
        a phase) over the merged in-arcs (uploaded once per phase plan; up to 12 kept). A pass of more than
        ``config.CH_PHAST_MERGE_MAX_K`` sources (when not 0) runs a launch per level whatever the merge setting: there
        the pass is bandwidth-bound and the merged arcs' extra bytes cost more than the launches they save."""
        from .phast import lanes_lg, phase_cost

        merge = int(config.CH_PHAST_MERGE_LEVELS)
        max_k = int(config.CH_PHAST_MERGE_MAX_K)
        if max_k < 0:
            raise ValueError(f"config.CH_PHAST_MERGE_MAX_K must be >= 0 (0: no bound), got {max_k}")
        if merge == 1 or 0 < max_k < k:
            return self._plan(self.levels_down, k, self.down_fo_host), self.down
        cost = phase_cost()
        # the cost model plans for pass sizes by powers of two (planning NY takes ~0.7 s on the host's 16 cores, ~8 s
        # on a loaded 2-core machine: once per size class and hierarchy); the lanes follow the pass's own size
        kp = min(1 << (k - 1).bit_length(), 1024)
        key = (merge, kp if merge == 0 else 0, tuple(cost.tolist()), int(config.CH_PHASE_MAX_LEVELS))
        got = self._merged.get(key)
        if got is None:
            phases, arcs = merged_down(self.layout, kp, merge, cost)
            if len(self._merged) >= 12:
                self._merged.clear()
            got = self._merged[key] = ([(lo, hi) for lo, hi, _ in phases], arcs[0],
                                       tuple(self.cp.asarray(a) if a.size else self.cp.zeros(1, dtype=a.dtype)
                                             for a in arcs))
            self.cp.cuda.Device().synchronize()  # uploaded before any pass (on its own stream) reads them
        ranges, fo, dev = got
        plan = [("lanes", lo, hi, int(lanes_lg(int(fo[hi] - fo[lo]), hi - lo, k, int(cost[3]), int(cost[4]))))
                for lo, hi in ranges]
        if self.k_lanes is None:
            if self.tpb % 32:
                raise ValueError(f"config.CH_PHAST_THREADS must be a multiple of 32 for merged phases, got {self.tpb}")
            self.k_lanes = load_module("ch/rphast.cu").get_function("rph_level")
        return plan, dev

    def _core(self, k, d):
        """The dense core step: enough blocks to spread one source's c x c step (a-slices of the rows), each
        slice's reached distances and ids (8 bytes a row) within 48 KiB of shared memory."""
        c = self.c
        ct = min(1024, max(32, -(-c // 32) * 32))
        bx = (c + ct - 1) // ct
        chunks = max(1, min(32, -(-4 * self.sms // (bx * k)), c), min(c, -(-8 * c // 49152)))
        per = -(-c // chunks)
        self.k_core((bx, k, chunks), (ct,), (np.int32(c), np.int32(k), self.D, d, self.flags), shared_mem=8 * per)

    def _launch_plan(self, plan, k, arcs, d, src=None):
        """Launch ``plan``'s steps (the upward pass when ``src`` is given, else the downward) on the current
        stream, each pull reading an item's own distance as the current pass's start says."""
        fo, tl, w = arcs
        tpb = self.tpb
        i32 = np.int32
        mode, mask = self._pass_start
        init = {"mask": (None if src is not None else mask), "sources": src}.get(mode)
        for kind, lo, hi, lg in plan:
            items = (hi - lo) * k
            if kind == "labels":
                gl, lidpos = self._labels()
                if mode == "mask":
                    self.k_label_up_m((k,), (128,), (i32(k), i32(self.c), src, gl.node, gl.hub, gl.dist, lidpos, d,
                                                     mask))
                else:
                    self.k_label_up((k,), (128,), (i32(k), src, gl.node, gl.hub, gl.dist, lidpos, d))
            elif kind == "search":
                if self._search_buf is None:
                    self._search_buf = self.cp.empty(3 * self.n, dtype=self.cp.int32)
                n = self.n
                stamp, q0, q1 = self._search_buf[:n], self._search_buf[n:2 * n], self._search_buf[2 * n:]
                stamp.fill(0)
                ofo, ohd, ow = self.up_out
                self.k_up_search((1,), (1024,), (i32(self.c), src, ofo, ohd, ow, d, stamp, q0, q1, self.flags))
            elif kind == "lanes":
                threads = items << lg
                self.k_lanes(((threads + tpb - 1) // tpb,), (tpb,), (i32(lo), i32(hi), i32(k), i32(lg), fo, tl, w, d,
                                                                     self.flags))
            elif kind == "level" and init is not None:
                self.k_levels_init[lg, "m" if mode == "mask" else "s"](
                    ((items + tpb - 1) // tpb,), (tpb,), (i32(lo), i32(hi), i32(k), fo, tl, w, d, self.flags, init))
            elif kind == "level":
                args = (i32(lo), i32(hi), i32(k), fo, tl, w, d, self.flags)
                self.k_levels[lg](((items + tpb - 1) // tpb,), (tpb,), args + ((d,) if lg > 1 else ()))
            else:
                self.k_warp(((items * 32 + tpb - 1) // tpb,), (tpb,), (i32(lo), i32(hi), i32(k), fo, tl, w, d,
                                                                        self.flags))

    def profile(self, sources):
        """Per-launch times (us) of one pass over ``sources``, run launch by launch with CUDA events (not
        the captured graph): a list of ``(phase, first node, nodes, microseconds)`` in order, phase
        "up", "core" or "down" (the paper's Fig. 12, per level)."""
        cp = self.cp
        k = int(sources.size)
        _, d, src = self._pass(k)
        up_plan = self._up_plan(k)
        down_plan, down_arcs = self._down_plan(k)
        out = []
        ev = [cp.cuda.Event() for _ in range(2)]

        def timed(label, lo, nodes, fn):
            ev[0].record(self.stream)
            with self.stream:
                fn()
            ev[1].record(self.stream)
            ev[1].synchronize()
            out.append((label, lo, nodes, cp.cuda.get_elapsed_time(ev[0], ev[1]) * 1e3))

        with self.stream:
            src.set(self._source_ids(sources), stream=self.stream)
            timed("start", 0, self.n, lambda: self._start_rows(k, d, src))
        for phase, plan, arcs in (("up", up_plan, self.up), ("down", down_plan, down_arcs)):
            if phase == "down" and self.c:
                timed("core", 0, self.c, lambda: self._core(k, d))
            for item in plan:
                _, lo, hi, _ = item
                timed(f"{phase}-{item[0]}", lo, hi - lo,
                      lambda item=item, arcs=arcs: self._launch_plan([item], k, arcs, d, src))
        return out

    def _run(self, sources, check=True):
        """Run one pass over ``sources`` (int64, k of them); returns the node-major rows ``d``. With
        ``check``, clear the overflow flag first and wait for it after (OverflowError); without, the
        caller cleared it before its passes and calls :meth:`_check` after the last (one wait per query)."""
        cp = self.cp
        k = int(sources.size)
        graph, d, src = self._pass(k)
        with self.stream:
            src.set(self._source_ids(sources), stream=self.stream)
            if check:
                self.flags.fill(0)
        graph.launch(self.stream)
        if check:
            self._check()
        return d, cp

    def _check(self):
        host = self.flags.get(stream=self.stream)
        self.stream.synchronize()
        check_overflow(host)

    def _pass_size(self, k):
        """Sources a pass: ``config.CH_PHAST_BATCH_ITEMS`` items (node x source), at most a 32nd of the device's
        memory in items (the distance rows take an 8th, the pass's output as much again), passes equal."""
        items = min(int(config.CH_PHAST_BATCH_ITEMS), self.total_bytes // 32)
        return balanced_passes(k, items // max(self.n, 1))

    # ------------------------------------------------------------------ queries
    def tree(self, sources, want_pred, dtype="int64", to_host=True):
        """See :meth:`_tree` (thread-safe: one call at a time per hierarchy)."""
        with self.lock:
            out = self._tree(sources, want_pred, dtype, to_host)
            self.stream.synchronize()
            return out

    def _tree(self, sources, want_pred, dtype="int64", to_host=True):
        """Distances (k, n) of the k sources (int64 with INF, or uint32 with INF_U32) and, with
        ``want_pred``, canonical predecessors (k, n) int32; NumPy when ``to_host``."""
        cp = self.cp
        k = int(sources.size)
        n = self.n
        wide = dtype != "uint32" and not want_pred  # the int64 rows straight from the gather
        out = cp.empty((k, n), dtype=cp.int64 if wide else cp.uint32)
        gather = self.k_gather64 if wide else self.k_gather
        per = self._pass_size(k)
        with self.stream:
            self.flags.fill(0)
        for lo in range(0, k, per):
            chunk = sources[lo:lo + per]
            d, _ = self._run(chunk, check=False)
            kk = int(chunk.size)
            with self.stream:
                gather(((n + 31) // 32, (kk + 31) // 32), (32, 8), (np.int32(n), np.int32(kk), self.pos, d, out[lo:lo + kk]))
        self._check()
        if wide:
            return (out.get() if to_host else out), None
        out32 = out
        pred = None
        if want_pred:
            from ..backend.device_graph import DeviceGraph
            from ..backend.predecessors import canonical_predecessors

            dg = DeviceGraph.shared(self.ch.graph, self.ch.weight)
            pred = canonical_predecessors(dg, out32, self.stream)
        if dtype == "uint32":
            dist = out32
        else:
            from ..backend.predecessors import widen

            dist = widen(out32, self.stream)
        self.stream.synchronize()
        if to_host:
            dist = dist.get()
            pred = pred.get() if pred is not None else None
        return dist, pred

    def table(self, sources, targets, dtype="int64", to_host=True):
        """See :meth:`_table` (thread-safe: one call at a time per hierarchy)."""
        with self.lock:
            out = self._table(sources, targets, dtype, to_host)
            self.stream.synchronize()
            return out

    def _table(self, sources, targets, dtype="int64", to_host=True):
        """Distances (|S|, |T|) (see :meth:`ContractionHierarchy.table`)."""
        cp = self.cp
        k, t = int(sources.size), int(targets.size)
        out32 = cp.empty((k, t), dtype=cp.uint32)
        tpos = cp.asarray(self.pos_host[targets].astype(np.int32))
        per = self._pass_size(k)
        tpb = self.tpb
        with self.stream:
            self.flags.fill(0)
        for lo in range(0, k, per):
            chunk = sources[lo:lo + per]
            d, _ = self._run(chunk, check=False)
            kk = int(chunk.size)
            with self.stream:
                self.k_table((((t * kk) + tpb - 1) // tpb,), (tpb,),
                             (np.int32(t), np.int32(kk), tpos, d, out32[lo:lo + kk]))
        self._check()
        if dtype == "uint32":
            res = out32
        else:
            from ..backend.predecessors import widen

            res = widen(out32, self.stream)
            self.stream.synchronize()
        return res.get() if to_host else res

    def distances(self, sources, targets):
        """See :meth:`_distances` (thread-safe: one call at a time per hierarchy)."""
        with self.lock:
            out = self._distances(sources, targets)
            self.stream.synchronize()
            return out

    def _distances(self, sources, targets):
        """Paired distances (k,) int64 (CuPy): PHAST passes over the distinct sources, each gathering the
        targets of its pairs."""
        cp = self.cp
        m = int(sources.size)
        with self.stream:  # ordered before the pair kernels on this (non-blocking) stream
            out32 = cp.full(m, DINF, dtype=cp.uint32)
        uniq, inv = np.unique(sources, return_inverse=True)
        tpos = cp.asarray(self.pos_host[targets].astype(np.int32))
        per = self._pass_size(uniq.size)
        tpb = self.tpb
        with self.stream:
            self.flags.fill(0)
        for lo in range(0, uniq.size, per):
            chunk = uniq[lo:lo + per]
            d, _ = self._run(chunk, check=False)
            slot = np.where((inv >= lo) & (inv < lo + chunk.size), inv - lo, -1).astype(np.int32)
            with self.stream:
                self.k_pairs(((m + tpb - 1) // tpb,), (tpb,),
                             (np.int32(m), np.int32(chunk.size), cp.asarray(slot), tpos, d, out32))
        from ..backend.predecessors import widen

        res = widen(out32, self.stream)
        self._check()
        return res

    def within(self, source, bound):
        """See :meth:`_within` (thread-safe: one call at a time per hierarchy)."""
        with self.lock:
            out = self._within(source, bound)
            self.stream.synchronize()
            return out

    def _within(self, source, bound):
        """``(nodes int32, dist int64)`` with distance <= ``bound``, sorted by node id (NumPy)."""
        cp = self.cp
        dist, _ = self._tree(np.asarray([source], dtype=np.int64), False, dtype="int64", to_host=False)
        with self.stream:  # the row was written on this (non-blocking) stream
            row = dist[0]
            nodes = cp.flatnonzero(row <= bound)
            vals = row[nodes]
            return nodes.get(stream=self.stream).astype(np.int32), vals.get(stream=self.stream)
