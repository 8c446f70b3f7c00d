"""Route legs from arrays: the compiled kernels :meth:`gpuroute.engine.Engine.route` builds a leg's pieces,
sums, turns, summary and steps with, in one pass each instead of a Python loop (or a dozen NumPy calls) per
arc and per step.

Every value is computed with the arithmetic the answer has always been written with, so that answers stay
byte-identical: element-wise products in float64 as NumPy's, sums as NumPy's ``ndarray.sum`` adds them
(:func:`npsum`: its pairwise summation, bit for bit), per-name lengths as ``np.bincount`` accumulates them,
bearings with the C library's ``atan2`` as ``math.atan2``, and rounding to decimals as Python's ``round``
(:func:`round_floats`).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["npsum", "round_floats", "leg_pieces", "turn_sums", "summary_ids", "leg_arrays", "maneuvers", "intersections",
           "STEP_TYPES", "MODIFIERS"]


# ---------------------------------------------------------------------------------- sums and rounding
@njit(cache=True)
def _pairwise_block(a, lo, n):
    """NumPy's ``pairwise_sum`` of float64 ``a[lo:lo + n]`` for ``n <= 128``: sequential below 8 values, else
    eight accumulators, combined as a tree, then the rest in order."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    m = n - n % 8
    i = 8
    while i < m:
        j = lo + i
        r0 += a[j]
        r1 += a[j + 1]
        r2 += a[j + 2]
        r3 += a[j + 3]
        r4 += a[j + 4]
        r5 += a[j + 5]
        r6 += a[j + 6]
        r7 += a[j + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@njit(cache=True)
def _pairwise(a, lo, n):
    """NumPy's ``pairwise_sum`` of float64 ``a[lo:lo + n]`` (``numpy/_core/src/umath/loops_utils.h.src``):
    blocks of at most 128 values (:func:`_pairwise_block`), larger ranges split in halves (multiples of 8)
    and the halves' sums added. Its recursion unrolled on an explicit stack (numba's cache cannot link a
    cached recursive function into another one)."""
    if n <= 128:
        return _pairwise_block(a, lo, n)
    f_lo = np.empty(64, np.int64)
    f_n = np.empty(64, np.int64)
    f_phase = np.empty(64, np.int64)
    vals = np.empty(64, np.float64)
    top = 0
    nv = 0
    f_lo[0], f_n[0], f_phase[0] = lo, n, 0
    while top >= 0:
        x, m = f_lo[top], f_n[top]
        if m <= 128:
            vals[nv] = _pairwise_block(a, x, m)
            nv += 1
            top -= 1
            continue
        n2 = m // 2
        n2 -= n2 % 8
        ph = f_phase[top]
        f_phase[top] = ph + 1
        if ph == 0:  # the first half
            top += 1
            f_lo[top], f_n[top], f_phase[top] = x, n2, 0
        elif ph == 1:  # the second half
            top += 1
            f_lo[top], f_n[top], f_phase[top] = x + n2, m - n2, 0
        else:  # both done: their sum
            nv -= 1
            vals[nv - 1] = vals[nv - 1] + vals[nv]
            top -= 1
    return vals[0]


@njit(cache=True)
def npsum(a):
    """``float(a.sum())`` of a contiguous float64 (k,) array, bit for bit as NumPy adds it (its identity 0.0
    plus the pairwise sum)."""
    return 0.0 + _pairwise(a, 0, a.size)


@njit(cache=True)
def _npsum_range(a, lo, hi):
    """``a[lo:hi].sum()`` as NumPy adds it."""
    return 0.0 + _pairwise(a, lo, hi - lo)


#: Fewer values than this are rounded one by one by :func:`round_floats`.
_ROUND_MIN = 24


def round_floats(x, digits):
    """``[round(float(v), digits) for v in x]`` without a Python ``round`` per value: NumPy rounds every value
    whose scaled value ``v * 10**digits`` lies clearly off a half-integer (``rint`` of it, divided back: the
    double nearest to the decimal, as ``round`` returns it), and Python's ``round`` the few that lie within
    two units in the last place of one (its exact, half-to-even rounding of the decimal).

    Parameters
    ----------
    x : array_like of float, shape (k,)
    digits : int
        Decimals (0 .. 15).

    Returns
    -------
    list of float, length k
    """
    if len(x) < _ROUND_MIN:  # a few values: round() itself costs less than the array operations
        return [round(float(v), digits) for v in x]
    x = np.asarray(x, dtype=np.float64).ravel()
    s = 10.0 ** digits
    with np.errstate(invalid="ignore", over="ignore"):
        y = x * s
        out = (np.rint(y) / s).tolist()
        amb = ~(np.abs(y - np.floor(y) - 0.5) > 2.0 * np.abs(np.spacing(y))) | ~(np.abs(y) < 2.0 ** 50)
    if amb.any():
        for i in np.flatnonzero(amb).tolist():
            out[i] = round(float(x[i]), digits)
    return out


# ---------------------------------------------------------------------------------- legs
@njit(cache=True)
def leg_pieces(a, fa, b, fb, mid, nodes, has_path, start_lon, start_lat, end_lon, end_lat, coords, wcost, wf,
               dcost, df, has_dur, length):
    """The pieces of one leg: its arcs, the fraction of each covered, the points and the per-piece weight,
    duration and distance, with their sums.

    The leg leaves arc ``a`` at fraction ``fa`` and arrives on arc ``b`` at ``fb``; ``mid`` (int64) are the
    arcs between and ``nodes`` (int64, ``mid.size + 1``) the nodes from ``a``'s head to ``b``'s tail
    (``has_path``; else the leg stays on ``a``: one piece of ``fb - fa``). Zero-length partial pieces are
    dropped (the last point stays the arrival point; one piece is always kept). Per piece: weight
    ``(frac * wcost[arc]) * wf``, duration ``(frac * dcost[arc]) * df`` (zeros without ``has_dur``), distance
    ``frac * length[arc]``.

    Returns
    -------
    (arcs int64 (k,), frac float64 (k,), points float64 (k + 1, 2), weight, duration, distance float64 (k,),
    weight_sum, duration_sum, distance_sum)
    """
    n = mid.size + 2 if has_path else 1
    arcs = np.empty(n, np.int64)
    frac = np.empty(n, np.float64)
    pts = np.empty((n + 1, 2), np.float64)
    pts[0, 0] = start_lon
    pts[0, 1] = start_lat
    if has_path:
        arcs[0] = a
        frac[0] = 1.0 - fa
        for i in range(mid.size):
            arcs[i + 1] = mid[i]
            frac[i + 1] = 1.0
        arcs[n - 1] = b
        frac[n - 1] = fb
        for i in range(nodes.size):
            pts[i + 1, 0] = coords[nodes[i], 0]
            pts[i + 1, 1] = coords[nodes[i], 1]
    else:
        arcs[0] = a
        frac[0] = fb - fa
    pts[n, 0] = end_lon
    pts[n, 1] = end_lat
    kept = 0
    for i in range(n):
        if frac[i] > 0:
            kept += 1
    if kept < n:
        keep = np.empty(n, np.bool_)
        for i in range(n):
            keep[i] = frac[i] > 0
        if kept == 0:
            keep[0] = True
            kept = 1
        arcs2 = np.empty(kept, np.int64)
        frac2 = np.empty(kept, np.float64)
        pts2 = np.empty((kept + 1, 2), np.float64)
        pts2[0, 0] = pts[0, 0]
        pts2[0, 1] = pts[0, 1]
        j = 0
        for i in range(n):
            if keep[i]:
                arcs2[j] = arcs[i]
                frac2[j] = frac[i]
                pts2[j + 1, 0] = pts[i + 1, 0]
                pts2[j + 1, 1] = pts[i + 1, 1]
                j += 1
        pts2[kept, 0] = end_lon
        pts2[kept, 1] = end_lat
        arcs, frac, pts, n = arcs2, frac2, pts2, kept
    weight = np.empty(n, np.float64)
    duration = np.zeros(n, np.float64)
    distance = np.empty(n, np.float64)
    for i in range(n):
        e = arcs[i]
        weight[i] = (frac[i] * wcost[e]) * wf
        if has_dur:
            duration[i] = (frac[i] * dcost[e]) * df
        distance[i] = frac[i] * length[e]
    return arcs, frac, pts, weight, duration, distance, npsum(weight), npsum(duration), npsum(distance)


@njit(cache=True)
def turn_sums(seq, t_first, fo, head, from_snapshot, is_time, turn_cost, cost, wf, scale, tc_dur, tc_w):
    """The turns of a leg's arc sequence ``seq`` (int64 (k,): departure arc, path arcs, arrival arc):
    ``(duration s, weight)`` summed over its ``k - 1`` turns, negative parts counted as 0.

    Turn ``t = t_first[a] + b - fo[head[a]]`` of consecutive arcs ``a, b``. ``from_snapshot``: weights
    ``(turn_cost[t] - cost[b]) * wf`` (the route's metric snapshot), durations those parts times ``scale``
    when ``is_time``; else the graph's ``tc_w[t]`` and ``tc_dur[t]`` (deciseconds, times 0.1).
    """
    k = seq.size - 1
    part = np.empty(k, np.float64)
    w = np.empty(k, np.float64)
    d = np.empty(k, np.float64)
    for i in range(k):
        a = seq[i]
        b = seq[i + 1]
        t = t_first[a] + b - fo[head[a]]
        dd = float(tc_dur[t])
        d[i] = dd if dd >= 0.0 else 0.0
        if from_snapshot:
            p = float(turn_cost[t]) - cost[b]
            part[i] = p if p >= 0.0 else 0.0
            x = p * wf
        else:
            x = float(tc_w[t])
        w[i] = x if x >= 0.0 else 0.0
    if from_snapshot and is_time:
        return npsum(part) * scale, npsum(w)
    return npsum(d) * 0.1, npsum(w)


@njit(cache=True)
def summary_ids(name_id, distance):
    """The name ids (int64, at most 2, in route order) of the two streets with the longest distance on a leg:
    per name (``name_id >= 0``) its pieces' distances added in order (as ``np.bincount``), the two longest
    (equal lengths: the smaller id), ordered by first appearance."""
    # the distinct ids ascending (np.unique's), kept sorted as they appear: a binary search at each change of
    # name only (a street's pieces follow each other), each piece's distance added to its name's in order
    k = name_id.size
    u = np.empty(k, np.int64)
    total = np.empty(k, np.float64)
    first = np.empty(k, np.int64)
    nu = 0
    prev = -1
    j = -1
    for i in range(k):
        x = np.int64(name_id[i])
        if x < 0:
            continue
        if x != prev:
            lo = 0
            hi = nu
            while lo < hi:
                mid = (lo + hi) >> 1
                if u[mid] < x:
                    lo = mid + 1
                else:
                    hi = mid
            if lo == nu or u[lo] != x:
                for t in range(nu, lo, -1):
                    u[t] = u[t - 1]
                    total[t] = total[t - 1]
                    first[t] = first[t - 1]
                u[lo] = x
                total[lo] = 0.0
                first[lo] = i
                nu += 1
            j = lo
            prev = x
        total[j] += distance[i]
    if nu == 0:
        return np.empty(0, np.int64)
    u = u[:nu]
    # the longest, then the second longest; ties: the smaller id (u ascending)
    b0 = 0
    for j in range(1, u.size):
        if total[j] > total[b0]:
            b0 = j
    if u.size == 1:
        out = np.empty(1, np.int64)
        out[0] = u[b0]
        return out
    b1 = -1
    for j in range(u.size):
        if j != b0 and (b1 < 0 or total[j] > total[b1]):
            b1 = j
    out = np.empty(2, np.int64)
    if first[b0] <= first[b1]:
        out[0], out[1] = u[b0], u[b1]
    else:
        out[0], out[1] = u[b1], u[b0]
    return out


@njit(cache=True)
def leg_arrays(a, fa, b, fb, mid, nodes, has_path, start_lon, start_lat, end_lon, end_lat, coords, wcost, wf, dcost, df,
               has_dur, length, turns, t_first, fo, head, from_snapshot, is_time, turn_cost, cost, twf, tscale, tc_dur,
               tc_w, name_id):
    """One leg's arrays in one compiled call: :func:`leg_pieces` (its arguments up to ``length``), the turns
    of the arc sequence ``a, mid..., b`` (:func:`turn_sums` of ``t_first`` .. ``tc_w``, when ``turns`` and
    ``has_path``; else none) and the summary's name ids (:func:`summary_ids` of the pieces' ``name_id`` and
    distances), with their values.

    Returns
    -------
    (arcs, frac, points, weight, duration, distance, weight_sum, duration_sum, distance_sum, turn_duration,
    turn_weight, summary)
        :func:`leg_pieces`'s values, the turns' ``(duration s, weight)`` (0.0 without turns) and the summary's
        name ids (int64, at most 2).
    """
    arcs, frac, pts, w, d, ln, w_sum, d_sum, l_sum = leg_pieces(a, fa, b, fb, mid, nodes, has_path, start_lon,
                                                                start_lat, end_lon, end_lat, coords, wcost, wf, dcost,
                                                                df, has_dur, length)
    td = 0.0
    tw = 0.0
    if turns and has_path:
        seq = np.empty(mid.size + 2, np.int64)
        seq[0] = a
        seq[mid.size + 1] = b
        for i in range(mid.size):
            seq[i + 1] = mid[i]
        td, tw = turn_sums(seq, t_first, fo, head, from_snapshot, is_time, turn_cost, cost, twf, tscale, tc_dur,
                           tc_w)
    names = np.empty(arcs.size, np.int64)
    for i in range(arcs.size):
        names[i] = name_id[arcs[i]]
    return arcs, frac, pts, w, d, ln, w_sum, d_sum, l_sum, td, tw, summary_ids(names, ln)


# ---------------------------------------------------------------------------------- steps
#: Maneuver types of :func:`maneuvers`, by code.
STEP_TYPES = ("depart", "new name", "turn", "continue")
#: Direction modifiers (:func:`gpuroute.engine.osrm.modifier`), by code; -1: none.
MODIFIERS = ("straight", "slight right", "right", "sharp right", "slight left", "left", "sharp left", "uturn")


@njit(cache=True)
def _modifier_code(delta):
    """:func:`gpuroute.engine.osrm.modifier` as an index into :data:`MODIFIERS`."""
    a = abs(delta)
    right = delta > 0
    if a <= 20.0:
        return 0
    if a <= 40.0:
        return 1 if right else 4
    if a <= 120.0:
        return 2 if right else 5
    if a < 179.0:
        return 3 if right else 6
    return 7


@njit(cache=True)
def maneuvers(arcs, bearing, name_id, head, tail, degree, weight, duration, distance):
    """The steps of a leg of pieces ``arcs`` (int64 (k,)): a maneuver at the first piece (``depart``) and at
    every piece whose street name changes (``new name`` when straight on, else ``turn``) or that turns back,
    or turns more than slightly at a junction (``continue``). The turn between pieces ``j - 1`` and ``j`` is
    :func:`gpuroute.engine.osrm.turn_delta` of their bearings (``bearing`` (m,) per arc, degrees), a U-turn
    when ``j`` leads back to where ``j - 1`` came from.

    Returns
    -------
    (starts, kinds, mods, sums, inter_first, inter_at)
        ``starts`` int64 (s,) the first piece of each step; ``kinds`` and ``mods`` int64 (s,) codes into
        :data:`STEP_TYPES` and :data:`MODIFIERS` (-1: none); ``sums`` float64 (s, 3) the weight, duration
        and distance of each step's pieces (added as NumPy adds a slice); the intersections of step ``i``
        are at the tails of pieces ``inter_at[inter_first[i]:inter_first[i + 1]]``: its maneuver's (not for
        ``depart``), then every junction (``degree >= 3``) passed without one.
    """
    k = arcs.size
    starts = np.empty(k, np.int64)
    kinds = np.empty(k, np.int64)
    mods = np.empty(k, np.int64)
    s = 1
    starts[0] = 0
    kinds[0] = 0
    mods[0] = -1
    for j in range(1, k):
        d = (bearing[arcs[j]] - bearing[arcs[j - 1]]) % 360.0
        if d > 180.0:
            d -= 360.0
        mod = _modifier_code(d)
        x = tail[arcs[j]]
        uturn = head[arcs[j]] == tail[arcs[j - 1]]
        if uturn:
            mod = 7
        if name_id[arcs[j]] != name_id[arcs[j - 1]]:
            starts[s] = j
            kinds[s] = 1 if mod == 0 else 2
            mods[s] = mod
            s += 1
        elif uturn or (degree[x] >= 3 and mod != 0 and mod != 1 and mod != 4):
            starts[s] = j
            kinds[s] = 3
            mods[s] = mod
            s += 1
    sums = np.empty((s, 3), np.float64)
    inter_first = np.zeros(s + 1, np.int64)
    inter_at = np.empty(k, np.int64)
    n = 0
    for i in range(s):
        j0 = starts[i]
        j1 = starts[i + 1] if i + 1 < s else k
        sums[i, 0] = _npsum_range(weight, j0, j1)
        sums[i, 1] = _npsum_range(duration, j0, j1)
        sums[i, 2] = _npsum_range(distance, j0, j1)
        if i > 0:
            inter_at[n] = j0
            n += 1
        for j in range(j0 + 1, j1):
            if degree[tail[arcs[j]]] >= 3:
                inter_at[n] = j
                n += 1
        inter_first[i + 1] = n
    return starts[:s], kinds[:s], mods[:s], sums, inter_first, inter_at[:n]


@njit(cache=True)
def intersections(nodes, prev, nxt, first_out, head, rev_first_out, rev_tail, coords):
    """OSRM intersection objects at graph nodes ``nodes`` (int64 (r,)), arrived at from ``prev`` and left
    towards ``nxt``: the distinct neighbours of each node (out-arc heads, in-arc tails), each street's
    bearing ``int(round(degrees(atan2((lon_v - lon) cos(lat), lat_v - lat)))) % 360`` (the C library's
    ``atan2``, as ``math.atan2``), ordered by (bearing, neighbour), whether it may be entered (an out-arc
    leads there), and the positions of ``prev`` and ``nxt`` in that order. A node's few neighbours are
    sorted in place (insertion sorts in two scratch rows: no array made per node).

    Returns
    -------
    (first, bearings, entry, in_pos, out_pos)
        Intersection ``i``'s streets are ``first[i]:first[i + 1]`` of ``bearings`` int64 and ``entry`` bool;
        ``in_pos``, ``out_pos`` int64 (r,).
    """
    r = nodes.size
    total = 0
    most = 0
    for i in range(r):
        x = nodes[i]
        d = (first_out[x + 1] - first_out[x]) + (rev_first_out[x + 1] - rev_first_out[x])
        total += d
        most = max(most, d)
    first = np.zeros(r + 1, np.int64)
    bearings = np.empty(total, np.int64)
    entry = np.empty(total, np.bool_)
    in_pos = np.full(r, -1, np.int64)
    out_pos = np.full(r, -1, np.int64)
    nb = np.empty(most, np.int64)  # the node's distinct neighbours, ascending, then by (bearing, neighbour)
    bs = np.empty(most, np.int64)
    c = 0
    for i in range(r):
        x = nodes[i]
        o0 = first_out[x]
        no = first_out[x + 1] - o0
        ni = rev_first_out[x + 1] - rev_first_out[x]
        cnt = 0
        for e in range(no + ni):  # insert each neighbour into nb (ascending, once)
            v = head[o0 + e] if e < no else rev_tail[rev_first_out[x] + e - no]
            pos = cnt
            while pos > 0 and nb[pos - 1] > v:
                pos -= 1
            if pos > 0 and nb[pos - 1] == v:
                continue
            for t in range(cnt, pos, -1):
                nb[t] = nb[t - 1]
            nb[pos] = v
            cnt += 1
        x0 = coords[x, 0]
        y0 = coords[x, 1]
        kk = math.cos(math.radians(y0))
        for e in range(cnt):  # bearings; a stable insertion sort by bearing keeps equal bearings' neighbours ascending
            v = nb[e]
            b = np.int64(np.rint(math.degrees(math.atan2((coords[v, 0] - x0) * kk, coords[v, 1] - y0)))) % 360
            pos = e
            while pos > 0 and bs[pos - 1] > b:
                bs[pos] = bs[pos - 1]
                nb[pos] = nb[pos - 1]
                pos -= 1
            bs[pos] = b
            nb[pos] = v
        first[i] = c
        for p in range(cnt):
            v = nb[p]
            bearings[c] = bs[p]
            ent = False
            for q in range(no):
                if head[o0 + q] == v:
                    ent = True
                    break
            entry[c] = ent
            if v == prev[i]:
                in_pos[i] = p
            if v == nxt[i]:
                out_pos[i] = p
            c += 1
    first[r] = c
    return first, bearings[:c], entry[:c], in_pos, out_pos
