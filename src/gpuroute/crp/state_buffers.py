"""Copy-on-write buffers for an overlay's customized states: a traffic update copies only what changed.

A customized state (:class:`gpuroute.crp.overlay.OverlayState`) is a snapshot: a query that read it keeps
reading the same arrays while updates install new states. An update used to copy every array of the state
(NY: arc costs 5.8 MB, turn costs 18 MB, cliques 4.3 MB, trees 29.5 MB, and the query-ordered costs
again) to change a few ranges of them. Here each array name has a ring of physical buffers, each tagged
with the generation it holds, and a log of the ranges each generation changed:

* :meth:`StateBuffers.derive` makes the next generation of an array from the current one in a buffer that
  no snapshot holds (recycled once nothing references it), copying from the current array only the ranges
  the generations since that buffer's changed; the caller then writes the new generation's dirty ranges
  (all of each: they are not copied). A buffer still referenced (a reader's snapshot, a view, an array
  handed out) is never written: a new one is allocated by a full copy instead. A snapshot therefore never
  changes, and readers of an old one never see the new metric mixed in.
* A full customization :meth:`~StateBuffers.install` s fresh arrays: every other buffer becomes stale (its
  next use is a full copy). So does a current array the ring did not make (a state installed from
  elsewhere: shared memory, a restored state): the ring starts again from it and never writes into it.

"Nothing references it" is read from the reference count (CPython): the ring's own reference and the
call's. NumPy views point at the array that owns the memory, so a view anywhere keeps a buffer in use.

The ranges are ``(starts, lengths)`` int64 pairs in elements, sorted and merged (:func:`merge`). On the GPU
(:mod:`gpuroute.crp.customize_gpu`) one kernel launch copies the ranges of several arrays: :func:`chunk_table`
describes them in bytes, cut into chunks; :func:`padded_offsets` packs ranges keeping their 16-byte alignment.
:class:`CopyStats` counts the bytes and ranges each array had copied (host, and the GPU's device copy:
:mod:`gpuroute.crp.customize_gpu`), so that tests check what an update copied without a clock.
"""
from __future__ import annotations

import sys

import numpy as np
from numba import njit

from .. import config

__all__ = ["StateBuffers", "CopyStats", "merge", "index_ranges", "cell_ranges", "union", "difference", "total",
           "update_ranges", "copy_ranges", "copy_ranges_fast", "move_ranges", "move_ranges_fast", "padded_offsets",
           "points_complement", "chunk_table", "EMPTY"]

#: No ranges.
EMPTY = (np.zeros(0, np.int64), np.zeros(0, np.int64))

# reference counting tells when a buffer is free: only where the interpreter has one we can read
_RECYCLE = sys.implementation.name == "cpython" and getattr(sys, "_is_gil_enabled", lambda: True)()


def merge(starts, lens):
    """Ranges ``[starts[i], starts[i] + lens[i])`` sorted, empty ones dropped, overlapping and adjacent ones
    merged: ``(starts, lens)`` int64."""
    s = np.asarray(starts, np.int64).ravel()
    n = np.asarray(lens, np.int64).ravel()
    keep = n > 0
    if not keep.all():
        s, n = s[keep], n[keep]
    if s.size <= 1:
        return s.copy(), n.copy()
    order = np.argsort(s, kind="stable")
    s, e = s[order], s[order] + n[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(s.size, bool)
    new[0] = True
    np.greater(s[1:], reach[:-1], out=new[1:])
    first = np.flatnonzero(new)
    ends = np.maximum.reduceat(e, first)
    return s[first], ends - s[first]


def index_ranges(idx):
    """The positions ``idx`` (any order, repeats allowed) as merged ranges (runs of consecutive ids)."""
    i = np.asarray(idx, np.int64).ravel()
    return merge(i, np.ones(i.size, np.int64))


def cell_ranges(first, cells):
    """The ranges ``[first[c], first[c + 1])`` of ``cells`` (global cell ids), merged."""
    c = np.asarray(cells, np.int64).ravel()
    return merge(first[c], first[c + 1] - first[c])


def union(*ranges):
    """The union of several merged ``(starts, lens)`` pairs, merged."""
    if not ranges:
        return EMPTY
    if len(ranges) == 1:
        return ranges[0]
    return merge(np.concatenate([r[0] for r in ranges]), np.concatenate([r[1] for r in ranges]))


def difference(a, b):
    """The elements of merged ranges ``a`` outside merged ranges ``b``, merged ``(starts, lens)``."""
    if not a[0].size or not b[0].size:
        return a
    one, zero = np.ones(a[0].size, np.int64), np.zeros(b[0].size, np.int64)
    pos = np.concatenate([a[0], a[0] + a[1], b[0], b[0] + b[1]])
    da = np.concatenate([one, -one, zero, zero])
    db = np.concatenate([np.zeros(2 * a[0].size, np.int64), 1 + zero, zero - 1])
    order = np.argsort(pos, kind="stable")
    pos = pos[order]
    inside = (np.cumsum(da[order]) > 0) & (np.cumsum(db[order]) == 0)  # over [pos[i], pos[i + 1])
    s, e = pos[:-1][inside[:-1]], pos[1:][inside[:-1]]
    return merge(s, e - s)


def total(ranges):
    """Elements covered by merged ranges."""
    return int(ranges[1].sum())


@njit(cache=True)
def copy_ranges(src, dst, starts, lens):
    """``dst[s:s + n] = src[s:s + n]`` for every range."""
    for r in range(starts.size):
        s = starts[r]
        for i in range(s, s + lens[r]):
            dst[i] = src[i]


#: Ranges at least this long are copied by NumPy slices (memcpy), shorter ones by one numba loop over all.
_LONG = 256


def copy_ranges_fast(src, dst, starts, lens):
    """:func:`copy_ranges`, long ranges by NumPy slices (memcpy: ~7x faster than the element loop on 2-byte
    trees), the short ones in one compiled loop."""
    long_ = lens >= _LONG
    if long_.any():
        for s, n in zip(starts[long_].tolist(), lens[long_].tolist(), strict=True):
            dst[s:s + n] = src[s:s + n]
        if not long_.all():
            copy_ranges(src, dst, starts[~long_], lens[~long_])
    elif starts.size:
        copy_ranges(src, dst, starts, lens)


@njit(cache=True)
def move_ranges(src, src_starts, dst, dst_starts, lens):
    """``dst[d:d + n] = src[s:s + n]`` for every range ``(s, d, n)`` (``src`` and ``dst`` distinct arrays)."""
    for r in range(lens.size):
        s, d = src_starts[r], dst_starts[r]
        for i in range(lens[r]):
            dst[d + i] = src[s + i]


def move_ranges_fast(src, src_starts, dst, dst_starts, lens):
    """:func:`move_ranges`, long ranges by NumPy slices (memcpy), the short ones in one compiled loop."""
    src_starts = np.asarray(src_starts, np.int64)
    dst_starts = np.asarray(dst_starts, np.int64)
    lens = np.asarray(lens, np.int64)
    long_ = lens >= _LONG
    if long_.any():
        for s, d, n in zip(src_starts[long_].tolist(), dst_starts[long_].tolist(), lens[long_].tolist(), strict=True):
            dst[d:d + n] = src[s:s + n]
        short = ~long_
        if short.any():
            move_ranges(src, src_starts[short], dst, dst_starts[short], lens[short])
    elif lens.size:
        move_ranges(src, src_starts, dst, dst_starts, lens)


def padded_offsets(src_starts, lens, itemsize, align=16):
    """Where ranges of an array go in a packed buffer that keeps each one's alignment: offset ``o[r]`` (elements)
    with ``o[r] = src_starts[r]`` modulo ``align / itemsize``, ranges one after another in that order, apart by
    less than ``align`` bytes each (so that a copy kernel moves them in ``align``-byte words, the packed buffer
    being ``align``-aligned as the source).

    Returns
    -------
    (offsets int64 (R,), size int) : the packed buffer's length in elements (``>= lens.sum()``, at most
    ``lens.sum() + 2 * R * (align / itemsize - 1)``; 0 without ranges).
    """
    per = max(1, int(align) // int(itemsize))
    s = np.asarray(src_starts, np.int64)
    n = np.asarray(lens, np.int64)
    lead = s % per
    slot = -(-(lead + n) // per) * per
    base = np.zeros(s.size, np.int64)
    if s.size > 1:
        np.cumsum(slot[:-1], out=base[1:])
    return base + lead, int(slot.sum())


def points_complement(points, n):
    """The ranges of ``[0, n)`` outside the sorted, distinct ``points`` (int64): merged ``(starts, lens)``."""
    p = np.asarray(points, np.int64)
    starts = np.concatenate([np.zeros(1, np.int64), p + 1])
    ends = np.concatenate([p, np.array([n], np.int64)])
    keep = ends > starts
    return starts[keep], (ends - starts)[keep]


def chunk_table(pairs, chunk_bytes):
    """The descriptors of one launch of ``crp_copy_chunks`` (``customize.cu``): ranges of up to four array pairs,
    in bytes, cut into chunks of ``chunk_bytes`` (one warp each).

    Parameters
    ----------
    pairs : list of (src_starts, dst_starts, lens) int64 arrays, at most 4
        Byte ranges of pair ``i`` (its source array into its destination array); empty ranges are dropped.
    chunk_bytes : int
        A positive multiple of 16.

    Returns
    -------
    (seg int64 (R * 4,), chunk_first int64 (R + 1,))
        ``seg`` rows ``(pair, src byte, dst byte, bytes)``; ``chunk_first[-1]`` the number of chunks.

    Raises
    ------
    ValueError
        More than four pairs, or ``chunk_bytes`` not a positive multiple of 16.
    """
    if len(pairs) > 4:
        raise ValueError(f"crp_copy_chunks copies at most 4 array pairs, got {len(pairs)}")
    if chunk_bytes <= 0 or chunk_bytes % 16:
        raise ValueError(f"chunk_bytes = {chunk_bytes} must be a positive multiple of 16")
    rows = []
    for i, (s, d, n) in enumerate(pairs):
        s, d, n = (np.asarray(x, np.int64).ravel() for x in (s, d, n))
        keep = n > 0
        rows.append(np.stack([np.full(int(keep.sum()), i, np.int64), s[keep], d[keep], n[keep]], axis=1))
    seg = np.concatenate(rows) if rows else np.zeros((0, 4), np.int64)
    first = np.zeros(seg.shape[0] + 1, np.int64)
    np.cumsum(-(-seg[:, 3] // int(chunk_bytes)), out=first[1:])
    return seg.ravel(), first


class CopyStats:
    """Bytes and ranges copied, per array name and kind of copy, since the last :meth:`reset`.

    Kinds: ``"sync"`` (host: ranges brought up to date in a recycled buffer), ``"full"`` (host: a whole
    array copied, into a new buffer or a stale one), ``"device_sync"`` / ``"device_full"`` (the same on
    the GPU's device copy), ``"device_pack"`` (the re-customized cells' ranges packed on the device for the copy
    back), ``"download"`` (device to host), ``"upload"`` (host to device). Each entry:
    ``{"bytes", "ranges", "copies"}``.
    """

    def __init__(self):
        self.counts = {}

    def add(self, name, kind, nbytes, nranges=1):
        d = self.counts.setdefault(name, {}).setdefault(kind, {"bytes": 0, "ranges": 0, "copies": 0})
        d["bytes"] += int(nbytes)
        d["ranges"] += int(nranges)
        d["copies"] += 1

    def reset(self):
        self.counts = {}

    def snapshot(self):
        """A copy of the counts: ``{name: {kind: {"bytes", "ranges", "copies"}}}``."""
        return {k: {kk: dict(vv) for kk, vv in v.items()} for k, v in self.counts.items()}

    def bytes(self, name=None, kinds=None):
        """Bytes copied (of one array name, or all; of the given kinds, or all)."""
        out = 0
        for n, d in self.counts.items():
            if name is not None and n != name:
                continue
            for k, v in d.items():
                if kinds is None or k in kinds:
                    out += v["bytes"]
        return out


class _Buf:
    __slots__ = ("a", "gen")

    def __init__(self, a, gen):
        self.a = a
        self.gen = gen


class _Ring:
    """The buffers of one array name (see the module docstring)."""

    def __init__(self):
        self.bufs = []   # buffers this ring may write (it made them, or they were installed as fresh)
        self.cur = None  # the current generation's array (owned or not)
        self.gen = 0
        self.floor = 0   # the log covers the generations (floor, gen]
        self.log = []    # (gen, ranges) per generation since floor

    def restart(self, a, own):
        self.gen += 1
        self.floor = self.gen
        self.log = []
        for b in self.bufs:
            b.gen = self.gen if b.a is a else -1
        if own and not any(b.a is a for b in self.bufs):
            self.bufs.append(_Buf(a, self.gen))
        self.cur = a

    def since(self, gen):
        """The union of the ranges changed after generation ``gen``; None when the log does not reach back."""
        if gen < self.floor:
            return None
        return union(*[r for g, r in self.log if g > gen])


def _count(buf):
    return sys.getrefcount(buf.a)


#: What :func:`_count` reads for an array that only its ``_Buf`` references, measured once on this interpreter
#: (2 on CPython 3.11-3.13: the attribute and the call's argument; an interpreter that borrows the argument reads
#: less): a buffer any reader still holds always reads more.
_ALONE = _count(_Buf(np.empty(0), 0))


def _free(buf):
    """True when nothing but the ring references ``buf.a`` (:data:`_ALONE`)."""
    return _RECYCLE and _count(buf) <= _ALONE


class StateBuffers:
    """Rings of copy-on-write buffers, one per array name (see the module docstring).

    Parameters
    ----------
    keep : int
        Free buffers kept per name beyond the current one (2: a double buffer, with one spare while a
        reader holds the previous snapshot).
    log_limit : int
        Generations of dirty ranges remembered; a buffer older than that is brought up to date by a full copy.
    """

    def __init__(self, keep=2, log_limit=64):
        self.keep = int(keep)
        self.log_limit = int(log_limit)
        self.rings = {}
        self.stats = CopyStats()

    def _ring(self, name):
        r = self.rings.get(name)
        if r is None:
            r = self.rings[name] = _Ring()
        return r

    def install(self, name, a, *, own=None):
        """``a`` is the current array of ``name`` (a full customization's): every other buffer is stale.

        ``own``: True when the caller allocated ``a`` and hands it over (the ring may write it once nothing
        references it); None: only when ``a`` owns its memory (not a view of another array, which the
        reference count of ``a`` does not see); False: never."""
        ok = isinstance(a, np.ndarray) and a.flags.writeable
        if own is None:
            own = ok and a.flags.owndata
        r = self._ring(name)
        r.restart(a, bool(own) and ok)
        self._prune(r)  # at most ``keep`` free stale buffers: whole customizations in a row do not pile up

    def is_current(self, name, a):
        """Whether ``a`` is the ring's current array of ``name``."""
        r = self.rings.get(name)
        return r is not None and r.cur is a

    def derive(self, name, src, dirty):
        """A buffer holding the next generation of ``name``: equal to ``src`` (the current array) outside
        ``dirty``, which the caller must then write in full (its old contents are not copied).

        Parameters
        ----------
        name : str
        src : ndarray
            The current state's array (not written).
        dirty : (starts, lens)
            Merged ranges (elements) the new generation changes.

        Returns
        -------
        ndarray
            Same shape and dtype as ``src``; never ``src`` and never an array anything else references.
        """
        r = self._ring(name)
        if r.cur is not src:  # a state the ring did not make: start again from it
            r.restart(src, False)
        buf = None
        for b in r.bufs:
            if b.a is not src and b.a.shape == src.shape and b.a.dtype == src.dtype and _free(b):
                if buf is None or b.gen > buf.gen:
                    buf = b
        itemsize = src.dtype.itemsize
        if buf is None:
            a = np.empty_like(src)
            np.copyto(a, src)
            self.stats.add(name, "full", src.nbytes)
            buf = _Buf(a, -1)
            r.bufs.append(buf)
        else:
            need = r.since(buf.gen)
            if need is None or total(need) > float(config.CRP_UPDATE_FULL_FRACTION) * src.size:  # stale, or much
                np.copyto(buf.a, src)
                self.stats.add(name, "full", src.nbytes)
            elif need[0].size:
                copy_ranges_fast(src, buf.a, need[0], need[1])
                self.stats.add(name, "sync", total(need) * itemsize, need[0].size)
        r.gen += 1
        r.log.append((r.gen, dirty))
        buf.gen = r.gen
        r.cur = buf.a
        self._prune(r)
        return buf.a

    def _prune(self, r):
        free = [b for b in r.bufs if b.a is not r.cur and _free(b)]
        if len(free) > self.keep:
            free.sort(key=lambda b: b.gen)
            drop = {id(b) for b in free[:len(free) - self.keep]}
            r.bufs = [b for b in r.bufs if id(b) not in drop]
        if len(r.log) > self.log_limit:
            cut = len(r.log) - self.log_limit
            r.floor = r.log[cut - 1][0]
            r.log = r.log[cut:]
        # generations no buffer needs any more
        oldest = min([b.gen for b in r.bufs if b.a is not r.cur and b.gen >= r.floor], default=r.gen)
        if oldest > r.floor:
            r.log = [(g, x) for g, x in r.log if g > oldest]
            r.floor = oldest

    def forget(self):
        """Drop every buffer and log (the next derive of each name copies in full)."""
        self.rings = {}


def update_ranges(plan, tree_first, cells_per_level):
    """The ranges a partial customization of ``cells_per_level`` (query levels' cells, level-local ids)
    writes, in every layout an update copies.

    Parameters
    ----------
    plan : gpuroute.crp.customize.CustomizationPlan
    tree_first : int64 (plan cells + 1,)
        The trees' layout (all zeros: no trees).
    cells_per_level : list of int64 arrays

    Returns
    -------
    dict
        ``clique`` (the overlay's cliques, query layout), ``clique_ext`` (the plan's clique array: every plan
        level's recomputed cells, mezzanine levels included), ``tree`` (plan layout): merged ``(starts,
        lens)``; ``clique_copy``: ``(src, dst, lens)`` int64, the query cells' ranges of the plan's array and
        where they go in the overlay's (the GPU's copy back).
    """
    qt = plan.query_topo
    qcb, qcq = qt["cell_base"], qt["cq_first"]
    cb, cq = plan.topo["cell_base"], plan.topo["cq_first"]
    ext = plan.ext_cells(cells_per_level)
    src, dst = [], []
    for p, cells in enumerate(cells_per_level):
        c = np.asarray(cells, np.int64)
        q = int(plan.ext_of_query[p])
        src.append(cq[cb[q] + c])
        dst.append(qcq[qcb[p] + c])
    src = np.concatenate(src) if src else np.zeros(0, np.int64)
    dst = np.concatenate(dst) if dst else np.zeros(0, np.int64)
    allq = np.concatenate([qcb[p] + np.asarray(c, np.int64) for p, c in enumerate(cells_per_level)]) \
        if cells_per_level else np.zeros(0, np.int64)
    clique = cell_ranges(qcq, allq)
    if plan.identity:
        copy = (clique[0], clique[0], clique[1])
    else:
        lens = qcq[allq + 1] - qcq[allq]
        keep = lens > 0
        copy = (src[keep], dst[keep], lens[keep])
    alle = np.concatenate([cb[q] + c for q, c in enumerate(ext)]) if ext else np.zeros(0, np.int64)
    return {"clique": clique, "clique_ext": cell_ranges(cq, alle), "tree": cell_ranges(np.asarray(tree_first), alle),
            "clique_copy": copy}
