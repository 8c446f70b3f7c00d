"""Microinstructions: contraction-based customization of the lowest level's cells, planned once per topology
and executed per metric (CPU twin here, GPU kernel ``crp_micro`` in ``customize.cu``).

Follows Delling, Kobitzsch, Werneck, "Customizing Driving Directions with GPUs" (Euro-Par 2014), sec. 4
("Contraction-Based Customization"), after Delling and Werneck's CPU microinstructions:

* **Simulation** (metric-independent, once). A lowest-level cell's search graph (:mod:`gpuroute.crp.topology`:
  vertices are the arcs ending in the cell plus, as sinks, its exit points; edges are turns) has entry
  vertices (no in-edges), exit sinks (no out-edges) and inner vertices. Contracting every inner vertex
  ``v`` -- for each in-edge ``(u, v)`` and out-edge ``(v, w)``, ``u != w``, the shortcut ``(u, w) =
  min((u, w), (u, v) + (v, w))`` -- leaves the bipartite graph entry -> exit whose costs are the clique.
  The order is a greedy minimum-degree order (fewest instructions next; the paper: a nested-dissection
  order): any order gives the same distances. Each shortcut operation is recorded as a **triple**
  ``(a, b, c)``: read positions ``a`` and ``b`` of the memory array ``M``, write ``min(M[c], M[a] + M[b])``
  to ``c`` (or ``M[a] + M[b]`` where the instruction is the first to write ``c``: the 32nd bit).
  Instructions whose result no output needs are dropped (dead code), and so are their operands.
* **Arc instructions** initialise ``M`` with the decoded turn costs (the metric decoder's output;
  forbidden turns read as ``INF``).
* **Layers**: an instruction goes to the earliest layer after the layers that write its operands, after
  the first write of its target, and where no other instruction writes its target (instructions of one
  layer are independent: distinct targets, none read in the layer). The GPU runs one thread per
  instruction of a layer and a block barrier between layers.
* **Memory reuse**: layers are walked from the first; a position whose last reader ran in an earlier layer
  returns to a pool, and a target written for the first time takes the free position closest to its
  second operand (so that the triple stays compact), else a new one. Output positions are never freed.
* **Encoding**: with ``a < b`` (operands swapped), the compact form packs the block-relative ``a``
  (``a_bits``: enough for a block's shared ``M``, 12 bits for 24 KiB of int64), ``b - a - 1`` (``db_bits``)
  and ``c - b + 2**(dc_bits - 1)`` (``dc_bits``, the rest of 31 bits) and the first-write flag (bit 31) into
  one 32-bit word (the paper: 14, 8 and 9 bits for 48 KiB of int32 ``M``); a cell with any instruction
  outside those ranges is encoded wide (two words: ``a``, ``b``, ``c`` 21 bits each, flag bit 63). Where
  three block-relative positions fit 31 bits (blocks of at most 1,024 positions, 8 KiB of int64 ``M``), the
  compact form holds them as they are (``a | b << a_bits | c << 2 a_bits``, ``db_bits = 0``): every cell in
  shared memory is then compact.
* **Packing**: cells are sorted by (encoding, layers, memory) and packed greedily into thread blocks while
  their memory arrays fit ``smem_items`` int64 positions (compact and wide cells never share a block); a
  block's instructions are sorted by layer across its cells, and its header stores the layer offsets. A
  cell whose ``M`` alone does not fit gets a block of its own with ``M`` in a slice of global scratch.
* **Outputs**: one entry per clique value: the block-relative position holding it (-1: no path, ``INF``)
  and its index in the clique array.

Values are int64 (exact whatever the metric), ``INF`` (``CLIQUE_INF``) where there is no path; costs are
positive, so loops (``u == w``) are never useful and are not generated.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numba
import numpy as np
from numba import njit, prange

from ..graph.constants import INF

#: Most bits of a block-relative position in the compact encoding (128 KiB of int64 ``M``).
MAX_A_BITS = 14
#: Wide encoding: 21 bits per position, bit 63 flags a first write.
WIDE_BITS = 21
FIRST_BIT = np.uint32(1 << 31)


# ------------------------------------------------------------------------------------------ simulation
@njit(cache=True, nogil=True)
def _grow(a, need):
    if need <= a.size:
        return a
    b = np.empty(max(need, 2 * a.size), a.dtype)
    b[:a.size] = a
    return b


@njit(cache=True, nogil=True)
def _fill(v, n, adj, alive, ins, outs):
    """Shortcuts the contraction of ``v`` would add (pairs in-neighbour -> out-neighbour without an edge)."""
    k_in = 0
    k_out = 0
    for u in range(n):
        if alive[u] and adj[u, v] >= 0:
            ins[k_in] = u
            k_in += 1
        if alive[u] and adj[v, u] >= 0:
            outs[k_out] = u
            k_out += 1
    f = 0
    for i in range(k_in):
        u = ins[i]
        for j in range(k_out):
            w = outs[j]
            if u != w and adj[u, w] < 0:
                f += 1
    return f


@njit(cache=True, nogil=True)
def cell_program(n, esrc, edst, ents, exs):
    """Simulate the contraction of one cell and schedule its microinstructions.

    Parameters
    ----------
    n : int
        Vertices of the cell (local ids ``0 .. n - 1``).
    esrc, edst : int64 (E,)
        Edges (turns) as local vertex pairs; an edge's id is its position. Loops are ignored.
    ents, exs : int64
        Entry vertices (rows of the clique) and exit sinks (columns), never contracted.

    Returns
    -------
    arc_edge : int64 (k,)
        The original edges whose cost initialises ``M`` (arc instructions), at positions ``arc_pos``.
    arc_pos : int32 (k,)
    ins_a, ins_b, ins_c : int32 (I,)
        Instruction triples as positions of ``M`` (``ins_a < ins_b``), sorted by layer.
    ins_first : bool (I,)
        The instruction is the first write of its target (overwrite, not min).
    ins_layer : int32 (I,)
    out_pos : int32 (len(ents) * len(exs),)
        Position of each clique value (row-major entries x exits), -1 for no path.
    mem : int
        Positions of ``M`` used.

    Raises
    ------
    ValueError
        Two edges join the same ordered pair of vertices (the lowest level's turns never do).
    """
    E0 = esrc.size
    term = np.zeros(n, np.bool_)
    for v in ents:
        term[v] = True
    for v in exs:
        term[v] = True
    adj = np.full((n, n), -1, np.int32)
    indeg = np.zeros(n, np.int64)
    outdeg = np.zeros(n, np.int64)
    for e in range(E0):
        u = esrc[e]
        w = edst[e]
        if u == w:
            continue
        if adj[u, w] >= 0:
            raise ValueError("cell_program: parallel edges in a lowest-level cell")
        adj[u, w] = e
        outdeg[u] += 1
        indeg[w] += 1
    alive = np.ones(n, np.bool_)
    ia = np.empty(64, np.int32)
    ib = np.empty(64, np.int32)
    ic = np.empty(64, np.int32)
    ifst = np.empty(64, np.bool_)
    ni = 0
    n_edges = E0
    ins = np.empty(n, np.int64)
    outs = np.empty(n, np.int64)
    # greedy minimum fill: contract the inner vertex whose contraction adds the fewest new shortcuts (ties:
    # the fewest instructions, then the lowest id); fills are recomputed for the vertices a contraction
    # can change (its neighbours and the out-neighbours of its in-neighbours)
    fill = np.zeros(n, np.int64)
    dirty = np.zeros(n, np.bool_)
    n_inner = 0
    for v in range(n):
        if not term[v]:
            n_inner += 1
            dirty[v] = True
    for _ in range(n_inner):
        best = -1
        bestf = np.int64(1) << 62
        bestp = np.int64(1) << 62
        for v in range(n):
            if alive[v] and not term[v]:
                if dirty[v]:
                    fill[v] = _fill(v, n, adj, alive, ins, outs)
                    dirty[v] = False
                f = fill[v]
                p = indeg[v] * outdeg[v]
                if f < bestf or (f == bestf and p < bestp):
                    bestf = f
                    bestp = p
                    best = v
        v = best
        k_in = 0
        k_out = 0
        for u in range(n):
            if alive[u] and adj[u, v] >= 0:
                ins[k_in] = u
                k_in += 1
        for w in range(n):
            if alive[w] and adj[v, w] >= 0:
                outs[k_out] = w
                k_out += 1
        for i in range(k_in):
            u = ins[i]
            for j in range(k_out):
                w = outs[j]
                if u == w:
                    continue
                c = adj[u, w]
                first = c < 0
                if first:
                    c = n_edges
                    n_edges += 1
                    adj[u, w] = c
                    outdeg[u] += 1
                    indeg[w] += 1
                if ni == ia.size:
                    ia = _grow(ia, ni + 1)
                    ib = _grow(ib, ni + 1)
                    ic = _grow(ic, ni + 1)
                    ifst = _grow(ifst, ni + 1)
                ia[ni] = adj[u, v]
                ib[ni] = adj[v, w]
                ic[ni] = c
                ifst[ni] = first
                ni += 1
        for i in range(k_in):
            outdeg[ins[i]] -= 1
        for j in range(k_out):
            indeg[outs[j]] -= 1
        alive[v] = False
        for i in range(k_in):
            u = ins[i]
            dirty[u] = True
            for x in range(n):
                if adj[u, x] >= 0:
                    dirty[x] = True
        for j in range(k_out):
            dirty[outs[j]] = True
    ne = ents.size
    nx = exs.size
    final = np.full(ne * nx, -1, np.int64)
    live = np.zeros(n_edges, np.bool_)
    for i in range(ne):
        for j in range(nx):
            e = adj[ents[i], exs[j]]
            final[i * nx + j] = e
            if e >= 0:
                live[e] = True
    # dead code: an instruction lives if its target is read by a live instruction or is an output
    keep = np.zeros(ni, np.bool_)
    for k in range(ni - 1, -1, -1):
        if live[ic[k]]:
            keep[k] = True
            live[ia[k]] = True
            live[ib[k]] = True
    # layers: after the writers of the operands, after the target's first write, no two writers of a
    # target in one layer
    ready = np.zeros(n_edges, np.int64)
    first_layer = np.full(n_edges, -1, np.int64)
    w_head = np.full(n_edges, -1, np.int64)   # writers of each target: linked list over instructions
    w_next = np.full(ni, -1, np.int64)
    layer = np.full(ni, -1, np.int64)
    depth = 0
    for k in range(ni):
        if not keep[k]:
            continue
        a = ia[k]
        b = ib[k]
        c = ic[k]
        lo = max(ready[a], ready[b])
        if not ifst[k]:
            lo = max(lo, first_layer[c] + 1)
        L = lo
        while True:
            clash = False
            q = w_head[c]
            while q >= 0:
                if layer[q] == L:
                    clash = True
                    break
                q = w_next[q]
            if not clash:
                break
            L += 1
        layer[k] = L
        w_next[k] = w_head[c]
        w_head[c] = k
        if ifst[k]:
            first_layer[c] = L
        if L + 1 > ready[c]:
            ready[c] = L + 1
        if L + 1 > depth:
            depth = L + 1
    # last reader of each edge (outputs: never freed)
    last_read = np.full(n_edges, -1, np.int64)
    for k in range(ni):
        if keep[k]:
            for e in (ia[k], ib[k]):
                if layer[k] > last_read[e]:
                    last_read[e] = layer[k]
    is_out = np.zeros(n_edges, np.bool_)
    for i in range(ne * nx):
        if final[i] >= 0:
            is_out[final[i]] = True
    # positions: live original edges first (arc instructions), then targets as their first write comes
    pos = np.full(n_edges, -1, np.int64)
    mem = 0
    n_arc = 0
    for e in range(E0):
        if live[e] and esrc[e] != edst[e]:
            pos[e] = mem
            mem += 1
            n_arc += 1
    arc_edge = np.empty(n_arc, np.int64)
    arc_pos = np.empty(n_arc, np.int32)
    j = 0
    for e in range(E0):
        if pos[e] >= 0:
            arc_edge[j] = e
            arc_pos[j] = pos[e]
            j += 1
    # instructions by layer (program order within a layer)
    n_keep = 0
    for k in range(ni):
        if keep[k]:
            n_keep += 1
    order = np.empty(n_keep, np.int64)
    cnt = np.zeros(depth + 1, np.int64)
    for k in range(ni):
        if keep[k]:
            cnt[layer[k] + 1] += 1
    for L in range(depth):
        cnt[L + 1] += cnt[L]
    fill = cnt[:depth].copy()
    for k in range(ni):
        if keep[k]:
            order[fill[layer[k]]] = k
            fill[layer[k]] += 1
    # edges freed after each layer (their last reader ran in it)
    fcnt = np.zeros(depth + 1, np.int64)
    for e in range(n_edges):
        if last_read[e] >= 0 and not is_out[e]:
            fcnt[last_read[e] + 1] += 1
    for L in range(depth):
        fcnt[L + 1] += fcnt[L]
    freed = np.empty(fcnt[depth], np.int64)
    ffill = fcnt[:depth].copy()
    for e in range(n_edges):
        if last_read[e] >= 0 and not is_out[e]:
            freed[ffill[last_read[e]]] = e
            ffill[last_read[e]] += 1
    free = np.zeros(mem + n_keep + 1, np.bool_)
    oa = np.empty(n_keep, np.int32)
    ob = np.empty(n_keep, np.int32)
    oc = np.empty(n_keep, np.int32)
    of = np.empty(n_keep, np.bool_)
    ol = np.empty(n_keep, np.int32)
    for L in range(depth):
        if L > 0:
            for q in range(fcnt[L - 1], fcnt[L]):
                free[pos[freed[q]]] = True
        for q in range(cnt[L], cnt[L + 1]):
            k = order[q]
            pa = pos[ia[k]]
            pb = pos[ib[k]]
            if pa > pb:
                pa, pb = pb, pa
            c = ic[k]
            if ifst[k]:
                # the free position closest to pb (ties: the lower), or a new one
                best = mem
                bestd = mem - pb if mem >= pb else pb - mem
                for d in range(1, max(pb, mem - pb) + 1):
                    if d >= bestd:
                        break
                    lo_ = pb - d
                    hi_ = pb + d
                    if lo_ >= 0 and free[lo_]:
                        best = lo_
                        break
                    if hi_ < mem and free[hi_]:
                        best = hi_
                        break
                if best == mem:
                    mem += 1
                else:
                    free[best] = False
                pos[c] = best
            oa[q] = pa
            ob[q] = pb
            oc[q] = pos[c]
            of[q] = ifst[k]
            ol[q] = L
    out_pos = np.empty(ne * nx, np.int32)
    for i in range(ne * nx):
        out_pos[i] = -1 if final[i] < 0 else pos[final[i]]
    return arc_edge, arc_pos, oa, ob, oc, of, ol, out_pos, mem


# ------------------------------------------------------------------------------------------ program
@dataclass
class MicroProgram:
    """The microinstructions of one level's cells, packed into thread blocks (see the module docstring).

    Attributes
    ----------
    n_blocks : int
    cell_block : int32 (n_cells,)
        Block of each cell (-1: a cell without clique values).
    b_arc_first : int64 (B + 1,); ai_turn, ai_pos : int32
        Arc instructions of block ``b``: ``M[ai_pos[k]] = turn_cost[ai_turn[k]]`` (``INF`` if negative).
    b_lay_first : int64 (B + 1,); lay_word : int64
        Block ``b``'s layer ``l`` is the words ``[lay_word[b_lay_first[b] + l], lay_word[b_lay_first[b] + l + 1])``
        (``b_lay_first`` steps by the block's layers + 1).
    words : uint32
        Encoded instructions (two words each in a wide block).
    b_wide : uint8 (B,)
    b_mem : int32 (B,)
        Positions of the block's ``M``.
    b_scr : int64 (B,)
        -1: ``M`` in shared memory; else its offset in a global scratch of ``scratch`` int64 items.
    b_out_first : int64 (B + 1,); o_pos : int32; o_dst : int64
        Outputs of block ``b``: ``clique[o_dst[k]] = M[o_pos[k]]`` (``INF`` where ``o_pos[k] < 0``).
    a_bits, db_bits : int
        Compact encoding's field widths (:func:`field_bits`).
    smem_items : int
        Shared ``M`` positions a block may use.
    stats : dict
        Cells, instructions, arc instructions, layers, memory, compact and wide cells, words.
    """

    n_blocks: int
    cell_block: np.ndarray
    b_arc_first: np.ndarray
    ai_turn: np.ndarray
    ai_pos: np.ndarray
    b_lay_first: np.ndarray
    lay_word: np.ndarray
    words: np.ndarray
    b_wide: np.ndarray
    b_mem: np.ndarray
    b_scr: np.ndarray
    scratch: int
    b_out_first: np.ndarray
    o_pos: np.ndarray
    o_dst: np.ndarray
    a_bits: int
    db_bits: int
    smem_items: int
    stats: dict = field(default_factory=dict)

    #: The per-block arrays the kernel reads (:meth:`arrays`).
    ARRAYS = ("cell_block", "b_arc_first", "ai_turn", "ai_pos", "b_lay_first", "lay_word", "words", "b_wide", "b_mem",
              "b_scr", "b_out_first", "o_pos", "o_dst")

    def arrays(self):
        """The per-block arrays the kernel reads, by name (for upload, and saved with an overlay)."""
        return {k: getattr(self, k) for k in self.ARRAYS}

    #: The scalar fields :meth:`scalars` and :meth:`from_saved` carry beside :meth:`arrays`.
    SCALARS = ("n_blocks", "scratch", "a_bits", "db_bits", "smem_items")

    def scalars(self):
        """The program's scalar fields and its ``stats`` (JSON-able), for saving beside :meth:`arrays`."""
        return {**{k: int(getattr(self, k)) for k in self.SCALARS},
                "stats": {k: (v.item() if hasattr(v, "item") else v) for k, v in self.stats.items()}}

    @classmethod
    def from_saved(cls, arrays, scalars):
        """The program of :meth:`arrays` and :meth:`scalars` (as saved with an overlay).

        Raises
        ------
        ValueError
            A field missing (named).
        """
        names = cls.ARRAYS
        missing = [k for k in names if k not in arrays] + [k for k in cls.SCALARS if k not in scalars]
        if missing:
            raise ValueError(f"a saved microinstruction program lacks {', '.join(missing)}")
        return cls(**{k: arrays[k] for k in names}, **{k: int(scalars[k]) for k in cls.SCALARS},
                   stats=dict(scalars.get("stats") or {}))

    def blocks_of(self, cells):
        """int32 indices of the blocks holding ``cells`` (level-local ids), sorted and unique."""
        b = self.cell_block[np.asarray(cells, np.int64)]
        return np.unique(b[b >= 0]).astype(np.int32)


def field_bits(smem_items):
    """(a_bits, db_bits, dc_bits) of the compact encoding for blocks of ``smem_items`` shared positions;
    ``db_bits = dc_bits = 0``: the absolute form (three ``a_bits`` positions)."""
    a_bits = max(1, int(smem_items - 1).bit_length())
    if 3 * a_bits <= 31:
        return a_bits, 0, 0
    db_bits = (31 - a_bits) // 2
    return a_bits, db_bits, 31 - a_bits - db_bits


def is_compact(a, b, c, db_bits, dc_bits):
    """Whether every triple (``a < b``) fits the compact form's ``b - a`` and ``c - b`` fields (always, in the
    absolute form: there positions are checked against the block's memory at packing)."""
    if db_bits == 0:
        return True
    db = b - a
    dc = c - b
    return bool(((db >= 1) & (db <= (1 << db_bits)) & (dc >= -(1 << (dc_bits - 1)))
                 & (dc < (1 << (dc_bits - 1)))).all())


def encode_compact(a, b, c, first, a_bits, db_bits):
    """uint32 words of triples in the compact form (``a < 2**a_bits``, ranges checked by :func:`is_compact`)."""
    a = a.astype(np.int64)
    if db_bits == 0:
        w = a | (b.astype(np.int64) << a_bits) | (c.astype(np.int64) << (2 * a_bits))
        return np.where(first, w | (1 << 31), w).astype(np.uint32)
    dc_bits = 31 - a_bits - db_bits
    w = a | ((b - a - 1) << a_bits) | ((c - b + (1 << (dc_bits - 1))) << (a_bits + db_bits))
    return np.where(first, w | (1 << 31), w).astype(np.uint32)


def encode_wide(a, b, c, first):
    """uint32 words (low, high pairs) of triples in the wide form (21 bits a position, bit 63 first write)."""
    x = a.astype(np.uint64) | (b.astype(np.uint64) << np.uint64(WIDE_BITS)) | (c.astype(np.uint64) << np.uint64(2 * WIDE_BITS))
    x = np.where(first, x | (np.uint64(1) << np.uint64(63)), x).astype(np.uint64)
    out = np.empty(2 * x.size, np.uint32)
    out[0::2] = (x & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    out[1::2] = (x >> np.uint64(32)).astype(np.uint32)
    return out


def decode(words, wide, a_bits, db_bits):
    """(a, b, c, first) int64/bool arrays of encoded words (the kernel's decoding, for tests)."""
    words = np.asarray(words, np.uint32)
    if wide:
        x = words[0::2].astype(np.uint64) | (words[1::2].astype(np.uint64) << np.uint64(32))
        m = np.uint64((1 << WIDE_BITS) - 1)
        a = (x & m).astype(np.int64)
        b = ((x >> np.uint64(WIDE_BITS)) & m).astype(np.int64)
        c = ((x >> np.uint64(2 * WIDE_BITS)) & m).astype(np.int64)
        return a, b, c, (x >> np.uint64(63)).astype(bool)
    w = words.astype(np.int64)
    a = w & ((1 << a_bits) - 1)
    if db_bits == 0:
        return a, (w >> a_bits) & ((1 << a_bits) - 1), (w >> (2 * a_bits)) & ((1 << a_bits) - 1), (w >> 31).astype(bool)
    dc_bits = 31 - a_bits - db_bits
    b = a + 1 + ((w >> a_bits) & ((1 << db_bits) - 1))
    c = b + ((w >> (a_bits + db_bits)) & ((1 << dc_bits) - 1)) - (1 << (dc_bits - 1))
    return a, b, c, (w >> 31).astype(bool)


def build_program(lg, ent_first, ex_first, cq_first, smem_items, *, compact=True):
    """Microinstructions of every cell of one level (the lowest customization level), packed into blocks.

    Parameters
    ----------
    lg : gpuroute.crp.topology.LevelGraph
        The level's search graph; its edges must be turns (``e_ref >= 0``).
    ent_first, ex_first : int64 (n_cells + 1,)
        The level's entry and exit ranges (``level_first``).
    cq_first : int64 (n_cells + 1,)
        Offset of each cell's clique in the clique array the outputs are written to.
    smem_items : int
        int64 positions of ``M`` one block may keep in shared memory (at most ``2**14``); sets the compact
        encoding's field widths (:func:`field_bits`).
    compact : bool
        Use the compact encoding where a cell allows it (False: every cell wide).

    Returns
    -------
    MicroProgram

    Raises
    ------
    ValueError
        An edge that is not a turn, or ``smem_items`` outside ``[1, 2**14]``.
    """
    smem_items = int(smem_items)
    if not 1 <= smem_items <= (1 << MAX_A_BITS):
        raise ValueError(f"smem_items = {smem_items}: must be in [1, {1 << MAX_A_BITS}] (14-bit positions)")
    a_bits, db_bits, dc_bits = field_bits(smem_items)
    if lg.e_ref.size and int(lg.e_ref.min()) < 0:
        raise ValueError("build_program: the level's edges must be turns (the lowest customization level)")
    vf = lg.vert_first.astype(np.int64)
    ef = lg.e_first.astype(np.int64)
    nc = vf.size - 1
    tail = np.repeat(np.arange(vf[-1], dtype=np.int64), np.diff(ef))
    e_to = lg.e_to.astype(np.int64)
    ent_vert = lg.ent_vert.astype(np.int64)
    ex_vert = lg.ex_vert.astype(np.int64)

    def one(c):
        lo, hi = vf[c], vf[c + 1]
        if ent_first[c + 1] == ent_first[c] or ex_first[c + 1] == ex_first[c] or hi == lo:
            return None
        e0, e1 = ef[lo], ef[hi]
        arc_edge, arc_pos, a, b, cc, first, layer, out_pos, mem = cell_program(
            int(hi - lo), tail[e0:e1] - lo, e_to[e0:e1] - lo, ent_vert[ent_first[c]:ent_first[c + 1]] - lo,
            ex_vert[ex_first[c]:ex_first[c + 1]] - lo)
        depth = int(layer[-1]) + 1 if layer.size else 0
        return dict(turn=lg.e_ref[e0 + arc_edge].astype(np.int32), arc_pos=arc_pos, a=a, b=b, c=cc, first=first,
                    layer=layer, out_pos=out_pos, mem=int(mem), depth=depth,
                    compact=compact and is_compact(a, b, cc, db_bits, dc_bits), dst0=int(cq_first[c]))

    # cells are independent and cell_program releases the GIL: one thread per core
    with ThreadPoolExecutor(max(1, numba.get_num_threads())) as ex:
        cells = list(ex.map(one, range(nc), chunksize=64))
    return pack(cells, smem_items)


def pack(cells, smem_items):
    """Pack per-cell programs (:func:`build_program`'s records, None for cells without outputs) into blocks:
    cells sorted by (wide, layers, memory), a block filled while the memories fit ``smem_items``."""
    a_bits, db_bits, _ = field_bits(smem_items)
    live = [i for i, x in enumerate(cells) if x is not None]
    order = sorted(live, key=lambda i: (not cells[i]["compact"], -cells[i]["depth"], -cells[i]["mem"], i))
    groups = []
    cur, used, kind = [], 0, None
    for i in order:
        x = cells[i]
        m = max(x["mem"], 1)
        if m > smem_items:  # alone, in global scratch
            groups.append([i])
            continue
        if cur and (used + m > smem_items or x["compact"] != kind):
            groups.append(cur)
            cur, used = [], 0
        cur.append(i)
        used += m
        kind = x["compact"]
    if cur:
        groups.append(cur)
    B = len(groups)
    cell_block = np.full(len(cells), -1, np.int32)
    b_arc_first = np.zeros(B + 1, np.int64)
    b_lay_first = np.zeros(B + 1, np.int64)
    b_out_first = np.zeros(B + 1, np.int64)
    b_wide = np.zeros(B, np.uint8)
    b_mem = np.zeros(B, np.int32)
    b_scr = np.full(B, -1, np.int64)
    ai_turn, ai_pos, lay_word, words, o_pos, o_dst = [], [], [], [], [], []
    nwords = 0
    scratch = 0
    n_ins = 0
    for bi, grp in enumerate(groups):
        base = 0
        wide = not cells[grp[0]]["compact"]
        depth = max(cells[i]["depth"] for i in grp)
        A, Bq, C, F, Ly = [], [], [], [], []
        for i in grp:
            x = cells[i]
            cell_block[i] = bi
            ai_turn.append(x["turn"])
            ai_pos.append(x["arc_pos"] + base)
            A.append(x["a"].astype(np.int64) + base)
            Bq.append(x["b"].astype(np.int64) + base)
            C.append(x["c"].astype(np.int64) + base)
            F.append(x["first"])
            Ly.append(x["layer"])
            op = x["out_pos"].astype(np.int64)
            o_pos.append(np.where(op >= 0, op + base, -1).astype(np.int32))
            o_dst.append(x["dst0"] + np.arange(op.size, dtype=np.int64))
            base += max(x["mem"], 1)
        b_mem[bi] = base
        if base > smem_items:
            b_scr[bi] = scratch
            scratch += base
        A, Bq, C, F, Ly = (np.concatenate(v) for v in (A, Bq, C, F, Ly))
        srt = np.argsort(Ly, kind="stable")
        A, Bq, C, F, Ly = A[srt], Bq[srt], C[srt], F[srt], Ly[srt]
        n_ins += A.size
        if wide or base > smem_items:
            wide = True
            w = encode_wide(A, Bq, C, F)
        else:
            w = encode_compact(A, Bq, C, F, a_bits, db_bits)
        b_wide[bi] = wide
        per = 2 if wide else 1
        starts = np.searchsorted(Ly, np.arange(depth + 1)) * per + nwords
        lay_word.append(starts.astype(np.int64))
        words.append(w)
        nwords += w.size
        b_arc_first[bi + 1] = b_arc_first[bi] + sum(cells[i]["turn"].size for i in grp)
        b_lay_first[bi + 1] = b_lay_first[bi] + depth + 1
        b_out_first[bi + 1] = b_out_first[bi] + sum(cells[i]["out_pos"].size for i in grp)

    def cat(xs, dt):
        return np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt)

    depths = np.array([cells[i]["depth"] for i in live], np.int64)
    stats = {
        "cells": len(live), "blocks": B, "instructions": int(n_ins),
        "arc_instructions": int(b_arc_first[-1]), "outputs": int(b_out_first[-1]),
        "words": int(nwords), "wide_cells": int(sum(not cells[i]["compact"] for i in live)),
        "max_layers": int(depths.max()) if live else 0, "mean_layers": float(depths.mean()) if live else 0.0,
        "max_cell_mem": int(max((cells[i]["mem"] for i in live), default=0)),
        "mean_cell_mem": float(np.mean([cells[i]["mem"] for i in live])) if live else 0.0,
        "scratch_blocks": int((b_scr >= 0).sum()), "wide_blocks": int(b_wide.sum()),
        "block_layers_total": int(b_lay_first[-1] - B),
    }
    return MicroProgram(n_blocks=B, cell_block=cell_block, b_arc_first=b_arc_first, ai_turn=cat(ai_turn, np.int32),
                        ai_pos=cat(ai_pos, np.int32), b_lay_first=b_lay_first, lay_word=cat(lay_word, np.int64),
                        words=cat(words, np.uint32), b_wide=b_wide, b_mem=b_mem, b_scr=b_scr, scratch=int(scratch),
                        b_out_first=b_out_first, o_pos=cat(o_pos, np.int32), o_dst=cat(o_dst, np.int64),
                        a_bits=a_bits, db_bits=db_bits, smem_items=smem_items, stats=stats)


# ------------------------------------------------------------------------------------------ CPU twin
@njit(cache=True, parallel=True)
def run_program(blocks, b_arc_first, ai_turn, ai_pos, b_lay_first, lay_word, words, b_wide, b_mem, b_out_first,
                o_pos, o_dst, a_bits, db_bits, turn_cost, clique):
    """The CPU twin of the kernel ``crp_micro``: execute the blocks ``blocks`` of a :class:`MicroProgram`
    (same arrays, same decoding) and write their clique values into ``clique`` (int64, in place).

    Each layer runs as the GPU runs it, every instruction reading ``M`` as it was when the layer began
    (all reads, then all writes): a program whose layer held dependent instructions would give other
    values here. ``turn_cost`` int64 (T,), negative = forbidden (``INF``).
    """
    for bi in prange(blocks.size):
        b = blocks[bi]
        M = np.empty(max(b_mem[b], 1), np.int64)
        for k in range(b_arc_first[b], b_arc_first[b + 1]):
            t = turn_cost[ai_turn[k]]
            M[ai_pos[k]] = INF if t < 0 else t
        wide = b_wide[b] != 0
        l0 = b_lay_first[b]
        l1 = b_lay_first[b + 1]
        tmp = np.empty(0, np.int64)
        for li in range(l0, l1 - 1):
            w0 = lay_word[li]
            w1 = lay_word[li + 1]
            n = (w1 - w0) // 2 if wide else w1 - w0
            if tmp.size < n:
                tmp = np.empty(n, np.int64)
            for q in range(n):
                a, bb, c, first = _decode_one(words, w0, q, wide, a_bits, db_bits)
                va = M[a]
                vb = M[bb]
                tmp[q] = INF if (va == INF or vb == INF) else va + vb
            for q in range(n):
                a, bb, c, first = _decode_one(words, w0, q, wide, a_bits, db_bits)
                s = tmp[q]
                if first or s < M[c]:
                    M[c] = s
        for k in range(b_out_first[b], b_out_first[b + 1]):
            p = o_pos[k]
            clique[o_dst[k]] = INF if p < 0 else M[p]


@njit(cache=True, inline="always")
def _decode_one(words, w0, q, wide, a_bits, db_bits):
    if wide:
        x = np.uint64(words[w0 + 2 * q]) | (np.uint64(words[w0 + 2 * q + 1]) << np.uint64(32))
        m = np.uint64((1 << WIDE_BITS) - 1)
        a = np.int64(x & m)
        b = np.int64((x >> np.uint64(WIDE_BITS)) & m)
        c = np.int64((x >> np.uint64(2 * WIDE_BITS)) & m)
        return a, b, c, (x >> np.uint64(63)) != 0
    w = np.int64(words[w0 + q])
    a = w & ((np.int64(1) << a_bits) - 1)
    if db_bits == 0:
        b = (w >> a_bits) & ((np.int64(1) << a_bits) - 1)
        c = (w >> (2 * a_bits)) & ((np.int64(1) << a_bits) - 1)
        return a, b, c, (w >> 31) != 0
    dc_bits = 31 - a_bits - db_bits
    b = a + 1 + ((w >> a_bits) & ((np.int64(1) << db_bits) - 1))
    c = b + ((w >> (a_bits + db_bits)) & ((np.int64(1) << dc_bits) - 1)) - (np.int64(1) << (dc_bits - 1))
    return a, b, c, (w >> 31) != 0


def run(prog, turn_cost, clique, blocks=None):
    """Execute ``prog`` on the CPU (all blocks, or ``blocks``) into ``clique`` (see :func:`run_program`)."""
    if blocks is None:
        blocks = np.arange(prog.n_blocks, dtype=np.int32)
    run_program(np.asarray(blocks, np.int32), prog.b_arc_first, prog.ai_turn, prog.ai_pos, prog.b_lay_first,
                prog.lay_word, prog.words, prog.b_wide, prog.b_mem, prog.b_out_first, prog.o_pos, prog.o_dst,
                prog.a_bits, prog.db_bits, np.ascontiguousarray(turn_cost, np.int64), clique)
