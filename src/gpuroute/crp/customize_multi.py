"""Customization on several devices: the cells of the lower levels split across GPUs in whole subtrees, the
levels above gathered on one device; the same cliques and trees as one device, bit for bit.

Follows Delling, Kobitzsch, Werneck, "Customizing Driving Directions with GPUs" (Euro-Par 2014), sec. 5:
"[the implementation] can use multiple GPUs in a single machine simply by allocating all top-level cells
(and their subcells) among them so as to balance the (estimated) work. This approach requires no GPU to
GPU communication during customization."

Design (what was chosen, and why)
---------------------------------
* **Split.** The cells of one *split level* (a query level of the overlay; default: the highest level with
  at least ``config.CRP_MULTI_CELLS_PER_PART`` cells per part -- the paper's top level when it has enough
  cells) are the roots of subtrees. Each subtree's work is estimated as ``sum over its cells (entry points x
  (search-graph edges + vertices))`` (a Bellman-Ford or a Dijkstra per entry point over the cell's graph;
  boundary pairs x arcs), and the subtrees are assigned to parts by longest-processing-time first (the
  heaviest subtree to the least loaded part; ties by lowest id: deterministic). Part ``i`` runs on
  ``devices[i % len(devices)]`` (more parts than devices: a one-GPU test of the split and the merge).
* **Parts.** A part is a self-contained customization problem in its own numbering: the levels up to the
  split level (mezzanine levels and a microcode level included) restricted to its subtrees -- vertices,
  search-graph edges, entry and exit points, clique and tree offsets renumbered cell by cell, clique
  references rewritten to the part's own clique array, turn ids to the part's own turn table, arc ids to
  its own arcs. It is built once (NumPy, metric-independent) and run by the unchanged one-device
  customizers: :class:`gpuroute.crp.customize_gpu.GPUCustomizer` prepares its device arrays (uploaded once,
  on its device) and the kernels of ``customize.cu`` run it; on the CPU, :func:`customize_level` and
  :func:`gpuroute.crp.microcode.run`. Inside a cell the numbering keeps the order of the overlay's, so every
  cell computes exactly what it computes in a one-device customization (Bellman-Ford distances are exact;
  the GPU's trees pick the smallest tight edge, the CPU's the Dijkstra's last relaxed edge, both counted
  from the cell's first edge): cliques and trees are equal bit for bit.
* **Results and gather.** Each device copies its parts' cliques (the query levels', in the overlay's layout)
  and trees back to the host itself, run by run (a run: consecutive cells of the one-device layout),
  asynchronously on a copy stream of its own once its levels are done, so the copies back use every device's
  link and overlap the other devices' levels, the gather and the upper levels (the next run's levels wait for
  them). Where levels remain above
  the split level, the parts' split-level cliques -- all those levels read -- are copied to the gather
  device ``devices[0]`` (``cudaMemcpyPeerAsync`` on its stream after an event of the part's device; no copy
  for a part on the gather device) and scattered into the one-device clique layout there; the upper levels
  run there, in that layout, by the same kernels, and their cliques and trees are copied back from there.
  With the split at the top level (the paper's choice) the devices exchange nothing. ``bytes_peer`` = 8 x the
  split-level clique entries of the parts not on the gather device (0 without upper levels). The call
  returns once the cliques are on the host; ``OverlayState.tree`` waits for the trees' copies.
* **CPU emulation** (``device_kind="cpu"``): the same parts, the same gather into the one-device layout and
  the same upper levels, each part by the CPU customizer, one after the other (``devices`` are virtual ids):
  what CI checks without a GPU.

Entry points: :class:`MultiCustomizer` (set up once per overlay, devices and split; :meth:`~MultiCustomizer.run`
per metric), :func:`customize_multi` (``Overlay.customize(metric, devices=[...])`` calls it).
"""
from __future__ import annotations

import dataclasses
import time

import numpy as np

from .. import config
from .customize import customize_level
from .topology import LevelGraph

__all__ = ["MultiCustomizer", "MultiStats", "Part", "customize_multi", "split_cells", "check_devices"]

DEVICE_KINDS = ("gpu", "cpu")


# ------------------------------------------------------------------------------------------ validation
def check_devices(devices, device_kind="gpu"):
    """``devices`` as a tuple of distinct ints, checked against the GPUs CuPy sees (``device_kind="gpu"``).

    Parameters
    ----------
    devices : sequence of int
        CUDA device ids (``"gpu"``) or virtual device ids (``"cpu"``: any distinct non-negative ints).
    device_kind : {"gpu", "cpu"}

    Returns
    -------
    tuple of int

    Raises
    ------
    TypeError
        ``devices`` is not a sequence of ints (names the bad entry).
    ValueError
        Empty, a duplicate (names both positions), a negative id, or an unknown ``device_kind``.
    GPUUnavailableError
        ``"gpu"`` without a usable GPU.
    IndexError
        A GPU id CuPy does not see (names the id and the ids there are).
    """
    if device_kind not in DEVICE_KINDS:
        raise ValueError(f"device_kind must be one of {DEVICE_KINDS}, got {device_kind!r}")
    if isinstance(devices, (str, bytes)) or not hasattr(devices, "__iter__"):
        raise TypeError(f"devices must be a sequence of device ids (ints), got {devices!r}")
    out = []
    seen = {}
    for i, d in enumerate(devices):
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"devices[{i}] = {d!r} is not an int device id")
        d = int(d)
        if d < 0:
            raise ValueError(f"devices[{i}] = {d} is negative (device ids count from 0)")
        if d in seen:
            raise ValueError(f"devices[{i}] = {d} repeats devices[{seen[d]}]: each device once")
        seen[d] = i
        out.append(d)
    if not out:
        raise ValueError("devices is empty: give at least one device id")
    if device_kind == "gpu":
        from ..backend import resolve_device

        resolve_device("gpu")
        import cupy as cp

        n = cp.cuda.runtime.getDeviceCount()
        for i, d in enumerate(out):
            if d >= n:
                raise IndexError(f"devices[{i}] = {d}: no such GPU (CuPy sees {n}: ids 0..{n - 1})")
    return tuple(out)


# ------------------------------------------------------------------------------------------ the split
def _ranges(starts, counts):
    """Concatenated ``arange(starts[i], starts[i] + counts[i])`` (int64)."""
    counts = np.asarray(counts, np.int64)
    tot = int(counts.sum())
    if tot == 0:
        return np.zeros(0, np.int64)
    return np.repeat(np.asarray(starts, np.int64) - np.cumsum(counts) + counts, counts) + np.arange(tot, dtype=np.int64)


def _runs(local, glob, length):
    """Copies ``(local start, global start, length)`` int64 (r, 3): consecutive ranges merged where both
    sides continue (ranges in local order), empty ones left out."""
    keep = length > 0
    ls, gs, ln = local[keep], glob[keep], length[keep]
    if ln.size == 0:
        return np.zeros((0, 3), np.int64)
    brk = np.flatnonzero((gs[1:] != gs[:-1] + ln[:-1]) | (ls[1:] != ls[:-1] + ln[:-1])) + 1
    starts = np.concatenate([[0], brk])
    return np.stack([ls[starts], gs[starts], np.add.reduceat(ln, starts)], axis=1).astype(np.int64)


def _members(ids, n):
    """The distinct values of ``ids`` (ints in ``[0, n)``), ascending, int64 (a mask: O(n), no sort)."""
    mark = np.zeros(max(int(n), 0), bool)
    mark[ids] = True
    return np.flatnonzero(mark).astype(np.int64)


def _ancestors(part_cells, q, qs):
    """Level-``qs`` cell (level-local id) of every level-``q`` cell of the nested partition ``part_cells``
    (int32 (levels, n))."""
    n_q = int(part_cells[q].max()) + 1 if part_cells.shape[1] else 0
    anc = np.zeros(n_q, np.int64)
    anc[part_cells[q]] = part_cells[qs]
    return anc


def cell_work(topo, q):
    """Estimated work of every cell of plan level ``q``: entry points x (search-graph edges + vertices),
    int64 (cells,) -- one Bellman-Ford or Dijkstra per entry point over the cell's graph."""
    lg = topo["levels"][q]
    ent_first, _ = topo["level_first"][q]
    vf = lg.vert_first
    edges = lg.e_first[vf[1:]] - lg.e_first[vf[:-1]]
    return np.diff(ent_first).astype(np.int64) * (edges + np.diff(vf))


def split_cells(work, n_parts):
    """Longest processing time first: subtree ``i`` (work ``work[i]``) to the least loaded part.

    Returns
    -------
    int64 (len(work),)
        The part of each subtree (heaviest first to the lowest load; ties: the lower subtree id, the lower
        part). Parts may stay empty when there are fewer subtrees than parts.
    """
    work = np.asarray(work, np.int64)
    order = np.lexsort((np.arange(work.size), -work))
    load = np.zeros(n_parts, np.int64)
    owner = np.empty(work.size, np.int64)
    for i in order:
        p = int(np.argmin(load))
        owner[i] = p
        load[p] += work[i]
    return owner


@dataclasses.dataclass
class Part:
    """The levels up to the split level restricted to some subtrees, in the part's own numbering.

    Attributes
    ----------
    index, device : int
        The part's number and the device id it runs on.
    roots : int64
        Its split-level cells (level-local ids of the plan's split level).
    cells : list of int64 arrays
        Per plan level ``0..split``, its cells (level-local ids of the plan, ascending).
    topo : dict
        ``cell_base``, ``n_cells``, ``cq_first``, ``levels`` (:class:`~gpuroute.crp.topology.LevelGraph`),
        ``level_first``: the layout of :func:`gpuroute.crp.topology.build_topology`, local.
    tree_first : int64 (local cells + 1,)
        Its trees' layout (sizes equal to the overlay's for the same cells).
    turns : int64 (T_p,)
        The global turn ids the part reads (ascending): local turn ``t`` is ``turns[t]``.
    turn_kind : uint8 (T_p,), turn_out : int32 (T_p,)
        Their kinds and out-arcs as local arc ids (positions in ``arcs``).
    arcs : int64 (A_p,)
        The global arc ids whose costs the part reads (ascending).
    micro : MicroProgram or None
        The microinstructions of its plan level 0 where the plan runs them.
    clique_pos : int64 (C_p,)
        Position, in the plan's clique array, of each of the part's clique entries.
    split_first : int
        Its first clique entry of the split level (the split level's cliques are ``[split_first, C_p)``:
        what the levels above read).
    clique_runs : int64 (r, 3)
        ``(local start, position in the overlay's clique array, length)`` of its query levels' cliques (a
        mezzanine level's are the customization's only), in runs of consecutive cells: the copies back.
    tree_runs : int64 (r, 3)
        ``(local start, global start, length)`` of its trees in runs of consecutive cells.
    work : int
        Estimated work (:func:`cell_work`).
    """

    index: int
    device: int
    roots: np.ndarray
    cells: list
    topo: dict
    tree_first: np.ndarray
    turns: np.ndarray
    turn_kind: np.ndarray
    turn_out: np.ndarray
    arcs: np.ndarray
    micro: object
    clique_pos: np.ndarray
    split_first: int
    clique_runs: np.ndarray
    tree_runs: np.ndarray
    work: int

    @property
    def n_clique(self):
        return int(self.topo["cq_first"][-1])

    @property
    def n_tree(self):
        return int(self.tree_first[-1])


def _restrict_level(lg, ent_first, ex_first, cells, remap_ref):
    """One plan level's search graph restricted to ``cells`` (ascending level-local ids), cells renumbered
    ``0..k-1`` in that order, vertices and edges keeping their order within each cell; ``remap_ref`` maps
    the edges' references. Returns (LevelGraph, local ent_first, local ex_first)."""
    vf = lg.vert_first
    S = np.asarray(cells, np.int64)
    nv = vf[S + 1] - vf[S]
    lvf = np.zeros(S.size + 1, np.int64)
    np.cumsum(nv, out=lvf[1:])
    shift = lvf[:-1] - vf[S]                       # local vertex = global vertex + shift of its cell
    gv = _ranges(vf[S], nv)
    e0 = lg.e_first[vf[S]]
    ne = lg.e_first[vf[S + 1]] - e0
    ge = _ranges(e0, ne)
    deg = lg.e_first[gv + 1] - lg.e_first[gv]
    lef = np.zeros(gv.size + 1, np.int64)
    np.cumsum(deg, out=lef[1:])
    e_to = (lg.e_to[ge].astype(np.int64) + np.repeat(shift, ne)).astype(np.int32)
    e_ref = remap_ref(lg.e_ref[ge])
    nent = ent_first[S + 1] - ent_first[S]
    nex = ex_first[S + 1] - ex_first[S]
    lent = np.zeros(S.size + 1, np.int64)
    lex = np.zeros(S.size + 1, np.int64)
    np.cumsum(nent, out=lent[1:])
    np.cumsum(nex, out=lex[1:])
    ent_vert = (lg.ent_vert[_ranges(ent_first[S], nent)].astype(np.int64) + np.repeat(shift, nent)).astype(np.int32)
    ex_vert = (lg.ex_vert[_ranges(ex_first[S], nex)].astype(np.int64) + np.repeat(shift, nex)).astype(np.int32)
    none = np.zeros(0, np.int32)
    out = LevelGraph(vert_first=lvf, vert_arc=lg.vert_arc[gv], vhead_of=none, vexit_of=none, e_first=lef,
                     e_to=e_to, e_ref=np.ascontiguousarray(e_ref, np.int64), ent_vert=ent_vert, ex_vert=ex_vert)
    return out, lent, lex


def build_part(plan, tree_first, turns, qs, cells_by_level, index, device, work):
    """A :class:`Part`: plan levels ``0..qs`` restricted to ``cells_by_level`` (see the class)."""
    from . import microcode

    topo = plan.topo
    cb = topo["cell_base"]
    cq = topo["cq_first"]
    nlev = qs + 1
    counts = [int(c.size) for c in cells_by_level]
    lcb = np.zeros(nlev + 1, np.int64)
    np.cumsum(counts, out=lcb[1:])
    gcells = np.concatenate([cb[q] + cells_by_level[q] for q in range(nlev)]).astype(np.int64)
    csize = cq[gcells + 1] - cq[gcells]
    lcq = np.zeros(gcells.size + 1, np.int64)
    np.cumsum(csize, out=lcq[1:])
    tsize = tree_first[gcells + 1] - tree_first[gcells]
    ltf = np.zeros(gcells.size + 1, np.int64)
    np.cumsum(tsize, out=ltf[1:])
    levels, level_first = [], []
    tu = np.zeros(0, np.int64)
    for q in range(nlev):
        lg = topo["levels"][q]
        ent_first, ex_first = topo["level_first"][q]
        if q == 0:
            refs = lg.e_ref[_ranges(lg.e_first[lg.vert_first[cells_by_level[0]]],
                                    lg.e_first[lg.vert_first[cells_by_level[0] + 1]]
                                    - lg.e_first[lg.vert_first[cells_by_level[0]]])]
            if refs.size and int(refs.min()) < 0:
                raise AssertionError("the lowest plan level's edges must all be turns")
            tu = _members(refs, turns.out_arc.size)

            def remap(ref, tu=tu):
                return np.searchsorted(tu, ref).astype(np.int64)
        else:
            below = np.full(int(topo["n_cells"][q - 1]), -1, np.int64)
            below[cells_by_level[q - 1]] = np.arange(counts[q - 1], dtype=np.int64) + lcb[q - 1]
            g0 = int(cb[q - 1])

            def remap(ref, below=below, g0=g0):
                if ref.size and int(ref.max()) >= 0:
                    raise AssertionError("the upper plan levels' edges must all be cliques")
                pos = -ref - 1
                g = np.searchsorted(cq, pos, side="right") - 1
                loc = below[g - g0]
                if loc.size and int(loc.min()) < 0:
                    raise AssertionError("a cell's search graph reads a clique outside its subtree (not nested)")
                return -(lcq[loc] + (pos - cq[g])) - 1
        lgl, lent, lex = _restrict_level(lg, ent_first, ex_first, cells_by_level[q], remap)
        levels.append(lgl)
        level_first.append((lent, lex))
    arcs = _members(turns.out_arc[tu], int(turns.kind.size and turns.out_arc.max()) + 1)
    turn_out = np.searchsorted(arcs, turns.out_arc[tu]).astype(np.int32)
    ptopo = {"cell_base": lcb, "n_cells": tuple(counts), "cq_first": lcq, "levels": levels, "level_first": level_first}
    micro = None
    if plan.micro is not None and counts[0]:
        ent0, ex0 = level_first[0]
        micro = microcode.build_program(levels[0], ent0, ex0, lcq[:counts[0] + 1], int(config.CRP_MICRO_SMEM_BYTES) // 8)
    clique_pos = _ranges(cq[gcells], csize)
    tree_runs = _runs(ltf[:-1], tree_first[gcells], tsize)
    # the query levels' cliques in the overlay's layout: plan position - a + qa on query level p
    shift = np.zeros(gcells.size, np.int64)
    query = np.zeros(gcells.size, bool)
    for q in range(nlev):
        p = int(plan.query_of_ext[q])
        if p >= 0:
            a, qa, _ = plan.q_slices[p]
            shift[lcb[q]:lcb[q + 1]] = qa - a
            query[lcb[q]:lcb[q + 1]] = True
    clique_runs = _runs(lcq[:-1][query], cq[gcells][query] + shift[query], csize[query])
    return Part(index=index, device=device, roots=cells_by_level[qs], cells=list(cells_by_level), topo=ptopo,
                tree_first=ltf, turns=tu, turn_kind=np.ascontiguousarray(turns.kind[tu], np.uint8), turn_out=turn_out,
                arcs=arcs, micro=micro, clique_pos=clique_pos, split_first=int(lcq[lcb[qs]]), clique_runs=clique_runs,
                tree_runs=tree_runs, work=int(work))


# ------------------------------------------------------------------------------------------ statistics
@dataclasses.dataclass
class MultiStats:
    """What one multi-device customization did (set-up fields filled once, run fields per run).

    Attributes
    ----------
    device_kind : str
        ``"gpu"`` or ``"cpu"`` (emulation: ``busy_seconds`` are CPU seconds of each part, run one after
        the other).
    devices : tuple of int
    gather_device : int
        ``devices[0]``: where the split level's cliques are gathered and the upper levels run.
    split_level : int
        The query level whose cells are the subtrees' roots.
    split_plan_level : int
        The same level in the customization plan (mezzanine levels counted).
    parts : list of dict
        Per part: ``device``, ``roots`` (split-level cells), ``cells`` (per plan level up to the split),
        ``work`` (estimated), ``clique_entries`` (``split_clique_entries`` of them on the split level),
        ``tree_entries``, ``turns``, ``arcs``, ``clique_runs`` and ``tree_runs`` (copies back).
    upper_cells : list of int
        Cells per plan level above the split level (run on the gather device).
    work_per_device, cells_per_device : dict
        Estimated work and cells (all levels up to the split) per device id.
    imbalance : float
        Largest device work / mean device work (1.0: perfectly balanced).
    setup_seconds : float
        Building the parts and the per-device structures (once).
    busy_seconds : dict
        Per device id: device time of its parts (CUDA events from its first kernel, after the metric's
        upload, to the end of its last level; CPU: seconds of its parts). Filled by a run.
    level_seconds : dict
        Per device id: seconds per plan level of its parts (summed over parts on one device).
    gather_seconds, upper_seconds : float
        On the gather device: from the end of its own parts to the last split-level clique scattered (or,
        without upper levels, to the end of the slowest device: waits included), and the levels above the
        split.
    device_seconds : float
        From the gather device's first kernel to the end of the upper levels (GPU: CUDA events; the
        customization's device time, as the one-device path's ``sum(level_seconds)``: the metric's upload
        excluded, the devices' overlap and the gather's waits included).
    bytes_peer : int
        Cliques copied device to device: 8 bytes per split-level clique entry of a part not on the gather
        device, where levels above the split remain; 0 otherwise.
    bytes_h2d, bytes_d2h : int
        The metric uploaded (each part's arc costs, per-turn costs, penalties) and the results copied back
        by all devices together (the query levels' cliques and the trees). 0 on the CPU.
    peer_access : dict
        GPU: per device id other than the gather device, whether the gather device has peer access to it
        (copies are staged through the host by CUDA where not).
    seconds : float
        Wall time of the run (the caller's view, trees possibly still arriving).
    rounds : dict
        GPU: per device id, per plan level, the most Bellman-Ford rounds of any unit.
    """

    device_kind: str
    devices: tuple
    gather_device: int
    split_level: int
    split_plan_level: int
    parts: list
    upper_cells: list
    work_per_device: dict
    cells_per_device: dict
    imbalance: float
    setup_seconds: float = 0.0
    busy_seconds: dict = dataclasses.field(default_factory=dict)
    level_seconds: dict = dataclasses.field(default_factory=dict)
    gather_seconds: float = 0.0
    upper_seconds: float = 0.0
    device_seconds: float = 0.0
    bytes_peer: int = 0
    bytes_h2d: int = 0
    bytes_d2h: int = 0
    seconds: float = 0.0
    rounds: dict = dataclasses.field(default_factory=dict)
    peer_access: dict = dataclasses.field(default_factory=dict)

    def as_dict(self):
        """A JSON-ready dict (device ids as string keys)."""
        d = dataclasses.asdict(self)
        for k in ("work_per_device", "cells_per_device", "busy_seconds", "level_seconds", "rounds", "peer_access"):
            d[k] = {str(a): b for a, b in d[k].items()}
        d["devices"] = list(self.devices)
        return d


# ------------------------------------------------------------------------------------------ the driver
def _auto_split(plan, n_parts):
    """The highest query level with at least ``CRP_MULTI_CELLS_PER_PART x n_parts`` cells, else level 0."""
    need = int(config.CRP_MULTI_CELLS_PER_PART) * n_parts
    L = len(plan.ext_of_query)
    for p in range(L - 1, -1, -1):
        if int(plan.topo["n_cells"][plan.ext_of_query[p]]) >= need:
            return p
    return 0


class MultiCustomizer:
    """An overlay's customization split across devices (see the module docstring): set up once, run per
    metric.

    Parameters
    ----------
    overlay : gpuroute.crp.Overlay
    devices : sequence of int
        Distinct device ids (:func:`check_devices`); ``devices[0]`` gathers and runs the upper levels.
    device_kind : {"gpu", "cpu"}
        ``"cpu"``: the CPU customizer per part (emulation; ``devices`` are virtual ids).
    split_level : int, optional
        Query level whose cells root the subtrees (``0 <= split_level < overlay.n_levels``); default: the
        highest level with at least ``config.CRP_MULTI_CELLS_PER_PART`` cells per part.
    parts : int, optional
        Number of parts (default ``len(devices)``); part ``i`` runs on ``devices[i % len(devices)]``.

    Raises
    ------
    TypeError, ValueError, IndexError, GPUUnavailableError
        Bad ``devices`` (:func:`check_devices`), a ``split_level`` or ``parts`` out of range (named).
    """

    def __init__(self, overlay, devices, *, device_kind="gpu", split_level=None, parts=None):
        t0 = time.perf_counter()
        self.devices = check_devices(devices, device_kind)
        self.device_kind = device_kind
        self.overlay = overlay
        plan = overlay._plan
        self.plan = plan
        L = len(plan.ext_of_query)
        if parts is None:
            parts = len(self.devices)
        if isinstance(parts, (bool, np.bool_)) or not isinstance(parts, (int, np.integer)) or parts < len(self.devices):
            raise ValueError(f"parts = {parts!r}: must be an int >= len(devices) = {len(self.devices)}")
        self.n_parts = int(parts)
        if split_level is None:
            split_level = _auto_split(plan, self.n_parts)
        if isinstance(split_level, (bool, np.bool_)) or not isinstance(split_level, (int, np.integer)) \
                or not 0 <= split_level < L:
            raise ValueError(f"split_level = {split_level!r}: must be a query level in [0, {L})")
        self.split_level = int(split_level)
        qs = int(plan.ext_of_query[self.split_level])
        self.qs = qs
        topo = plan.topo
        self.tree_first = np.asarray(overlay._tree_first, np.int64)
        self.tree_dtype = np.dtype(overlay._tree_dtype)
        self.keep_tree = bool(self.tree_first[-1] > 0)
        pc = plan.partition.cells
        n_roots = int(topo["n_cells"][qs])
        work = np.zeros(n_roots, np.int64)
        ancs = []
        for q in range(qs + 1):
            anc = _ancestors(pc, q, qs)
            ancs.append(anc)
            np.add.at(work, anc, cell_work(topo, q))
        owner = split_cells(work, self.n_parts)
        self.parts = []
        for i in range(self.n_parts):
            mine = owner == i
            if not mine.any():
                continue
            cells = [np.flatnonzero(mine[ancs[q]]).astype(np.int64) for q in range(qs + 1)]
            dev = self.devices[i % len(self.devices)]
            self.parts.append(build_part(plan, self.tree_first, overlay.turns, qs, cells, i, dev, int(work[mine].sum())))
        self.gather_device = self.devices[0]
        self.upper = list(range(qs + 1, plan.n_ext))
        # the upper query levels' slices of the plan's cliques: (plan offset, overlay offset, length)
        self.upper_slices = [plan.q_slices[int(plan.query_of_ext[q])] for q in self.upper if plan.query_of_ext[q] >= 0]
        wpd = {d: 0 for d in self.devices}
        cpd = {d: 0 for d in self.devices}
        for pt in self.parts:
            wpd[pt.device] += pt.work
            cpd[pt.device] += int(sum(c.size for c in pt.cells))
        mean = sum(wpd.values()) / max(len(wpd), 1)
        self.stats = MultiStats(
            device_kind=device_kind, devices=self.devices, gather_device=self.gather_device,
            split_level=self.split_level, split_plan_level=qs,
            parts=[{"part": pt.index, "device": pt.device, "roots": int(pt.roots.size),
                    "cells": [int(c.size) for c in pt.cells], "work": pt.work, "clique_entries": pt.n_clique,
                    "tree_entries": pt.n_tree, "turns": int(pt.turns.size), "arcs": int(pt.arcs.size),
                    "clique_runs": int(pt.clique_runs.shape[0]), "tree_runs": int(pt.tree_runs.shape[0]),
                    "split_clique_entries": pt.n_clique - pt.split_first} for pt in self.parts],
            upper_cells=[int(topo["n_cells"][q]) for q in self.upper], work_per_device=wpd, cells_per_device=cpd,
            imbalance=float(max(wpd.values()) / mean) if mean > 0 else 1.0)
        self._gpu = None
        if device_kind == "gpu":
            self._gpu = _GPUParts(self)
        self.stats.setup_seconds = time.perf_counter() - t0

    # -------------------------------------------------------------------------------------------- run
    def run(self, met, arc, tcost):
        """Customize every cell for the resolved metric ``met``.

        Parameters
        ----------
        met : gpuroute.crp.Metric
            Resolved (``turn_penalty`` int64 (4,), ``turn_cost`` per-turn costs or None).
        arc : int64 (m,)
            Its arc costs.
        tcost : int64 (T,) or None
            The decoded turn costs (needed by the CPU emulation; the GPU decodes on each device).

        Returns
        -------
        (clique int64 (C,), tree (TT,), tree_wait or None, MultiStats)
            The overlay's cliques (query levels) and trees in the one-device layouts; ``tree_wait`` waits
            for the trees' copies (GPU).
        """
        if self._gpu is not None:
            return self._gpu.run(met, arc)
        return self._run_cpu(tcost)

    def _run_cpu(self, tcost):
        from . import microcode

        t0 = time.perf_counter()
        plan = self.plan
        topo = plan.topo
        cb, cq = topo["cell_base"], topo["cq_first"]
        st = self.stats
        st.busy_seconds = {d: 0.0 for d in self.devices}
        st.level_seconds = {d: [0.0] * (self.qs + 1) for d in self.devices}
        clique = np.empty(int(self.overlay._topo["cq_first"][-1]), np.int64)  # the host's, the overlay's layout
        ext = np.empty(max(plan.n_ext_clique, 1), np.int64) if self.upper else None  # on the gather device
        tree = np.empty(int(self.tree_first[-1]), self.tree_dtype)
        peer = 0
        for pt in self.parts:
            tb = time.perf_counter()
            tl = np.ascontiguousarray(tcost[pt.turns])
            cl = np.empty(max(pt.n_clique, 1), np.int64)
            tr = np.empty(max(pt.n_tree, 1), self.tree_dtype)
            lcb, lcq = pt.topo["cell_base"], pt.topo["cq_first"]
            for q, lg in enumerate(pt.topo["levels"]):
                tq = time.perf_counter()
                nc = int(lcb[q + 1] - lcb[q])
                if q == 0 and pt.micro is not None:
                    microcode.run(pt.micro, tl, cl)
                elif nc:
                    ent_first, ex_first = pt.topo["level_first"][q]
                    customize_level(np.arange(nc, dtype=np.int64), lg.vert_first, lg.e_first, lg.e_to, lg.e_ref,
                                    ent_first, lg.ent_vert, ex_first, lg.ex_vert, lcq[lcb[q]:lcb[q + 1] + 1], tl, cl,
                                    cl, pt.tree_first[lcb[q]:lcb[q + 1] + 1], tr)
                st.level_seconds[pt.device][q] += time.perf_counter() - tq
            st.busy_seconds[pt.device] += time.perf_counter() - tb
            # its cliques and trees back to the host, run by run; the split level's to the gather device
            for a, g, n in pt.clique_runs:
                clique[g:g + n] = cl[a:a + n]
            for a, g, n in pt.tree_runs:
                tree[g:g + n] = tr[a:a + n]
            if ext is not None:
                sl = slice(pt.split_first, pt.n_clique)
                ext[pt.clique_pos[sl]] = cl[sl]
                if pt.device != self.gather_device:
                    peer += 8 * (pt.n_clique - pt.split_first)
        tu = time.perf_counter()
        empty = np.zeros(1, np.int64)
        for q in self.upper:
            lg = topo["levels"][q]
            ent_first, ex_first = topo["level_first"][q]
            customize_level(np.arange(int(topo["n_cells"][q]), dtype=np.int64), lg.vert_first, lg.e_first, lg.e_to,
                            lg.e_ref, ent_first, lg.ent_vert, ex_first, lg.ex_vert, cq[cb[q]:cb[q + 1] + 1], empty, ext,
                            ext, self.tree_first[cb[q]:cb[q + 1] + 1], tree)
        for a, qa, n in self.upper_slices:
            clique[qa:qa + n] = ext[a:a + n]
        st.upper_seconds = time.perf_counter() - tu
        st.bytes_peer = peer
        st.bytes_h2d = 0
        st.bytes_d2h = 0
        st.gather_seconds = 0.0
        st.device_seconds = time.perf_counter() - t0
        st.seconds = st.device_seconds
        st.rounds = {}
        return clique, tree, None, st


class _GPUParts:
    """The device side of a :class:`MultiCustomizer`: per part, a :class:`GPUCustomizer` of the part (its
    arrays uploaded once on its device), its clique and tree buffers, pinned upload buffers; on the gather
    device the one-device clique array, receive buffers, scatter indices and the upper levels' customizer."""

    def __init__(self, mc):
        import cupy as cp
        import cupyx

        from .customize_gpu import GPUCustomizer

        self.cp = cp
        self.mc = mc
        plan = mc.plan
        topo = plan.topo
        u = mc.gather_device
        self.streams = {}
        # per device a second stream for the copies back: a part's cliques and trees leave while the other
        # devices, the gather and the upper levels run (the paper's sec. 5 overlaps them); the next run's
        # levels wait for them (self.copied)
        self.copy_streams = {}
        self.copied = {}
        for d in mc.devices:
            with cp.cuda.Device(d):
                self.streams[d] = cp.cuda.Stream(non_blocking=True)
                self.copy_streams[d] = cp.cuda.Stream(non_blocking=True)
        # peer access from the gather device to every other one (copies work without it, staged)
        self.peer_access = {}
        for d in mc.devices:
            if d == u:
                continue
            ok = bool(cp.cuda.runtime.deviceCanAccessPeer(u, d))
            if ok:
                with cp.cuda.Device(u):
                    try:
                        cp.cuda.runtime.deviceEnablePeerAccess(d)
                    except cp.cuda.runtime.CUDARuntimeError as e:  # already enabled
                        if "PeerAccessAlreadyEnabled" not in str(e):
                            raise
            self.peer_access[d] = ok
        self.parts = []
        for pt in mc.parts:
            fake_turns = _Turns(pt.turn_kind, pt.turn_out)
            fake_plan = _Plan(pt.topo, pt.micro)
            view = _OverlayView(fake_plan, pt.tree_first, mc.tree_dtype, fake_turns)
            with cp.cuda.Device(pt.device):
                cz = GPUCustomizer(view)
                entry = {
                    "part": pt, "cz": cz,
                    "clique": cp.empty(max(pt.n_clique, 1), np.int64),
                    "tree": cp.empty(max(pt.n_tree, 1) if mc.keep_tree else 1, mc.tree_dtype),
                    "tcost": cp.empty(max(pt.turns.size, 1), np.int64),
                    "arc32": cp.empty(max(pt.arcs.size, 1), np.int32),
                    "arc": cp.empty(max(pt.arcs.size, 1), np.int64),
                    "pin32": cupyx.empty_pinned((max(pt.arcs.size, 1),), np.int32),
                }
            if mc.upper:  # what the gather device needs: where the part's split-level cliques go
                n_split = pt.n_clique - pt.split_first
                with cp.cuda.Device(u):
                    idx = pt.clique_pos[pt.split_first:]
                    entry["pos"] = cp.asarray(idx.astype(np.int32 if plan.n_ext_clique < 2**31 else np.int64))
                    entry["recv"] = cp.empty(max(n_split, 1), np.int64) if pt.device != u else None
            self.parts.append(entry)
        with cp.cuda.Device(u):
            self.ext = cp.empty(max(plan.n_ext_clique, 1) if mc.upper else 1, np.int64)
            self.upper_tree = cp.empty(max(int(mc.tree_first[-1]), 1) if mc.keep_tree and mc.upper else 1,
                                       mc.tree_dtype)
            self.upper_cz = None
            if mc.upper:
                q0 = mc.upper[0]
                utopo = {"cell_base": topo["cell_base"][q0:], "cq_first": topo["cq_first"],
                         "levels": topo["levels"][q0:], "level_first": topo["level_first"][q0:],
                         "n_cells": topo["n_cells"][q0:]}
                view = _OverlayView(_Plan(utopo, None), mc.tree_first, mc.tree_dtype,
                                    _Turns(np.zeros(0, np.uint8), np.zeros(0, np.int32)))
                self.upper_cz = GPUCustomizer(view)
        self.n_query_clique = int(mc.overlay._topo["cq_first"][-1])

    @staticmethod
    def _levels(cp, cz, clique, tree, tcost, keep, events):
        """The level loop of :meth:`GPUCustomizer.launch` (full run) over ``cz``'s levels, on the current
        device and stream; an event after each level appended to ``events``."""
        cz.rounds.fill(0)
        for p, lv in enumerate(cz.levels):
            if lv is None:  # microinstructions
                mi = cz.micro
                md = mi["dev"]
                nb = int(mi["all"].size)
                if nb:
                    cz.k_micro((nb,), (mi["threads"],),
                               (mi["all"], md["b_arc_first"], md["ai_turn"], md["ai_pos"], md["b_lay_first"],
                                md["lay_word"], md["words"], md["b_wide"], md["b_scr"], md["b_out_first"], md["o_pos"],
                                md["o_dst"], np.int32(mi["prog"].a_bits), np.int32(mi["prog"].db_bits), tcost, clique,
                                mi["scratch"]), shared_mem=mi["smem"])
            else:
                d = lv["dev"]
                E = lv["n_edges"]
                if E:  # (the push kernel's levels read their costs in forward order)
                    cz.k_aggregate(((E + 255) // 256,), (256,), (np.int64(E), d["f_ref" if lv["push"] else "r_ref"], tcost,
                                                               clique, cz.ecost))
                nu = lv["n_units"]
                if nu:
                    cz.launch_level(p, nu, d["all_units"], (d["u_cell"], d["u_i0"], d["u_g"], d["u_scr"]), clique, tree,
                                    keep, cz.threads)
            e = cp.cuda.Event()
            e.record()
            events.append(e)

    def run(self, met, arc):
        """:meth:`launch` then :meth:`finish`."""
        return self.finish(self.launch(met, arc))

    def launch(self, met, arc):
        """Start one customization on every device (asynchronous); :meth:`finish` waits for the cliques."""
        cp = self.cp
        import cupyx

        t0 = time.perf_counter()
        mc = self.mc
        plan = mc.plan
        u = mc.gather_device
        keep = mc.keep_tree
        a64 = np.asarray(arc)
        fits = bool(a64.size == 0 or (int(a64.max()) < 2**31 and int(a64.min()) >= 0))
        pen = np.ascontiguousarray(met.turn_penalty, np.int64)
        has = met.turn_cost is not None
        h2d = 0
        # the host's share first (each part's arc costs gathered into its pinned buffer), so that no device
        # waits for the host while another runs
        order = sorted(self.parts, key=lambda e: e["part"].device != u)  # the gather device's parts first
        host = []
        for e in order:
            pt = e["part"]
            if fits:
                np.copyto(e["pin32"][:pt.arcs.size], a64[pt.arcs], casting="unsafe")
                a = None
            else:
                a = np.ascontiguousarray(a64[pt.arcs], np.int64)
            o = np.ascontiguousarray(np.asarray(met.turn_cost)[pt.turns], np.int64) if has else None
            host.append((a, o))
        # the parts, each on its device's stream (asynchronous): the metric's upload, then (the device time
        # from here, as one device's) decode and levels
        first_event = {}
        for e, (a, o) in zip(order, host, strict=True):
            pt, cz = e["part"], e["cz"]
            d = pt.device
            s = self.streams[d]
            with cp.cuda.Device(d), s:
                if d in self.copied:  # the previous run's copies of these buffers are done first
                    s.wait_event(self.copied[d])
                if fits:
                    e["arc32"].set(e["pin32"], stream=s)
                    e["arc"][...] = e["arc32"]
                    h2d += 4 * int(pt.arcs.size)
                else:
                    e["arc"].set(a, stream=s)
                    h2d += 8 * int(pt.arcs.size)
                pen_d = cp.asarray(pen)
                ovr = cp.asarray(o) if has else cp.zeros(1, np.int64)
                h2d += 32 + (8 * int(pt.turns.size) if has else 0)
                ev = [cp.cuda.Event()]
                ev[0].record()
                first_event.setdefault(d, ev[0])
                T = int(pt.turns.size)
                if T:
                    cz.k_decode(((T + 255) // 256,), (256,), (np.int64(T), cz.kind, cz.out_arc, e["arc"], pen_d, ovr,
                                                             np.int32(has), e["tcost"]))
                self._levels(cp, cz, e["clique"], e["tree"], e["tcost"], keep, ev)
                e["events"] = ev
                e["keep_alive"] = (pen_d, ovr)
        # every part's query-level cliques and trees back to the host from its own device, run by run
        clique = cupyx.empty_pinned((self.n_query_clique,), np.int64)
        tree = cupyx.empty_pinned((int(mc.tree_first[-1]),), mc.tree_dtype) if keep else np.empty(0, mc.tree_dtype)
        clique_events, tree_events = [], []
        d2h = 0
        isz = mc.tree_dtype.itemsize
        copied = {}
        for e in self.parts:
            pt = e["part"]
            s = self.copy_streams[pt.device]
            with cp.cuda.Device(pt.device), s:
                s.wait_event(e["events"][-1])
                for a, g, n in pt.clique_runs:
                    e["clique"][a:a + n].get(out=clique[g:g + n], stream=s, blocking=False)
                    d2h += 8 * int(n)
                x = cp.cuda.Event()
                x.record()
                clique_events.append(x)
                if keep:
                    for a, g, n in pt.tree_runs:
                        e["tree"][a:a + n].get(out=tree[g:g + n], stream=s, blocking=False)
                        d2h += int(n) * isz
                    x = cp.cuda.Event()
                    x.record()
                    tree_events.append(x)
                copied[pt.device] = x
        self.copied = copied
        # the gather (only where levels above the split remain): the split level's cliques of every part
        # into the one-device layout on the gather device, then the upper levels there
        su = self.streams[u]
        peer = 0
        with cp.cuda.Device(u), su:
            g0 = cp.cuda.Event()
            g0.record()
            uev = [g0]
            if mc.upper:
                for e in self.parts:
                    pt = e["part"]
                    n = pt.n_clique - pt.split_first
                    if n == 0:
                        continue
                    if pt.device == u:
                        self.ext[e["pos"]] = e["clique"][pt.split_first:pt.n_clique]
                    else:
                        su.wait_event(e["events"][-1])
                        src = e["clique"][pt.split_first:pt.n_clique]
                        cp.cuda.runtime.memcpyPeerAsync(e["recv"].data.ptr, u, src.data.ptr, pt.device, 8 * n, su.ptr)
                        self.ext[e["pos"]] = e["recv"][:n]
                        peer += 8 * n
                g1 = cp.cuda.Event()
                g1.record()
                uev = [g1]
                self._levels(cp, self.upper_cz, self.ext, self.upper_tree, self.ext[:1], keep, uev)
                for a, qa, n in mc.upper_slices:
                    self.ext[a:a + n].get(out=clique[qa:qa + n], stream=su, blocking=False)
                    d2h += 8 * int(n)
                if keep:
                    t_up = int(mc.tree_first[plan.topo["cell_base"][mc.upper[0]]])
                    n_up = int(mc.tree_first[-1]) - t_up
                    if n_up:
                        self.upper_tree[t_up:t_up + n_up].get(out=tree[t_up:t_up + n_up], stream=su, blocking=False)
                        d2h += n_up * isz
                        x = cp.cuda.Event()
                        x.record()
                        tree_events.append(x)
            else:
                # no level above the split (the paper's case): no device-to-device copy; the device time ends
                # when the last device does
                for e in self.parts:
                    if e["part"].device != u:
                        su.wait_event(e["events"][-1])
                g1 = cp.cuda.Event()
                g1.record()
                uev = [g1]
            cdone = cp.cuda.Event()
            cdone.record()
        clique_events.append(cdone)
        return {"t0": t0, "clique": clique, "tree": tree, "tree_events": tree_events, "cdone": clique_events, "g0": g0,
                "g1": g1, "uev": uev, "first_event": first_event, "peer": peer, "h2d": h2d, "d2h": d2h}

    def finish(self, run):
        """Wait for a launched customization's cliques; returns as :meth:`MultiCustomizer.run`."""
        cp = self.cp
        mc = self.mc
        st = mc.stats
        u = mc.gather_device
        for x in run["cdone"]:
            x.synchronize()
        t0, clique, tree, tree_events = run["t0"], run["clique"], run["tree"], run["tree_events"]
        g0, g1, uev, first_event = run["g0"], run["g1"], run["uev"], run["first_event"]
        peer, h2d, d2h = run["peer"], run["h2d"], run["d2h"]
        # statistics (every event before cdone has completed)
        busy = {d: 0.0 for d in mc.devices}
        lev = {d: [0.0] * (mc.qs + 1) for d in mc.devices}
        rounds = {d: [0] * (mc.qs + 1) for d in mc.devices}
        last = {}
        for e in self.parts:
            pt = e["part"]
            ev = e["events"]
            for i in range(len(ev) - 1):
                lev[pt.device][i] += cp.cuda.get_elapsed_time(ev[i], ev[i + 1]) / 1e3
            last[pt.device] = ev[-1]
            r = [int(x) for x in e["cz"].rounds.get()]
            rounds[pt.device] = [max(a, b) for a, b in zip(rounds[pt.device], r, strict=False)]
        for d, ev_last in last.items():
            busy[d] = cp.cuda.get_elapsed_time(first_event[d], ev_last) / 1e3
        st.busy_seconds = busy
        st.level_seconds = lev
        st.rounds = {str(d): r for d, r in rounds.items()}
        st.rounds["upper"] = [int(x) for x in self.upper_cz.rounds.get()] if self.upper_cz is not None else []
        st.gather_seconds = cp.cuda.get_elapsed_time(g0, g1) / 1e3
        st.upper_seconds = cp.cuda.get_elapsed_time(g1, uev[-1]) / 1e3
        st.device_seconds = cp.cuda.get_elapsed_time(first_event.get(u, g0), uev[-1]) / 1e3
        st.bytes_peer = peer
        st.bytes_h2d = h2d
        st.bytes_d2h = d2h
        st.peer_access = dict(self.peer_access)
        for e in self.parts:
            e.pop("keep_alive", None)

        def wait(events=tuple(tree_events)):
            for x in events:
                x.synchronize()

        st.seconds = time.perf_counter() - t0
        return clique, tree, (wait if tree_events else None), st


class _Turns:
    """The two turn-table fields :class:`GPUCustomizer` reads, for a part's own turns."""

    def __init__(self, kind, out_arc):
        self.kind = kind
        self.out_arc = out_arc


class _Plan:
    """The fields of :class:`~gpuroute.crp.customize.CustomizationPlan` :class:`GPUCustomizer` reads."""

    def __init__(self, topo, micro):
        self.topo = topo
        self.micro = micro
        self.identity = True
        self.copy_slices = []


class _OverlayView:
    """The fields of :class:`~gpuroute.crp.overlay.Overlay` :class:`GPUCustomizer` reads, for one part."""

    def __init__(self, plan, tree_first, tree_dtype, turns):
        self._plan = plan
        self._tree_first = tree_first
        self._tree_dtype = tree_dtype
        self._topo = {"cq_first": plan.topo["cq_first"]}
        self.turns = turns


# ------------------------------------------------------------------------------------------ entry point
def customize_multi(overlay, metric=None, *, devices, device_kind="gpu", split_level=None, parts=None,
                    durations=None, install=True):
    """Customize ``overlay`` for ``metric`` on several devices (the module docstring's design).

    Parameters
    ----------
    overlay : gpuroute.crp.Overlay
    metric : as :meth:`gpuroute.crp.Overlay.customize`
    devices : sequence of int
        Distinct device ids (:func:`check_devices`; virtual ids for ``device_kind="cpu"``).
    device_kind : {"gpu", "cpu"}
    split_level, parts : see :class:`MultiCustomizer`
    durations : as :meth:`gpuroute.crp.Overlay.customize`
    install : bool
        Install the result as the overlay's current state (as ``customize``); False returns it only.

    Returns
    -------
    (OverlayState, dict)
        The state (the same fields as a one-device customization's, cliques and trees equal bit for bit)
        and ``info``: ``seconds``, ``decode_seconds``, ``device`` (``"gpu"``/``"cpu"``), ``devices``,
        ``multi`` (:meth:`MultiStats.as_dict`).

    Raises
    ------
    As :class:`MultiCustomizer` and :meth:`gpuroute.crp.Overlay.customize` (nothing is installed on error).
    """
    from .metric import Metric, decode_turn_costs
    from .overlay import OverlayState, arc_durations

    t0 = time.perf_counter()
    devs = check_devices(devices, device_kind)
    key = (devs, device_kind, split_level, parts)
    cache = getattr(overlay, "_multi_cust", None)
    if cache is None or cache[0] != key:
        cache = (key, MultiCustomizer(overlay, devs, device_kind=device_kind, split_level=split_level, parts=parts))
        overlay._multi_cust = cache
    mc = cache[1]
    if metric is None:
        g = overlay.graph
        name = g.default_weight
        unit = g.units.get(name) if isinstance(getattr(g, "units", None), dict) else None
        metric = Metric(g.weight(name), name=name, units=getattr(unit, "symbol", unit or ""))
    met = Metric.resolve(overlay.graph, metric, turns=overlay.turns)
    arc = np.ascontiguousarray(met.arc_cost, dtype=np.int64)
    dur = arc_durations(durations, overlay.graph.n_arcs)
    t1 = time.perf_counter()
    if device_kind == "gpu":
        pending = mc._gpu.launch(met, arc)  # the host decodes the queries' turn costs meanwhile
        tcost = np.ascontiguousarray(decode_turn_costs(met, overlay.turns), dtype=np.int64)
        clique, tree, wait, st = mc._gpu.finish(pending)
    else:
        tcost = np.ascontiguousarray(decode_turn_costs(met, overlay.turns), dtype=np.int64)
        t1 = time.perf_counter()
        clique, tree, wait, st = mc.run(met, arc, tcost)
    total = time.perf_counter() - t0
    state = OverlayState(met, arc, tcost, clique, tree, total, overlay._qg, wait, dur)
    if install:
        overlay._state = state
    info = {"seconds": total, "decode_seconds": t1 - t0, "device": device_kind, "devices": list(devs),
            "multi": st.as_dict()}
    return state, info
