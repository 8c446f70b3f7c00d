"""The priority queues of every CPU search (numba): one module, two variants (issue 19).

Both are min-heaps in caller-owned arrays: keys ``hk`` (int64 or float64) and items ``hn`` (int32 or int64
node / arc / state ids) by slot, the size passed in and returned, so a kernel keeps one pair of arrays per
thread and reuses it across searches (no allocation per search). Every function is ``inline="always"``:
it compiles into the search loop that calls it, with the constant arguments (``stride``, ``off``,
``shift``) folded. Indices are cast to unsigned, which spares numba's negative-index wraparound (measured
20-40 % of a CH query, :mod:`gpuroute.ch.query`).

**Lazy heap** (:func:`heap_push`, :func:`heap_pop`, :func:`heap_push_grow`): a binary heap of ``(key,
item)`` pairs; an item may be in it several times (lazy deletion: the caller skips a popped pair whose key
is above the item's current distance). ``size`` pairs need ``size`` slots: at most one per arc relaxed.

**Addressable heap** (:func:`ah_update`, :func:`ah_pop`): a ``2**shift``-ary heap holding each item at
most once, with decrease- (and increase-) key. The slot of item ``x`` is kept in ``pos[stride * x +
off]``, so positions can live in a plain (n,) array (``stride=1, off=0``), interleaved per search
direction (``stride=2, off=side``) or inside a search record (``stride=8, off=2``). Membership is checked
against the heap (``0 <= p < size and hn[p] == x``), so stale positions need never be reset between
searches; a popped item's position becomes ``gone`` (e.g. -1, or -2 for "settled").

Ties: both variants order equal keys the same way as the textbook binary heap (a child moves up only if
strictly smaller), so a search gives the same result whichever kernel it runs in.

Public API
----------
heap_push, heap_pop, heap_push_grow, ah_update, ah_pop, ah_contains
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def _u(i):
    return np.uint64(i)


# ------------------------------------------------------------------------------------------ lazy heap
@njit(cache=True, inline="always")
def heap_push(hk, hn, size, key, item):
    """Push ``(key, item)`` onto the lazy binary heap of ``size`` pairs (``hk``, ``hn`` need a free slot
    ``size``); returns the new size."""
    i = size
    while i > 0:
        p = (i - 1) >> 1
        kp = hk[_u(p)]
        if kp <= key:
            break
        hk[_u(i)] = kp
        hn[_u(i)] = hn[_u(p)]
        i = p
    hk[_u(i)] = key
    hn[_u(i)] = item
    return size + 1


@njit(cache=True, inline="always")
def heap_pop(hk, hn, size):
    """Remove the pair with the smallest key (``size > 0``); returns ``(key, item, new size)``."""
    key = hk[0]
    item = hn[0]
    size -= 1
    if size > 0:
        k = hk[_u(size)]
        x = hn[_u(size)]
        i = 0
        while True:
            c = 2 * i + 1
            if c >= size:
                break
            kc = hk[_u(c)]
            if c + 1 < size:
                k1 = hk[_u(c + 1)]
                if k1 < kc:
                    kc = k1
                    c += 1
            if kc >= k:
                break
            hk[_u(i)] = kc
            hn[_u(i)] = hn[_u(c)]
            i = c
        hk[_u(i)] = k
        hn[_u(i)] = x
    return key, item, size


@njit(cache=True, inline="always")
def heap_push_grow(hk, hn, size, key, item):
    """:func:`heap_push` onto arrays that double when full; returns ``(hk, hn, size)`` (new arrays after a
    doubling: the caller keeps the returned ones)."""
    if size == hk.shape[0]:
        hk2 = np.empty(2 * size + 16, dtype=hk.dtype)
        hn2 = np.empty(2 * size + 16, dtype=hn.dtype)
        hk2[:size] = hk
        hn2[:size] = hn
        hk = hk2
        hn = hn2
    size = heap_push(hk, hn, size, key, item)
    return hk, hn, size


# ------------------------------------------------------------------------------------ addressable heap
@njit(cache=True, inline="always")
def ah_contains(hn, size, pos, stride, off, x):
    """Whether item ``x`` is in the addressable heap (its slot ``pos[stride * x + off]`` is checked against
    the heap, so a stale position reads as "not in it")."""
    p = pos[_u(stride * x + off)]
    return p >= 0 and p < size and hn[_u(p)] == x


@njit(cache=True, inline="always")
def _ah_up(hk, hn, pos, stride, off, i, key, x, shift):
    """Place ``(key, x)`` from the hole at slot ``i`` upwards."""
    while i > 0:
        p = (i - 1) >> shift
        kp = hk[_u(p)]
        if kp <= key:
            break
        hk[_u(i)] = kp
        y = hn[_u(p)]
        hn[_u(i)] = y
        pos[_u(stride * y + off)] = i
        i = p
    hk[_u(i)] = key
    hn[_u(i)] = x
    pos[_u(stride * x + off)] = i


@njit(cache=True, inline="always")
def _ah_down(hk, hn, size, pos, stride, off, i, key, x, shift):
    """Place ``(key, x)`` from the hole at slot ``i`` downwards (heap of ``size`` slots)."""
    while True:
        c = (i << shift) + 1
        if c >= size:
            break
        kc = hk[_u(c)]
        if shift == 1:
            if c + 1 < size:
                k1 = hk[_u(c + 1)]
                if k1 < kc:
                    kc = k1
                    c += 1
        else:
            b = c
            for q in range(c + 1, min(c + (1 << shift), size)):
                kq = hk[_u(q)]
                if kq < kc:
                    kc = kq
                    b = q
            c = b
        if kc >= key:
            break
        hk[_u(i)] = kc
        y = hn[_u(c)]
        hn[_u(i)] = y
        pos[_u(stride * y + off)] = i
        i = c
    hk[_u(i)] = key
    hn[_u(i)] = x
    pos[_u(stride * x + off)] = i


@njit(cache=True, inline="always")
def ah_update(hk, hn, size, pos, stride, off, key, x, shift):
    """Insert item ``x`` with ``key`` into the addressable ``2**shift``-ary heap of ``size`` items, or move
    it to ``key`` (up or down) if it is in it; returns the new size.

    Parameters
    ----------
    hk : int64 or float64 (cap,)
    hn : int32 or int64 (cap,)
        Keys and items by slot; ``cap`` at least the number of distinct items ever in the heap at once.
    size : int
    pos : integer array
        ``pos[stride * x + off]``: the slot of item ``x`` (any value where ``x`` is not in the heap).
    stride, off : int
    key : int or float
    x : int
    shift : int
        ``1`` binary, ``2`` 4-ary, ...
    """
    i = pos[_u(stride * x + off)]
    if i >= 0 and i < size and hn[_u(i)] == x:
        if key > hk[_u(i)]:
            _ah_down(hk, hn, size, pos, stride, off, i, key, x, shift)
            return size
    else:
        i = size
        size += 1
    _ah_up(hk, hn, pos, stride, off, i, key, x, shift)
    return size


@njit(cache=True, inline="always")
def ah_pop(hk, hn, size, pos, stride, off, gone, shift):
    """Remove the item with the smallest key (``size > 0``) and set its position to ``gone``; returns
    ``(key, item, new size)``."""
    key = hk[0]
    x = hn[0]
    size -= 1
    if size > 0:
        _ah_down(hk, hn, size, pos, stride, off, 0, hk[_u(size)], hn[_u(size)], shift)
    pos[_u(stride * x + off)] = gone
    return key, x, size


__all__ = ["heap_push", "heap_pop", "heap_push_grow", "ah_update", "ah_pop", "ah_contains"]
