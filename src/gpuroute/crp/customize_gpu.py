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
"""
from __future__ import annotations

import time

import numpy as np

from .. import config
from ..backend.kernels import load_module

KERNELS = "crp/customize.cu"


def _units(vf, ent_first, smem_items, max_group):
    """Work units of one level: (cell int32, first entry int32, entries g int32, scratch offset int64 or
    -1) per unit, and the scratch size (int64 items).

    A cell with ``n`` vertices and ``k`` entry points gets units of ``g = min(k, smem_items // n,
    max_group)`` entries (at least 1); where ``n > smem_items`` its units (one entry each) use scratch.
    """
    n = np.diff(vf)
    k = np.diff(ent_first)
    g = np.minimum(np.minimum(k, max_group), np.maximum(smem_items // np.maximum(n, 1), 1))
    live = (n > 0) & (k > 0)
    g = np.where(live, np.maximum(g, 1), 0)
    per = np.where(live, -(-k // np.maximum(g, 1)), 0)
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


def prepare_level(lg, ent_first, ex_first, smem_items, max_group, target_units=0):
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
        Split cells into at least about this many units where the level has few cells (0: no target).

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
        ``ent_first``/``ex_first``.
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
    if target_units and nc and k_all:
        group = max(1, min(max_group, -(-k_all // target_units)))
    u_cell, u_i0, u_g, u_scr, scratch = _units(vf, ent_first, smem_items, group)
    return dict(vf=vf, v_orig=v_orig, f_first=f_first, f_dst=f_dst, r_first=r_first, r_src=r_src, r_fe=r_fe, r_ref=r_ref, ent_loc=ent_loc,
                ex_loc=ex_loc, ent_first=np.asarray(ent_first, np.int64), ex_first=np.asarray(ex_first, np.int64),
                u_cell=u_cell, u_i0=u_i0, u_g=u_g, u_scr=u_scr, scratch=scratch)


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
        self.frontier = bool(config.CRP_GPU_FRONTIER)
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
            h = prepare_level(lg, ent_first, ex_first, self.smem_items, int(config.CRP_GPU_MAX_GROUP),
                              int(config.CRP_GPU_TARGET_UNITS))
            cb0, cb1 = int(self.cell_base[p]), int(self.cell_base[p + 1])
            dev = {key: cp.asarray(val) for key, val in h.items() if isinstance(val, np.ndarray)}
            dev["cq_first"] = cp.asarray(np.ascontiguousarray(cq[cb0:cb1 + 1], np.int64))
            dev["tree_first"] = cp.asarray(np.ascontiguousarray(tf[cb0:cb1 + 1], np.int64))
            dev["all_units"] = cp.arange(h["u_cell"].size, dtype=np.int32)
            self.levels.append({"host": {"u_cell": h["u_cell"]}, "dev": dev, "n_edges": int(h["r_ref"].size),
                                "n_units": int(h["u_cell"].size)})
            scratch = max(scratch, h["scratch"])
            max_e = max(max_e, int(h["r_ref"].size))
        self.scratch = cp.empty(max(scratch, 1), np.int64)
        self.ecost = cp.empty(max_e, np.int64)
        self.rounds = cp.zeros(len(self.levels), np.int32)
        self.copy_stream = cp.cuda.Stream(non_blocking=True)
        # the device copy of the current customization (None until the first run is committed)
        self.current = None
        self.setup_seconds = time.perf_counter() - t0

    def units(self, p, cells):
        """Device int32 indices of the level-``p`` work units of ``cells`` (level-local cell ids)."""
        cp = self.cp
        lv = self.levels[p]
        if cells is None:
            return lv["dev"]["all_units"]
        mask = np.isin(lv["host"]["u_cell"], np.asarray(cells, np.int64))
        return cp.asarray(np.flatnonzero(mask).astype(np.int32))

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
            if base is not None or self.current is None or (keep_tree and self.current[1] is None):
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
                clique = self.current[0].copy()
                tree = self.current[1].copy() if keep_tree else cp.empty(1, self.tree_dtype)
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
        smem = self.smem_items * 10  # distances + two frontier flags per vertex (vertices <= distances)
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
            if E:
                self.k_aggregate(((E + 255) // 256,), (256,), (np.int64(E), d["r_ref"], tcost, clique, self.ecost))
            units = self.units(p, None if not partial else ext_cells[p])
            nu = int(units.size)
            if nu:
                self.k_level((nu,), (self.threads,),
                             (units, d["u_cell"], d["u_i0"], d["u_g"], d["u_scr"], d["vf"], d["v_orig"], d["f_first"],
                              d["f_dst"], d["r_first"], d["r_src"],
                              d["r_fe"], self.ecost, d["ent_first"], d["ent_loc"], d["ex_first"], d["ex_loc"],
                              d["cq_first"], d["tree_first"], clique, tree, self.scratch, np.int32(keep_tree),
                              np.int32(self.smem_items), np.int32(self.frontier), self.rounds[p:]), shared_mem=smem)
            e = cp.cuda.Event()
            e.record()
            ev.append(e)
        return {"clique": clique, "tree": tree, "events": ev, "keep_tree": keep_tree, "launch_s": time.perf_counter() - t0}

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
        """Make a finished run the device copy that later partial runs start from."""
        self.current = (run["clique"], run["tree"] if run["keep_tree"] else None)
