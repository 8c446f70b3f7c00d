"""GPU customization of the overlay (kernels in ``customize.cu``): the GPU twin of
:func:`gpuroute.crp.customize.customize_level`, same inputs, same cliques bit for bit.

Follows Delling, Kobitzsch, Werneck, "Customizing Driving Directions with GPUs" (Euro-Par 2014): sec. 3
(the "local implementation": one thread block per cell, Bellman-Ford rounds in shared memory separated by
block barriers, block-local termination, a global-memory fallback where a cell does not fit), sec. 2-3
(aggregation with the metric decoder: the lowest level reads decoded turn costs, the levels above the
cliques of the level below) and sec. 5 (the metric-independent structures are set up on the GPU once; a
customization ships only the metric -- here the arc costs and four turn-type penalties -- and the levels
run back to back on one stream).

Work units. Entry points of one cell are independent sources, so a cell is split into units of ``g``
entry points whose distances (``vertices x g`` int64) fit in ``config.CRP_GPU_SMEM_BYTES`` of shared
memory; a cell whose vertices alone do not fit runs one entry per unit in a slice of a global scratch
array. Units spread the few big cells of the upper levels over many multiprocessors (the paper's
"global implementation" for levels with few cells serves the same purpose).

Two Bellman-Ford kernels. The pull kernel (``crp_bf_level``) gives each (vertex, entry point) item to a
thread that walks the vertex's in-edges; on levels with big cells (NY's 69 and 5 cells of 300-750 vertices,
20-55 in-edges a vertex) that is a chain of dependent, uncoalesced loads per thread, the edges re-read per entry
point, 40-50 us a round. The push kernel (``crp_push_level``) runs instead on every level whose cells fit it
(:func:`push_fits`; NY's level 0 too, 3.0 -> 2.4 ms on the H100): the block's threads stride over the cell's edges in forward
order (coalesced), each edge read once a round and relaxed for all the unit's entry points by a shared-memory
atomicMin, the frontier kept as tails that improved (three flag rows, one barrier a round); same cliques, same
trees (:func:`prepare_level` with ``push=True`` gives its forward-edge arrays, :func:`push_fits` the levels,
:func:`push_threads` each level's block size). A level whose cells are too big for it may still run it with more
shared memory a block (:func:`push_items_of`, ``config.CRP_GPU_PUSH_BIG_SMEM_BYTES``; off by default).

Levels are those of the overlay's :class:`gpuroute.crp.customize.CustomizationPlan` (the level driver):
mezzanine levels under the query levels run like any level, and a lowest mezzanine level may run
microinstructions instead (kernel ``crp_micro``, sec. 4; :mod:`gpuroute.crp.microcode`): one block per
packed group of cells, arc instructions, layers separated by block barriers. The device holds the cliques
of every plan level; only the query levels' slices are copied back.

Launches per customization: 1 decode + 2 per Bellman-Ford level (aggregate, Bellman-Ford) + 1 for a
microcode level, no host synchronisation until the results are copied back. The trees kept for path unpacking (``config.CRP_KEEP_TREES``) are
written by the same kernel: for each vertex, 1 + the smallest forward edge index that is tight (positive
costs make every tight edge point away from the entry, so parents form a tree); the CPU twin keeps the
edge its Dijkstra relaxed last, so trees may pick other, equally short, paths.

A traffic update (:meth:`GPUCustomizer.launch_update`) builds every descriptor on the host with NumPy and
uploads them in one copy; then one ``crp_copy_chunks`` launch brings the spare device copy up to date (the
ranges the update before changed, of cliques, trees and turn costs, and the new turn costs), 2 launches per
Bellman-Ford level (1 per microcode level) re-customize the touched cells, and one more ``crp_copy_chunks``
launch packs their cliques and trees for the copy back: no host work between the launches.
"""
from __future__ import annotations

import time

import numpy as np

from .. import config
from ..backend.kernels import load_module
from .state_buffers import EMPTY, chunk_table, difference, index_ranges, padded_offsets, points_complement

KERNELS = "crp/customize.cu"
#: crp_copy_chunks: threads per block (a warp per chunk) and bytes per chunk (a multiple of 16: 32 lanes x 4
#: words of 16 bytes, one pass of each warp)
COPY_THREADS = 256
COPY_CHUNK_BYTES = 2048


class _Staging:
    """Host arrays gathered into one byte buffer (each at a 16-byte aligned offset) that goes to the device in
    one upload; :meth:`dev` then gives each array's device view (same dtype and length)."""

    def __init__(self):
        self.parts, self.at, self.n = [], [], 0
        self.buf = None

    def add(self, a):
        """Stage a 1-D host array; returns its key."""
        a = np.ascontiguousarray(a).ravel()
        self.parts.append(a)
        self.at.append(self.n)
        self.n += -(-a.nbytes // 16) * 16
        return len(self.parts) - 1

    def host(self, k):
        return self.parts[k]

    def upload(self, cp):
        """One host-to-device copy of everything staged; returns its bytes."""
        buf = np.zeros(max(self.n, 16), np.uint8)
        for a, o in zip(self.parts, self.at, strict=True):
            buf[o:o + a.nbytes] = a.view(np.uint8)
        self.buf = cp.asarray(buf)
        return int(buf.nbytes)

    def dev(self, k):
        a, o = self.parts[k], self.at[k]
        return self.buf[o:o + a.nbytes].view(a.dtype)


def _units(vf, ent_first, smem_items, max_group, balance=False):
    """Work units of one level: (cell int32, first entry int32, entries g int32, scratch offset int64 or
    -1) per unit, and the scratch size (int64 items).

    A cell with ``n`` vertices and ``k`` entry points gets units of ``g = min(k, smem_items // n,
    max_group)`` entries (at least 1); where ``n > smem_items`` its units (one entry each) use scratch.
    ``balance``: as many units per cell, of ``ceil(k / units)`` entries each (34 entries in groups of at most
    11: 9, 9, 9, 7 instead of 11, 11, 11, 1). ``max_group``: an int, or one cap per cell (int64 array).
    """
    n = np.diff(vf)
    k = np.diff(ent_first)
    g = np.minimum(np.minimum(k, max_group), np.maximum(smem_items // np.maximum(n, 1), 1))
    live = (n > 0) & (k > 0)
    g = np.where(live, np.maximum(g, 1), 0)
    per = np.where(live, -(-k // np.maximum(g, 1)), 0)
    if balance:
        g = np.where(live, -(-k // np.maximum(per, 1)), 0)
    cell = np.repeat(np.arange(n.size, dtype=np.int64), per)
    first = np.zeros(n.size + 1, np.int64)
    np.cumsum(per, out=first[1:])
    j = np.arange(cell.size, dtype=np.int64) - first[cell]
    i0 = j * g[cell]
    gg = np.minimum(g[cell], k[cell] - i0)
    need = n[cell] * gg
    big = n[cell] > smem_items
    scr = np.full(cell.size, -1, np.int64)
    if big.any():
        sizes = need[big]
        off = np.zeros(sizes.size, np.int64)
        np.cumsum(sizes[:-1], out=off[1:])
        scr[big] = off
        total = int(sizes.sum())
    else:
        total = 0
    return cell.astype(np.int32), i0.astype(np.int32), gg.astype(np.int32), scr, total


def _distinct(a):
    """``np.unique(a)`` of an int64 array by a sort (NumPy 2.4's hash-based ``np.unique`` took 7.7 s for 2M ints
    on the development machine, the sort 0.09 s: it made most of the GPU set-up of a large overlay)."""
    if a.size == 0:
        return a
    x = np.sort(a)
    keep = np.empty(x.size, bool)
    keep[0] = True
    np.not_equal(x[1:], x[:-1], out=keep[1:])
    return x[keep]


def _hop_order(vf, e_first, e_to, starts):
    """Vertices of every cell ordered by hops from the cell's entry points (breadth-first over the
    level's search graph, all cells at once), ties by id; unreached vertices last. Returns ``old`` int64
    (V,): the level-local vertex at each new position (cells keep their ranges)."""
    V = vf[-1]
    hop = np.full(V, np.iinfo(np.int64).max, np.int64)
    frontier = _distinct(starts.astype(np.int64))
    hop[frontier] = 0
    h = 0
    while frontier.size:
        h += 1
        deg = e_first[frontier + 1] - e_first[frontier]
        idx = np.repeat(e_first[frontier] - np.cumsum(deg) + deg, deg) + np.arange(int(deg.sum()))
        nxt = _distinct(e_to[idx].astype(np.int64))
        nxt = nxt[hop[nxt] > h]
        hop[nxt] = h
        frontier = nxt
    vcell = np.repeat(np.arange(vf.size - 1, dtype=np.int64), np.diff(vf))
    return np.lexsort((np.arange(V), hop, vcell))


def prepare_level(lg, ent_first, ex_first, smem_items, max_group, target_units=0, push=False):
    """The metric-independent arrays of one level for the kernels (host NumPy; see ``customize.cu``).

    Within each cell the vertices are renumbered by hops from the entry points (:func:`_hop_order`): the
    kernel's in-place Bellman-Ford rounds sweep the vertices in that order, so one round carries a
    distance over several hops (fewer rounds; the outputs use the original numbering through ``v_orig``).

    Parameters
    ----------
    lg : gpuroute.crp.topology.LevelGraph
    ent_first, ex_first : int64 (n_cells + 1,)
        The level's entry and exit point ranges (``topo["level_first"][p]``).
    smem_items : int
        int64 distances one block may hold in shared memory.
    max_group : int
        Most entry points per work unit.
    target_units : int
        Split cells into at least about this many units where the level has few cells (0: no target); with
        ``push``, into about this many units of about equal work (edges x entry points of the unit).
    push : bool
        Also the push kernel's forward-edge arrays (``f_pack``, ``f_fe``, ``f_ref``), and units balanced
        within each cell (:func:`_units`). Raises ValueError where a cell has more than 65,536 vertices.

    Returns
    -------
    dict
        ``vf`` int64 (cells + 1,); ``v_orig`` int32 (V,) (the original cell-local index of each renumbered
        vertex); ``f_first`` int64 (V + 1,), ``f_dst`` int32 (E,) (out-neighbours by renumbered tail,
        counted from the cell's first vertex); ``r_first`` int64 (V + 1,), ``r_src``/``r_fe`` int32 (E,), ``r_ref`` int64 (E,) (incoming
        edges grouped by renumbered head; tails renumbered and counted from the cell's first vertex,
        forward edge ids counted from the cell's first edge); ``ent_loc``/``ex_loc`` int32 (entry and exit
        points, renumbered, counted from the cell's first vertex); ``u_cell``/``u_i0``/``u_g`` int32 and
        ``u_scr`` int64 (U,) (work units); ``scratch`` (int64 items of global scratch the big units need);
        ``ent_first``/``ex_first``. With ``push``: ``f_pack`` uint32 (E,) (forward edge's tail | head << 16,
        renumbered, counted from the cell's first vertex), ``f_fe`` int32 (E,) (its forward edge index counted
        from the cell's first edge: the trees' edge id, as ``r_fe``), ``f_ref`` int64 (E,) (its cost reference,
        as ``r_ref``: turn id, or -1 - clique entry of the level below).
    """
    vf = lg.vert_first.astype(np.int64)
    nc = vf.size - 1
    V = lg.vert_arc.size
    E = lg.e_to.size
    vcell = np.repeat(np.arange(nc, dtype=np.int64), np.diff(vf))
    old = _hop_order(vf, lg.e_first.astype(np.int64), lg.e_to, lg.ent_vert)
    new = np.empty(V, np.int64)
    new[old] = np.arange(V, dtype=np.int64)
    tail = np.repeat(np.arange(V, dtype=np.int64), np.diff(lg.e_first))
    head = new[lg.e_to.astype(np.int64)]
    order = np.argsort(head, kind="stable")
    r_first = np.zeros(V + 1, np.int64)
    np.cumsum(np.bincount(head, minlength=V), out=r_first[1:])
    cell_of_edge = vcell[tail[order]] if E else np.zeros(0, np.int64)
    r_src = (new[tail[order]] - vf[cell_of_edge]).astype(np.int32)
    r_fe = (order - lg.e_first[vf[cell_of_edge]]).astype(np.int32)
    r_ref = lg.e_ref[order].astype(np.int64)
    ecell = np.repeat(np.arange(nc, dtype=np.int64), np.diff(ent_first))
    xcell = np.repeat(np.arange(nc, dtype=np.int64), np.diff(ex_first))
    ent_loc = (new[lg.ent_vert.astype(np.int64)] - vf[ecell]).astype(np.int32)
    ex_loc = (new[lg.ex_vert.astype(np.int64)] - vf[xcell]).astype(np.int32)
    v_orig = (old - vf[vcell]).astype(np.int32)
    # forward edges by renumbered tail (the vertices an improvement makes active in the next round)
    deg = np.diff(lg.e_first).astype(np.int64)
    f_first = np.zeros(V + 1, np.int64)
    np.cumsum(deg[old], out=f_first[1:])
    fe = np.repeat(lg.e_first[old].astype(np.int64) - f_first[:-1], deg[old]) + np.arange(int(deg.sum()), dtype=np.int64)
    f_dst = (new[lg.e_to[fe].astype(np.int64)] - vf[vcell[new[tail[fe]]]]).astype(np.int32) if E else np.zeros(0, np.int32)
    group = max_group
    k_all = int(ent_first[-1])
    if push and target_units and nc and k_all:
        # units of about equal work (a round relaxes the cell's edges once per entry point of the unit): a cell
        # with many edges gets fewer entry points a unit
        ec = np.diff(r_first[vf])
        per_unit = max(1, -(-int((ec * np.diff(np.asarray(ent_first, np.int64))).sum()) // target_units))
        group = np.maximum(1, np.minimum(max_group, per_unit // np.maximum(ec, 1)))
    elif target_units and nc and k_all:
        group = max(1, min(max_group, -(-k_all // target_units)))
    u_cell, u_i0, u_g, u_scr, scratch = _units(vf, ent_first, smem_items, group, balance=push)
    out = dict(vf=vf, v_orig=v_orig, f_first=f_first, f_dst=f_dst, r_first=r_first, r_src=r_src, r_fe=r_fe, r_ref=r_ref, ent_loc=ent_loc,
               ex_loc=ex_loc, ent_first=np.asarray(ent_first, np.int64), ex_first=np.asarray(ex_first, np.int64),
               u_cell=u_cell, u_i0=u_i0, u_g=u_g, u_scr=u_scr, scratch=scratch)
    if push:
        if nc and int(np.diff(vf).max(initial=0)) > 1 << 16:
            raise ValueError(f"push kernel: a cell has {int(np.diff(vf).max())} search-graph vertices, more than "
                             "65,536 (16-bit cell-local ids)")
        ftail = np.repeat(np.arange(V, dtype=np.int64), np.diff(f_first)) if E else np.zeros(0, np.int64)
        fcell = vcell[ftail]
        out["f_pack"] = ((ftail - vf[fcell]).astype(np.uint32) | (f_dst.astype(np.uint32) << np.uint32(16)))
        out["f_fe"] = (fe - lg.e_first[vf[fcell]]).astype(np.int32)
        out["f_ref"] = lg.e_ref[fe].astype(np.int64)
    return out


def push_fits(lg, smem_items, max_cells=None):
    """Whether a level runs the push kernel: each of its cells has at most ``smem_items`` vertices (one entry
    point's distances fit the block) and at most 65,536 (16-bit ids); ``max_cells`` (an int:
    ``config.CRP_GPU_PUSH_MAX_CELLS``) narrows it to levels with fewer cells (0: no level), None does not."""
    nc = lg.vert_first.size - 1
    if nc == 0 or (max_cells is not None and nc >= max_cells):
        return False
    n_max = int(np.diff(lg.vert_first).max(initial=0))
    return n_max <= min(smem_items, 1 << 16)


def push_items_of(lg, push_items, big_items=0, max_cells=None, smem_cap=None):
    """int64 distances one push-kernel unit of a level holds (its block's shared memory: 15 bytes an item + 16):
    ``push_items`` where :func:`push_fits`; else ``big_items`` where the level's cells fit that many
    (:func:`push_fits` with ``big_items``: a level of a few big cells, e.g. the top level of tiled 8x8 NY, 16
    cells of 2,424-3,204 vertices against the default 3,072) and the block, ``15 x big_items + 16`` bytes, fits
    ``smem_cap`` (the device's opt-in limit per block; None: no cap); else 0 (the pull kernel). ``big_items``:
    ``config.CRP_GPU_PUSH_BIG_SMEM_BYTES // 8`` (0: off). Returns an int."""
    if push_fits(lg, push_items, max_cells):
        return int(push_items)
    big = int(big_items)
    if big > push_items and push_fits(lg, big, max_cells) and (smem_cap is None or 15 * big + 16 <= smem_cap):
        return big
    return 0


def _smem_optin(cp):
    """The current device's shared memory a block may opt in to (bytes), or None where the device does not say
    (an emulator)."""
    try:
        return int(cp.cuda.Device().attributes["MaxSharedMemoryPerBlockOptin"])
    except (AttributeError, KeyError, TypeError):
        return None


def push_threads(n_edges, n_cells, least, most, unroll):
    """Threads per block of the push kernel on a level of ``n_edges`` search-graph edges in ``n_cells`` cells
    (ints): ``least``, doubled while the doubled block stays at most ``most`` and the cells average at least
    one stride of it (a block of ``threads`` covers ``threads x unroll`` edges a stride: its extra threads get
    edges). ``config.CRP_GPU_PUSH_THREADS`` / ``_MAX_THREADS`` / ``_UNROLL`` give the last three. Returns an int."""
    t = int(least)
    while 2 * t <= most and n_cells and n_edges >= 2 * t * unroll * n_cells:
        t *= 2
    return t


def _to_host(cp, x):
    """A device array copied into pinned host memory (CuPy's pinned pool: after the first customization
    the buffers are reused once the states holding them are dropped), as a NumPy array."""
    import cupyx

    out = cupyx.empty_pinned(x.shape, x.dtype)
    x.get(out=out)
    return out


class GPUCustomizer:
    """An overlay's metric-independent customization structures on the GPU (uploaded once), and the
    device copy of the current cliques and trees (so a traffic update re-customizes only its cells).

    Parameters
    ----------
    overlay : gpuroute.crp.Overlay

    Raises
    ------
    GPUUnavailableError
        Without a usable GPU.
    """

    def __init__(self, overlay):
        import cupy as cp

        from ..backend import resolve_device

        resolve_device("gpu")
        self.cp = cp
        t0 = time.perf_counter()
        plan = overlay._plan
        self.plan = plan
        topo = plan.topo
        self.smem_items = max(1, int(config.CRP_GPU_SMEM_BYTES) // 8)
        self.threads = int(config.CRP_GPU_THREADS)
        self.cell_base = topo["cell_base"]
        cq = topo["cq_first"]
        tf = overlay._tree_first
        self.n_clique = int(cq[-1])          # the plan's cliques (mezzanine levels included), on the device
        self.n_query_clique = int(overlay._topo["cq_first"][-1])
        self.n_tree = int(tf[-1])
        self.tree_dtype = np.dtype(overlay._tree_dtype)
        mod = load_module(KERNELS)
        self.k_decode = mod.get_function("crp_decode")
        self.k_aggregate = mod.get_function("crp_aggregate")
        self.k_level = mod.get_function("crp_bf_level_u16" if self.tree_dtype == np.uint16 else "crp_bf_level_i32")
        self.k_micro = mod.get_function("crp_micro")
        self.k_aggregate_ranges = mod.get_function("crp_aggregate_ranges")
        self.k_copy_chunks = mod.get_function("crp_copy_chunks")
        self.frontier = bool(config.CRP_GPU_FRONTIER)
        # the push kernel on the levels whose cells fit it (push_fits): shared memory = distances (8 bytes an
        # item) + tree edges (4) + three flag rows (vertices <= items)
        self.push_items = max(1, int(config.CRP_GPU_PUSH_SMEM_BYTES) // 8)
        max_cells = config.CRP_GPU_PUSH_MAX_CELLS
        max_cells = None if max_cells is None else int(max_cells)
        self.push_smem = 15 * self.push_items + 16
        self.k_push = None
        if self.smem_items * 10 > 48 * 1024:  # above the default per-block limit: opt in
            self.k_level.max_dynamic_shared_size_bytes = self.smem_items * 10
        self.micro = None
        mp = plan.micro
        if mp is not None:
            self.micro = {"prog": mp, "dev": {k: cp.asarray(v) for k, v in mp.arrays().items()},
                          "all": cp.arange(mp.n_blocks, dtype=np.int32),
                          "smem": 8 * int(max(1, mp.b_mem[mp.b_scr < 0].max(initial=1))),
                          "scratch": cp.empty(max(1, mp.scratch), np.int64),
                          "threads": int(config.CRP_MICRO_THREADS)}
            if self.micro["smem"] > 48 * 1024:
                self.k_micro.max_dynamic_shared_size_bytes = self.micro["smem"]
        # a level whose cells exceed push_items runs the push kernel anyway with big_items a unit where they fit
        # that and the device allows its block (push_items_of; CRP_GPU_PUSH_BIG_SMEM_BYTES = 0: off)
        big_items = max(0, int(config.CRP_GPU_PUSH_BIG_SMEM_BYTES)) // 8
        smem_cap = _smem_optin(cp) if big_items else None
        push_optin = 0
        tr = overlay.turns
        self.kind = cp.asarray(np.ascontiguousarray(tr.kind, np.uint8))
        self.out_arc = cp.asarray(np.ascontiguousarray(tr.out_arc, np.int32))
        self.n_turns = int(tr.out_arc.size)
        self.levels = []
        scratch = 0
        max_e = 1
        for p, lg in enumerate(topo["levels"]):
            if p == 0 and self.micro is not None:
                self.levels.append(None)
                continue
            ent_first, ex_first = topo["level_first"][p]
            items = push_items_of(lg, self.push_items, big_items, max_cells, smem_cap)
            push = items > 0
            if push:
                h = prepare_level(lg, ent_first, ex_first, items, int(config.CRP_GPU_MAX_GROUP),
                                  int(config.CRP_GPU_PUSH_TARGET_UNITS), push=True)
                if self.k_push is None:  # (edges loaded a thread before relaxing them: a compile-time constant)
                    unroll = int(config.CRP_GPU_PUSH_UNROLL)
                    if unroll < 1:
                        raise ValueError(f"config.CRP_GPU_PUSH_UNROLL = {unroll}: must be at least 1")
                    pmod = mod if unroll == 8 else load_module(KERNELS, (f"-DCRP_PUSH_UNROLL={unroll}",))
                    self.k_push = pmod.get_function("crp_push_level_u16" if self.tree_dtype == np.uint16
                                                    else "crp_push_level_i32")
                if 15 * items + 16 > max(48 * 1024, push_optin):  # above the default per-block limit: opt in
                    push_optin = 15 * items + 16
                    self.k_push.max_dynamic_shared_size_bytes = push_optin
                nc = int(lg.vert_first.size - 1)
                most = min(int(config.CRP_GPU_PUSH_MAX_THREADS),
                           int(getattr(self.k_push, "max_threads_per_block", config.CRP_GPU_PUSH_MAX_THREADS)))
                p_threads = push_threads(int(h["f_pack"].size), nc, min(int(config.CRP_GPU_PUSH_THREADS), most), most,
                                         int(config.CRP_GPU_PUSH_UNROLL))
            else:
                h = prepare_level(lg, ent_first, ex_first, self.smem_items, int(config.CRP_GPU_MAX_GROUP),
                                  int(config.CRP_GPU_TARGET_UNITS))
            cb0, cb1 = int(self.cell_base[p]), int(self.cell_base[p + 1])
            skip = ("r_src", "r_fe", "r_ref", "f_dst") if push else ("f_pack", "f_fe", "f_ref")
            dev = {key: cp.asarray(val) for key, val in h.items() if isinstance(val, np.ndarray) and key not in skip}
            dev["cq_first"] = cp.asarray(np.ascontiguousarray(cq[cb0:cb1 + 1], np.int64))
            dev["tree_first"] = cp.asarray(np.ascontiguousarray(tf[cb0:cb1 + 1], np.int64))
            dev["all_units"] = cp.arange(h["u_cell"].size, dtype=np.int32)
            self.levels.append({"host": {"u_cell": h["u_cell"], "vf": h["vf"], "ent_first": h["ent_first"], "r_first": h["r_first"],
                                         "scratch": int(h["scratch"])}, "dev": dev, "n_edges": int(h["r_ref"].size),
                                "n_units": int(h["u_cell"].size), "push": push,
                                "push_threads": p_threads if push else 0, "push_items": items,
                                "push_smem": 15 * items + 16 if push else 0})
            scratch = max(scratch, h["scratch"])
            max_e = max(max_e, int(h["r_ref"].size))
        self.scratch = cp.empty(max(scratch, 1), np.int64)
        self.ecost = cp.empty(max_e, np.int64)
        self.rounds = cp.zeros(len(self.levels), np.int32)
        self.copy_stream = cp.cuda.Stream(non_blocking=True)
        # the device copy of the current customization (None until the first run is committed): a dict of
        # clique, tree, tcost (decoded turn costs) and dirty (the ranges where it differs from spare; None:
        # everywhere); spare: the buffers of the copy before it, which the next update writes
        self.current = None
        self.spare = None
        self.setup_seconds = time.perf_counter() - t0

    def units(self, p, cells):
        """Device int32 indices of the level-``p`` work units of ``cells`` (level-local cell ids)."""
        cp = self.cp
        lv = self.levels[p]
        if cells is None:
            return lv["dev"]["all_units"]
        mask = np.isin(lv["host"]["u_cell"], np.asarray(cells, np.int64))
        return cp.asarray(np.flatnonzero(mask).astype(np.int32))

    def update_units(self, p, cells, target):
        """Work units for re-customizing only ``cells`` of level ``p`` (a traffic update's few cells): the
        cells' entry points split into groups of ``g = ceil(their entries / target)`` (at most
        ``config.CRP_GPU_MAX_GROUP``, as shared memory allows), so that a few dirty cells still fill the GPU
        (the level's own units are sized for all its cells: a handful of them are a handful of blocks, each
        sweeping many entry points per Bellman-Ford round).

        Returns
        -------
        (u_cell int32, u_i0 int32, u_g int32, u_scr int64) of the units (level-local cells; scratch offsets
        from 0), or None when they need more global scratch than the level's own units (then those are used).
        """
        h = self.levels[p]["host"]
        c = np.asarray(cells, np.int64)
        vf, ef = h["vf"], h["ent_first"]
        n = vf[c + 1] - vf[c]
        k = ef[c + 1] - ef[c]
        sub_vf = np.zeros(c.size + 1, np.int64)
        np.cumsum(n, out=sub_vf[1:])
        sub_ef = np.zeros(c.size + 1, np.int64)
        np.cumsum(k, out=sub_ef[1:])
        g = max(1, min(int(config.CRP_GPU_MAX_GROUP), -(-int(sub_ef[-1]) // max(int(target), 1))))
        push = self.levels[p]["push"]
        u_cell, u_i0, u_g, u_scr, scratch = _units(sub_vf, sub_ef, self.levels[p]["push_items"] if push else self.smem_items,
                                                   g, balance=push)
        if scratch > (0 if push else self.scratch.size):
            return None
        return c[u_cell].astype(np.int32), u_i0, u_g, u_scr

    def launch(self, arc_cost, penalty, override, cells_per_level=None, base=None, keep_tree=True):
        """Start one customization on the current stream (asynchronous); :meth:`finish` waits for it.

        Parameters
        ----------
        arc_cost : int64 (m,)
            The metric's arc costs.
        penalty : int64 (4,)
            Turn-type penalties (straight, left, right, U-turn).
        override : int64 (T,) or None
            Per-turn costs replacing the type penalty (-1 closes a turn).
        cells_per_level : list of int64 arrays, optional
            Level-local cells to re-customize (traffic update); default every cell.
        base : (clique int64, tree) host arrays, optional
            The customization to start from when only some cells are recomputed (used when the device
            copy does not match it): the overlay's cliques (query levels) and trees.
        keep_tree : bool
            Write the shortest-path trees.

        Returns
        -------
        dict
            The pending run (device arrays and CUDA events), for :meth:`finish`.
        """
        cp = self.cp
        t0 = time.perf_counter()
        self.copy_stream.synchronize()  # the previous run's tree copy has ended before memory is reused
        # arc costs travel as int32 where they fit (half the bytes of the metric's upload)
        a64 = np.asarray(arc_cost)
        if a64.size and int(a64.max()) < 2**31 and int(a64.min()) >= 0:
            arc = cp.asarray(np.ascontiguousarray(a64, np.int32)).astype(np.int64)
        else:
            arc = cp.asarray(np.ascontiguousarray(a64, np.int64))
        pen = cp.asarray(np.ascontiguousarray(penalty, np.int64))
        has = override is not None
        ovr = cp.asarray(np.ascontiguousarray(override, np.int64)) if has else cp.zeros(1, np.int64)
        partial = cells_per_level is not None
        plan = self.plan
        if partial:
            if base is not None or self.current is None or (keep_tree and self.current["tree"] is None):
                if base is None:
                    raise ValueError("a partial customization needs the customization it starts from")
                if plan.identity:
                    clique = cp.asarray(base[0])
                else:  # the query levels' cliques into their slices (the mezzanine levels are recomputed)
                    clique = cp.empty(max(self.n_clique, 1), np.int64)
                    b0 = np.asarray(base[0])
                    for a, qa, n in plan.copy_slices:
                        clique[a:a + n].set(b0[qa:qa + n])
                tree = cp.asarray(base[1]) if keep_tree else cp.empty(1, self.tree_dtype)
            else:
                clique = self.current["clique"].copy()
                tree = self.current["tree"].copy() if keep_tree else cp.empty(1, self.tree_dtype)
        else:
            clique = cp.empty(max(self.n_clique, 1), np.int64)
            tree = cp.empty(max(self.n_tree, 1) if keep_tree else 1, self.tree_dtype)
        tcost = cp.empty(max(self.n_turns, 1), np.int64)
        ev = [cp.cuda.Event()]
        ev[0].record()
        T = self.n_turns
        if T:
            self.k_decode(((T + 255) // 256,), (256,), (np.int64(T), self.kind, self.out_arc, arc, pen, ovr,
                                                         np.int32(has), tcost))
        self.rounds.fill(0)
        ext_cells = plan.ext_cells(cells_per_level) if partial else None
        for p, lv in enumerate(self.levels):
            if lv is None:  # microinstructions
                mi = self.micro
                md = mi["dev"]
                blocks = mi["all"] if not partial else cp.asarray(mi["prog"].blocks_of(ext_cells[p]))
                nb = int(blocks.size)
                if nb:
                    self.k_micro((nb,), (mi["threads"],),
                                 (blocks, md["b_arc_first"], md["ai_turn"], md["ai_pos"], md["b_lay_first"],
                                  md["lay_word"], md["words"], md["b_wide"], md["b_scr"], md["b_out_first"], md["o_pos"],
                                  md["o_dst"], np.int32(mi["prog"].a_bits), np.int32(mi["prog"].db_bits), tcost, clique,
                                  mi["scratch"]), shared_mem=mi["smem"])
                e = cp.cuda.Event()
                e.record()
                ev.append(e)
                continue
            d = lv["dev"]
            E = lv["n_edges"]
            if E:  # the edges' costs, in the order the level's kernel reads them
                self.k_aggregate(((E + 255) // 256,), (256,), (np.int64(E), d["f_ref" if lv["push"] else "r_ref"], tcost,
                                                             clique, self.ecost))
            units = self.units(p, None if not partial else ext_cells[p])
            nu = int(units.size)
            if nu:
                self.launch_level(p, nu, units, (d["u_cell"], d["u_i0"], d["u_g"], d["u_scr"]), clique, tree, keep_tree,
                                   self.threads)
            e = cp.cuda.Event()
            e.record()
            ev.append(e)
        return {"clique": clique, "tree": tree, "tcost": tcost, "dirty": None, "events": ev, "keep_tree": keep_tree,
                "launch_s": time.perf_counter() - t0}

    def launch_level(self, p, nu, units, u, clique, tree, keep_tree, threads):
        """One level's Bellman-Ford kernel over ``nu`` work units (``units``: their indices into ``u`` = (u_cell,
        u_i0, u_g, u_scr) device arrays), its edge costs in ``self.ecost``: the push kernel on the levels
        :func:`push_fits` chose (the level's :func:`push_threads` threads), else the pull kernel (``threads``)."""
        lv = self.levels[p]
        d = lv["dev"]
        u_cell, u_i0, u_g, u_scr = u
        if lv["push"]:
            self.k_push((nu,), (lv["push_threads"],),
                        (units, u_cell, u_i0, u_g, d["vf"], d["v_orig"], d["f_first"], d["f_pack"], d["f_fe"], self.ecost,
                         d["ent_first"], d["ent_loc"], d["ex_first"], d["ex_loc"], d["cq_first"], d["tree_first"], clique,
                         tree, np.int32(keep_tree), np.int32(self.frontier), self.rounds[p:]), shared_mem=lv["push_smem"])
            return
        self.k_level((nu,), (threads,),
                     (units, u_cell, u_i0, u_g, u_scr, d["vf"], d["v_orig"], d["f_first"], d["f_dst"], d["r_first"],
                      d["r_src"], d["r_fe"], self.ecost, d["ent_first"], d["ent_loc"], d["ex_first"], d["ex_loc"],
                      d["cq_first"], d["tree_first"], clique, tree, self.scratch, np.int32(keep_tree),
                      np.int32(self.smem_items), np.int32(self.frontier), self.rounds[p:]), shared_mem=self.smem_items * 10)

    def finish(self, run):
        """Wait for a launched run and copy its cliques to the host; its trees are copied asynchronously
        on a second stream into pinned memory (the paper's sec. 5 overlaps these copies):
        ``run["tree_wait"]`` waits for that copy.

        Returns
        -------
        (clique int64 (C,) (the overlay's, query levels), tree (TT,) or None (being filled until
        ``run["tree_wait"]()``), level_seconds list of float, rounds list of int (per plan level; 0 on a
        microcode level))
        """
        cp = self.cp
        ev = run["events"]
        tree = None
        if run["keep_tree"]:
            import cupyx

            tree = cupyx.empty_pinned((self.n_tree,), self.tree_dtype)
            side = self.copy_stream
            side.wait_event(ev[-1])
            done = cp.cuda.Event()
            with side:
                run["tree"][:self.n_tree].get(out=tree, stream=side, blocking=False)
                done.record(side)
            dev_tree = run["tree"]

            def wait(done=done, dev_tree=dev_tree):  # keeps the device array alive until the copy is done
                done.synchronize()

            run["tree_wait"] = wait
        ev[-1].synchronize()
        level_s = [cp.cuda.get_elapsed_time(ev[i], ev[i + 1]) / 1e3 for i in range(len(ev) - 1)]
        if self.plan.identity:
            clique = _to_host(cp, run["clique"][:self.n_clique])
        else:
            import cupyx

            clique = cupyx.empty_pinned((self.n_query_clique,), np.int64)
            for a, qa, n in self.plan.copy_slices:
                run["clique"][a:a + n].get(out=clique[qa:qa + n])
        rounds = [int(x) for x in self.rounds.get()]
        return clique, tree, level_s, rounds

    def commit(self, run):
        """Make a finished run the device copy that later partial runs start from (the copy before it
        becomes the spare the next update writes)."""
        old = self.current
        self.current = {"clique": run["clique"], "tree": run["tree"] if run["keep_tree"] else None,
                        "tcost": run["tcost"], "dirty": run.get("dirty")}
        if old is not None and old["clique"] is not run["clique"]:
            self.spare = old

    # ---------------------------------------------------------------------------------- traffic updates
    def can_update(self, keep_tree):
        """Whether :meth:`launch_update` can start from the device copy (one was committed, with trees
        where ``keep_tree``)."""
        cur = self.current
        return cur is not None and cur["tcost"] is not None and (not keep_tree or cur["tree"] is not None)

    def _copy_launch(self, staged, table, event=None):
        """One ``crp_copy_chunks`` launch of a :func:`~gpuroute.crp.state_buffers.chunk_table` ``table``
        (``(seg, first, n_chunks, pairs)``, its descriptors staged; ``pairs``: up to four (source, destination)
        device arrays); nothing when it has no chunk. ``event`` (a CUDA event) is recorded just before the
        launch, its arguments ready (the part's start: no host work after it)."""
        seg_k, first_k, n_chunks, arrays = table
        args = None
        if n_chunks:
            args = []
            for k in range(4):
                src, dst = arrays[k] if k < len(arrays) else arrays[0]
                args += [staged.dev(src) if isinstance(src, int) else src, dst]
            blocks = min(-(-n_chunks // (COPY_THREADS // 32)), 65535)
            args = ((blocks,), (COPY_THREADS,), (np.int64(staged.host(seg_k).size // 4), staged.dev(seg_k),
                                                 staged.dev(first_k), np.int64(COPY_CHUNK_BYTES), *args))
        if event is not None:
            event.record()
        if args is not None:
            self.k_copy_chunks(*args)

    def _stage_copies(self, staged, pairs):
        """Stage the descriptors of one copy launch: ``pairs`` a list of (source, destination, src starts, dst
        starts, lens) in elements (source and destination of one dtype; the source a device array or the key of
        a staged host array, bound once uploaded). Returns the table for :meth:`_copy_launch`."""
        byte_pairs = []
        arrays = []
        for src, dst, ss, ds, ln in pairs:
            b = int(dst.dtype.itemsize)
            byte_pairs.append((np.asarray(ss, np.int64) * b, np.asarray(ds, np.int64) * b, np.asarray(ln, np.int64) * b))
            arrays.append((src, dst))
        seg, first = chunk_table(byte_pairs, COPY_CHUNK_BYTES)
        return staged.add(seg), staged.add(first), int(first[-1]), arrays

    def launch_update(self, into, tvals, cells_per_level, ranges, keep_tree, stats=None):
        """Start a traffic update from the device copy (asynchronous; :meth:`finish_update` waits for it).

        The spare device buffers are brought up to date with the current copy (only the ranges the last
        update changed, less the cells this one re-customizes, whose cliques and trees its levels write whole;
        everything after a whole customization), the changed turn costs written into them,
        the cells re-customized, and their cliques and trees packed for the copy back. Nothing of the
        current copy is written: an update that fails leaves it whole.

        Every descriptor (the ranges to copy, the turn costs, the work units of each level) is built on the
        host with NumPy first and goes up in one upload; then the device runs, with no host work between
        launches: one ``crp_copy_chunks`` launch brings the spare up to date (cliques, trees, turn costs) and
        writes the new turn costs, the levels run, one more packs the touched cells (each range keeping its
        16-byte alignment: :func:`~gpuroute.crp.state_buffers.padded_offsets`).

        Parameters
        ----------
        into : int64 (k,)
            The turns whose decoded costs changed (the turns into the changed arcs; distinct).
        tvals : int64 (k,)
            Their new decoded costs.
        cells_per_level : list of int64 arrays
            Level-local cells to re-customize, per query level.
        ranges : dict
            :func:`gpuroute.crp.state_buffers.update_ranges` of those cells.
        keep_tree : bool
        stats : gpuroute.crp.state_buffers.CopyStats, optional
            Counts the bytes copied on the device and across the bus.

        Returns
        -------
        dict
            The pending run; ``run["pack_at"]``: the packed cliques' and trees' offsets (elements, int64 (R,)),
            one per range of ``ranges["clique_copy"]`` and ``ranges["tree"]``.
        """
        cp = self.cp
        t0 = time.perf_counter()
        self.copy_stream.synchronize()
        cur = self.current
        spare, self.spare = self.spare, None  # being written: not a valid spare until committed
        if spare is None or (keep_tree and spare["tree"] is None):
            spare = {k: None if v is None else cp.empty(v.shape, v.dtype) for k, v in cur.items() if k != "dirty"}
            dirty = None
        else:
            dirty = cur["dirty"]
        into = np.asarray(into, np.int64)
        tvals = np.asarray(tvals, np.int64)
        staged = _Staging()
        # 1. the spare brought up to date: the ranges where it differs from the current copy (all of it after a
        # whole customization), except the turns this update writes; then the new turn costs from the upload
        order = np.argsort(into, kind="stable")
        t_idx, t_val = into[order], tvals[order]
        names = (("clique", "clique"), ("tree", "tree")) if keep_tree else (("clique", "clique"),)
        sync = []
        if dirty is None:
            for key, what in names:
                n = int(cur[key].size)
                sync.append((cur[key], spare[key], [0], [0], [n]))
                if stats is not None:
                    stats.add(what, "device_full", cur[key].nbytes)
            ts, tl = points_complement(t_idx, int(cur["tcost"].size))
            kind = "device_full"
        else:  # (not what this update's levels rewrite whole: its cells' cliques and trees)
            for key, what in names:
                s_, l_ = difference(dirty[key], ranges["clique_ext" if key == "clique" else "tree"])
                sync.append((cur[key], spare[key], s_, s_, l_))
                if stats is not None and s_.size:
                    stats.add(what, "device_sync", int(l_.sum()) * cur[key].dtype.itemsize, s_.size)
            ts, tl = index_ranges(np.setdiff1d(dirty["into"], t_idx))
            kind = "device_sync"
        sync.append((cur["tcost"], spare["tcost"], ts, ts, tl))
        if stats is not None and ts.size:
            stats.add("turn_cost", kind, 8 * int(tl.sum()), ts.size)
        if t_idx.size:  # runs of consecutive turns: one range each, from the uploaded values
            rs = np.concatenate([np.zeros(1, np.int64), np.flatnonzero(np.diff(t_idx) != 1) + 1])
            rl = np.diff(np.concatenate([rs, np.array([t_idx.size], np.int64)]))
            sync.append((staged.add(t_val), spare["tcost"], rs, t_idx[rs], rl))
            if stats is not None:
                stats.add("turn_cost", "device_sync", 8 * int(t_idx.size), int(rs.size))
        sync_tab = self._stage_copies(staged, sync)
        # 2. the levels' work units and in-edge ranges
        plan = self.plan
        ext_cells = plan.ext_cells(cells_per_level)
        threads = max(self.threads, int(config.CRP_UPDATE_THREADS))
        threads = min(threads, int(getattr(self.k_level, "max_threads_per_block", threads)))
        target = int(config.CRP_UPDATE_TARGET_UNITS)
        level_work = []
        for p, lv in enumerate(self.levels):
            if lv is None:  # microinstructions
                blocks = self.micro["prog"].blocks_of(ext_cells[p])
                level_work.append({"blocks": staged.add(blocks), "nb": int(blocks.size)})
                continue
            w = {"nu": 0}
            split = self.update_units(p, ext_cells[p], target) if target > 0 and ext_cells[p].size else None
            if split is not None:  # the dirty cells' own units (see update_units)
                nu = int(split[0].size)
                w.update(nu=nu, units=staged.add(np.arange(nu, dtype=np.int32)), u_cell=staged.add(split[0]),
                         u_i0=staged.add(split[1]), u_g=staged.add(split[2]), u_scr=staged.add(split[3]))
            else:
                mask = np.isin(lv["host"]["u_cell"], np.asarray(ext_cells[p], np.int64))
                units = np.flatnonzero(mask).astype(np.int32)
                w.update(nu=int(units.size), units=staged.add(units))
            if w["nu"] and lv["n_edges"]:  # the dirty cells' incoming edges only (contiguous per cell)
                h = lv["host"]
                c = ext_cells[p]
                rf = h["r_first"][h["vf"][c]]
                w["pairs"] = staged.add(np.stack([rf, h["r_first"][h["vf"][c + 1]] - rf], axis=1).ravel())
                w["nr"] = int(c.size)
            level_work.append(w)
        # 3. the re-customized cells' cliques (query levels) and trees, packed, each range 16-byte aligned
        cs, cd, cl = ranges["clique_copy"]
        c_at, c_size = padded_offsets(cs, cl, 8)
        pc = cp.empty(max(c_size, 1), np.int64)
        pack = [(spare["clique"], pc, cs, c_at, cl)]
        pt, t_at, t_size = None, EMPTY[0], 0
        if keep_tree:
            ts2, tl2 = ranges["tree"]
            t_at, t_size = padded_offsets(ts2, tl2, spare["tree"].dtype.itemsize)
            pt = cp.empty(max(t_size, 1), spare["tree"].dtype)
            pack.append((spare["tree"], pt, ts2, t_at, tl2))
        pack_tab = self._stage_copies(staged, pack)
        if stats is not None:
            stats.add("clique", "device_pack", 8 * int(cl.sum()), cl.size)
            if keep_tree:
                stats.add("tree", "device_pack", int(ranges["tree"][1].sum()) * pt.dtype.itemsize, ranges["tree"][0].size)
        # one upload of every descriptor, then the device work back to back
        self.rounds.fill(0)
        ev_up = cp.cuda.Event()
        ev_up.record()
        nbytes = staged.upload(cp)
        if stats is not None:
            stats.add("descriptors", "upload", nbytes, 1)
        ev0 = cp.cuda.Event()
        self._copy_launch(staged, sync_tab, ev0)
        clique, tree, tcost = spare["clique"], spare["tree"], spare["tcost"]
        ev = [cp.cuda.Event()]
        ev[0].record()
        for p, lv in enumerate(self.levels):
            w = level_work[p]
            if lv is None:  # microinstructions
                mi = self.micro
                md = mi["dev"]
                if w["nb"]:
                    self.k_micro((w["nb"],), (mi["threads"],),
                                 (staged.dev(w["blocks"]), md["b_arc_first"], md["ai_turn"], md["ai_pos"], md["b_lay_first"],
                                  md["lay_word"], md["words"], md["b_wide"], md["b_scr"], md["b_out_first"], md["o_pos"],
                                  md["o_dst"], np.int32(mi["prog"].a_bits), np.int32(mi["prog"].db_bits), tcost, clique,
                                  mi["scratch"]), shared_mem=mi["smem"])
            elif w["nu"]:
                d = lv["dev"]
                if "u_cell" in w:
                    u_cell, u_i0, u_g, u_scr = (staged.dev(w[k]) for k in ("u_cell", "u_i0", "u_g", "u_scr"))
                else:
                    u_cell, u_i0, u_g, u_scr = d["u_cell"], d["u_i0"], d["u_g"], d["u_scr"]
                if "pairs" in w:  # (a cell's edges are one range in the in-edge and the forward order alike)
                    nr = w["nr"]
                    self.k_aggregate_ranges((min(nr, 65535),), (256,), (np.int64(nr), staged.dev(w["pairs"]),
                                                                         d["f_ref" if lv["push"] else "r_ref"], tcost,
                                                                         clique, self.ecost))
                self.launch_level(p, w["nu"], staged.dev(w["units"]), (u_cell, u_i0, u_g, u_scr), clique,
                                   tree if keep_tree else self._no_tree(), keep_tree, threads)
            e = cp.cuda.Event()
            e.record()
            ev.append(e)
        self._copy_launch(staged, pack_tab)
        ev_pack = cp.cuda.Event()
        ev_pack.record()
        dirty_new = {"clique": ranges["clique_ext"], "tree": ranges["tree"], "into": into}
        return {"clique": clique, "tree": tree, "tcost": tcost, "dirty": dirty_new, "events": ev, "ev0": ev0,
                "ev_up": ev_up, "ev_pack": ev_pack, "packed": (pc, c_size, pt, t_size), "pack_at": (c_at, t_at),
                "staged": staged, "keep_tree": keep_tree, "stats": stats, "launch_s": time.perf_counter() - t0}

    def _no_tree(self):
        t = getattr(self, "_tree1", None)
        if t is None:
            t = self._tree1 = self.cp.empty(1, self.tree_dtype)
        return t

    def finish_update(self, run, stats=None):
        """Wait for :meth:`launch_update`'s run, copy its packed cliques back; its packed trees come back
        asynchronously on the second stream.

        Returns
        -------
        (level_seconds list of float (per plan level), packed cliques int64 (pinned host), wait)
            ``wait()`` waits for the packed trees and returns them (pinned host; None without trees). Range
            ``r`` of ``ranges["clique_copy"]`` (``ranges["tree"]``) is at ``run["pack_at"][0][r]`` (``[1][r]``)
            of the packed cliques (trees).
            ``run["device_seconds"]`` (CUDA events, seconds): ``sync`` (the spare brought up to date and the
            new turn costs written: one launch), ``levels``, ``pack`` (one launch), ``total`` (their sum), and
            ``upload`` (the descriptors' one host-to-device copy before them, the host's staging included).
        """
        import cupyx

        cp = self.cp
        ev = run["events"]
        pc, nc, pt, nt = run["packed"]
        stats = run.get("stats") if stats is None else stats
        tree_h = None
        done = None
        if pt is not None and nt == 0:
            tree_h = np.zeros(0, pt.dtype)
        elif pt is not None:
            tree_h = cupyx.empty_pinned((nt,), pt.dtype)
            side = self.copy_stream
            side.wait_event(run["ev_pack"])
            done = cp.cuda.Event()
            with side:
                pt[:nt].get(out=tree_h, stream=side, blocking=False)
                done.record(side)
        clique_h = cupyx.empty_pinned((nc,), np.int64)
        run["ev_pack"].synchronize()
        if nc:
            pc[:nc].get(out=clique_h)
        if stats is not None:
            stats.add("clique", "download", 8 * nc, 1)
            if pt is not None:
                stats.add("tree", "download", nt * pt.dtype.itemsize, 1)
        level_s = [cp.cuda.get_elapsed_time(ev[i], ev[i + 1]) / 1e3 for i in range(len(ev) - 1)]
        sync = cp.cuda.get_elapsed_time(run["ev0"], ev[0]) / 1e3
        pack = cp.cuda.get_elapsed_time(ev[-1], run["ev_pack"]) / 1e3
        up = cp.cuda.get_elapsed_time(run["ev_up"], run["ev0"]) / 1e3
        run["device_seconds"] = {"sync": sync, "levels": sum(level_s), "pack": pack, "total": sync + sum(level_s) + pack,
                                 "upload": up}
        run["rounds"] = [int(x) for x in self.rounds.get()]

        def wait(done=done, tree_h=tree_h, pt=pt):  # keeps the packed device trees alive until copied
            if done is not None:
                done.synchronize()
            return tree_h

        return level_s, clique_h, wait
