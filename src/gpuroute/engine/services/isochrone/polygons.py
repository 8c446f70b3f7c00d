"""The isochrone polygons: rings traced on each contour's field (marching squares), their structure (holes,
parts, denoise), Douglas-Peucker between shared anchors, degrees and the checks, GeoJSON (the fast path) or
the GEOS path; steps 4 to 7 of :mod:`gpuroute.engine.services.isochrone`.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .... import config
from ....geo import EARTH_RADIUS_M
from ....geo.simplify import dp_rings
from .lattice import lattice_scratch, scratch, thread_pool

_DEG = math.pi / 180.0
_EPS = 2.0 ** -53
_CCW_ERR = (3.0 + 16.0 * _EPS) * _EPS
#: What the checks of the fast path found (:attr:`Layers.why`).
CHECKS = {0: "ok", 1: "a ring of fewer than 3 vertices", 2: "a ring of the wrong orientation",
          3: "a spike", 4: "segments that meet (one contour) or cross (two contours)",
          7: "a ray through a vertex", 8: "a ring not inside exactly the rings it should be",
          9: "a ring outside the next larger contour", 10: "a hole of a contour inside the next smaller one",
          11: "a ring collapsed", 12: "segments that meet after their vertices were restored"}
#: Rounds of restoring the vertices of segments that meet before the GEOS path takes over.
_REPAIR_ROUNDS = 6
#: Most pairs of segments restored per round.
_REPAIR_PAIRS = 4096


# ----------------------------------------------------------------------------------- rings
def _exit_table():
    """Marching squares with the inside corners kept apart: the edge (0 bottom, 1 right, 2 top, 3 left)
    through which the boundary leaves a quad entered through edge ``ent``, at ``case * 4 + ent`` (case:
    the inside corners a, b, c, d, counter-clockwise from the bottom left, as bits 0-3); -1 where no
    boundary enters. The boundary keeps the inside on its left: it enters through the edge that follows
    the last corner of a run of inside corners (counter-clockwise) and leaves through the edge before
    the run's first corner."""
    t = np.full(64, -1, dtype=np.int64)
    for case in range(16):
        inside = [(case >> c) & 1 for c in range(4)]
        for ent in range(4):
            if not inside[ent] or inside[(ent + 1) & 3]:
                continue
            j = ent
            while inside[(j + 3) & 3]:
                j = (j + 3) & 3
            t[case * 4 + ent] = (j + 3) & 3
    return t


#: :func:`_exit_table`.
_EXIT = _exit_table()


@njit(cache=True, nogil=True)
def _trace(codes, kin, tt, nc, x0, y0, x1, y1, vid_h, vid_v, stamp, exit_of, vx, vy, vedge, ring_off):
    """Rings of one contour's codes (H, W) within the window ``[x0, x1) x [y0, y1)`` (its border
    outside). ``vid_h``/``vid_v`` (H * W,) int32 receive ``stamp + vertex`` at every crossing edge (and
    serve as the visited marks: values below ``stamp`` are stale). ``tt`` (nc * nc,) float64: the
    crossing's fraction along an edge from its end codes (codes above ``nc - 2`` read as ``nc - 1``).
    ``exit_of``: :data:`_EXIT`. Writes into the caller's buffers (arrays the loop never reassigns: numba
    then keeps no reference counts in it):

    vx, vy : float64 (cap,)
        Lattice positions of the vertices.
    vedge : int64 (cap,)
        Lattice edge of each vertex: ``2 * (y * W + x) + vertical``.
    ring_off : int64 (rcap + 1,)

    Returns ``(nv, R)``, or ``(-1, -1)`` when a buffer was too small.
    """
    H, W = codes.shape
    cf = codes.ravel()
    cap = vx.shape[0]
    rcap = ring_off.shape[0] - 1
    nv = 0
    nr = 0
    ring_off[0] = 0
    top = nc - 1
    for y in range(y0, y1):
        base = y * W
        prev_in = cf[base + x0] <= kin
        for x in range(x0 + 1, x1):
            cur_in = cf[base + x] <= kin
            if cur_in == prev_in:
                continue
            prev_in = cur_in
            if vid_h[base + x - 1] >= stamp:
                continue
            # a new ring from its first horizontal crossing in row-major order: the edge (ex, ey, eo: 0
            # horizontal, 1 vertical), moving into the quad (qx, qy) (its bottom-left lattice point, q
            # its index) through the quad's edge ent (0 bottom, 1 right, 2 top, 3 left)
            ex, ey, eo = x - 1, y, 0
            qx = x - 1
            if cur_in:
                qy, ent = y - 1, 2
            else:
                qy, ent = y, 0
            q = qy * W + qx
            while True:
                if nv == cap:
                    return -1, -1
                e = ey * W + ex
                c0 = min(int(cf[e]), top)
                if eo == 0:
                    c1 = min(int(cf[e + 1]), top)
                    vid_h[e] = stamp + nv
                    vx[nv] = ex + tt[c0 * nc + c1]
                    vy[nv] = ey
                else:
                    c1 = min(int(cf[e + W]), top)
                    vid_v[e] = stamp + nv
                    vx[nv] = ex
                    vy[nv] = ey + tt[c0 * nc + c1]
                vedge[nv] = 2 * e + eo
                nv += 1
                case = int(cf[q] <= kin) | (int(cf[q + 1] <= kin) << 1) | (int(cf[q + W + 1] <= kin) << 2) \
                    | (int(cf[q + W] <= kin) << 3)
                k = exit_of[case * 4 + ent]
                if k == 0:
                    ex, ey, eo = qx, qy, 0
                    qy -= 1
                    q -= W
                    ent = 2
                elif k == 1:
                    ex, ey, eo = qx + 1, qy, 1
                    qx += 1
                    q += 1
                    ent = 3
                elif k == 2:
                    ex, ey, eo = qx, qy + 1, 0
                    qy += 1
                    q += W
                    ent = 0
                else:
                    ex, ey, eo = qx, qy, 1
                    qx -= 1
                    q -= 1
                    ent = 1
                if eo == 0 and ey == y and ex == x - 1:
                    break
            if nr == rcap:
                return -1, -1
            nr += 1
            ring_off[nr] = nv
    return nv, nr


@njit(cache=True)
def _areas(vx, vy, ring_off):
    """Signed areas of rings (shoelace about each ring's first vertex; > 0 counter-clockwise)."""
    nr = ring_off.shape[0] - 1
    area = np.empty(nr)
    for r in range(nr):
        a, b = ring_off[r], ring_off[r + 1]
        sx, sy = vx[a], vy[a]
        acc = 0.0
        for i in range(a + 1, b - 1):
            acc += (vx[i] - sx) * (vy[i + 1] - sy) - (vx[i + 1] - sx) * (vy[i] - sy)
        area[r] = 0.5 * acc
    return area


class Rings:
    """The traced rings of one contour (see :func:`trace`)."""

    __slots__ = ("x", "y", "edge", "off", "area", "vid_h", "vid_v", "stamp", "codes", "shell", "part", "encl",
                 "kept", "filled", "part_ok", "covered", "ring_of", "anchor", "shared", "window")


def trace(codes, lat, q, vid_h, vid_v, stamp):
    """Trace contour ``q`` (see :func:`_trace`); positions converted to metres.

    Returns
    -------
    Rings
        ``x, y`` (metres), ``edge``, ``off``, ``area`` (square metres, signed), ``ring_of`` (int32 (nv,)).
    """
    x0, y0, x1, y1 = (int(v) for v in lat.windows[q])
    while True:
        cap = lattice_scratch.bufs.get(f"trace_cap{q}", 1 << 16)
        rcap = lattice_scratch.bufs.get(f"trace_rcap{q}", 1 << 10)
        vx = scratch(f"trace_x{q}", (cap,), np.float64)
        vy = scratch(f"trace_y{q}", (cap,), np.float64)
        ve = scratch(f"trace_e{q}", (cap,), np.int64)
        off = scratch(f"trace_off{q}", (rcap + 1,), np.int64)
        nv, nr = _trace(codes, lat.kin, lat.tt, lat.nc, x0, y0, x1, y1, vid_h.reshape(-1), vid_v.reshape(-1), stamp,
                        _EXIT, vx, vy, ve, off)
        if nv >= 0:
            break
        lattice_scratch.bufs[f"trace_cap{q}"] = 2 * cap  # a buffer was too small: again with larger ones
        lattice_scratch.bufs[f"trace_rcap{q}"] = 2 * rcap
        stamp += cap + 1  # what the try wrote is stale
        if stamp + 2 * cap + 1 >= _STAMP_LIMIT:
            vid_h.fill(-1)
            vid_v.fill(-1)
            stamp = 0
    vx, vy, ve, off = vx[:nv], vy[:nv], ve[:nv], off[:nr + 1]
    area = _areas(vx, vy, off)
    rg = Rings()
    c = lat.cell
    rg.x = (vx + (lat.i0 + 0.5)) * c
    rg.y = (vy + (lat.j0 + 0.5)) * c
    rg.edge, rg.off, rg.area = ve, off, area * (c * c)
    rg.ring_of = np.repeat(np.arange(off.size - 1, dtype=np.int32), np.diff(off))
    rg.vid_h, rg.vid_v, rg.stamp, rg.codes, rg.window = vid_h, vid_v, stamp, codes, (x0, y0, x1, y1)
    return rg


@njit(cache=True)
def _structure(codes, kin, vid_h, stamp, W, edge, off, area, ring_of, max_hole, denoise):
    """Parts, enclosing holes, filled holes and kept parts of one contour's rings (see the module doc).

    Returns
    -------
    part : int64 (R,)
        The shell of each ring's part.
    encl : int64 (R,)
        For a shell, the hole that encloses it (-1: none); for a hole, -1.
    filled : bool (R,)
        Holes below ``max_hole``.
    part_ok : bool (R,)
        At shells: the part passes ``denoise`` (area minus its kept holes, against the largest).
    covered : bool (R,)
        At shells: the part lies inside a filled hole of a kept part.
    """
    R = off.shape[0] - 1
    part = np.empty(R, dtype=np.int64)
    encl = np.full(R, -1, dtype=np.int64)
    filled = np.zeros(R, dtype=np.bool_)
    for i in range(R):
        e = edge[off[i]]
        c = e >> 1
        y = c // W
        x = c - y * W
        if area[i] < 0.0:  # a hole: its first crossing has the part on its left end
            filled[i] = -area[i] < max_hole
            xx = x - 1
            while codes[y, xx] <= kin:
                xx -= 1
            r = ring_of[vid_h[y, xx] - stamp]
            part[i] = part[r]
        else:  # a shell: the region on its left end encloses it
            part[i] = i
            xx = x - 1
            while xx >= 0 and codes[y, xx] > kin:
                xx -= 1
            if xx >= 0:
                r = ring_of[vid_h[y, xx] - stamp]
                encl[i] = r if area[r] < 0.0 else encl[r]
    net = np.zeros(R)
    for i in range(R):
        if area[i] > 0.0:
            net[i] += area[i]
        elif not filled[i]:
            net[part[i]] += area[i]
    top = 0.0
    for i in range(R):
        if area[i] > 0.0 and net[i] > top:
            top = net[i]
    part_ok = np.zeros(R, dtype=np.bool_)
    covered = np.zeros(R, dtype=np.bool_)
    for i in range(R):
        if area[i] > 0.0:
            part_ok[i] = net[i] >= denoise * top
            h = encl[i]
            if h >= 0:
                p = part[h]
                covered[i] = covered[p] or (part_ok[p] and filled[h])
    return part, encl, filled, part_ok, covered


def structure(rg, lat, max_hole, denoise):
    """Fill ``rg.part, encl, filled, part_ok, covered`` and ``kept`` (the rings drawn) of one contour."""
    rg.part, rg.encl, rg.filled, rg.part_ok, rg.covered = _structure(
        rg.codes, lat.kin, rg.vid_h, rg.stamp, lat.W, rg.edge, rg.off, rg.area / (lat.cell * lat.cell),
        rg.ring_of, max_hole / (lat.cell * lat.cell), denoise)
    rg.shell = rg.area > 0
    p = rg.part
    alive = rg.part_ok[p] & ~rg.covered[p]
    rg.kept = alive & (rg.shell | ~rg.filled)


@njit(cache=True)
def _outside_larger(codes_s, kin, edge, off, area, W, codes_b, vid_h_b, stamp_b, ring_of_b, part_b, part_ok_b,
                    covered_b, kept_s):
    """Drop (in ``kept_s``, at shells) the parts of a contour that lie in a part of the next larger
    contour that is not drawn (dropped by ``denoise`` and not inside a filled hole of a drawn one)."""
    R = off.shape[0] - 1
    for i in range(R):
        if area[i] <= 0.0 or not kept_s[i]:
            continue
        c = edge[off[i]] >> 1
        y = c // W
        xx = c - y * W  # the shell's first crossing: its right end is inside (also in the larger contour)
        while codes_b[y, xx] <= kin:
            xx -= 1
        r = ring_of_b[vid_h_b[y, xx] - stamp_b]
        p = part_b[r]
        if not (part_ok_b[p] or covered_b[p]):
            kept_s[i] = False


def drop_outside_larger(small, big, lat):
    """Parts of ``small`` in undrawn parts of ``big`` are not drawn (as clipping to ``big`` would do)."""
    kept_shell = small.kept & small.shell
    _outside_larger(small.codes, lat.kin, small.edge, small.off, small.area, lat.W, big.codes, big.vid_h,
                    big.stamp, big.ring_of, big.part, big.part_ok, big.covered, kept_shell)
    small.kept = small.kept & kept_shell[small.part]


# ----------------------------------------------------------------------------------- anchors, DP
@njit(cache=True)
def _shared(edge_s, codes_s, codes_b, vid_h_b, vid_v_b, stamp_b, W, kin):
    """For each vertex of the smaller contour, the larger contour's vertex at the same position (the same
    lattice edge, the same codes at both ends), or -1."""
    nv = edge_s.shape[0]
    out = np.full(nv, -1, dtype=np.int64)
    for i in range(nv):
        e = edge_s[i]
        o = e & 1
        c = e >> 1
        y = c // W
        x = c - y * W
        y2 = y + o
        x2 = x + 1 - o
        if codes_s[y, x] == codes_b[y, x] and codes_s[y2, x2] == codes_b[y2, x2]:
            out[i] = (vid_v_b[y, x] if o else vid_h_b[y, x]) - stamp_b
    return out


@njit(cache=True)
def _pair_anchors(sh, off_s, off_b, ring_of_s, ring_of_b, anchor_s, anchor_b):
    """Anchors of a pair of contours: the ends of shared runs (a shared vertex whose segment to the next or
    from the previous vertex is not shared) and every anchor at a shared vertex, in both. Returns how
    many anchors were added."""
    added = 0
    nv = sh.shape[0]
    for i in range(nv):
        J = sh[i]
        if J < 0:
            continue
        r = ring_of_s[i]
        a, b = off_s[r], off_s[r + 1]
        ip = i - 1 if i > a else b - 1
        inx = i + 1 if i + 1 < b else a
        rb = ring_of_b[J]
        ab, bb = off_b[rb], off_b[rb + 1]
        Jp = J - 1 if J > ab else bb - 1
        Jn = J + 1 if J + 1 < bb else ab
        s_in = sh[ip] == Jp
        s_out = sh[inx] == Jn
        want = anchor_s[i] or anchor_b[J] or (s_in != s_out)
        if want and not (anchor_s[i] and anchor_b[J]):
            anchor_s[i] = True
            anchor_b[J] = True
            added += 1
    return added


def anchors(rings):
    """Anchors of every contour (largest first): ring starts, then the ends of the runs shared with the
    neighbouring contours, propagated until every anchor at a shared vertex is one in both contours."""
    for rg in rings:
        rg.anchor = np.zeros(rg.x.size, dtype=bool)
        rg.anchor[rg.off[:-1]] = True
    while True:
        added = 0
        for q in range(1, len(rings)):
            s, b = rings[q], rings[q - 1]
            added += _pair_anchors(s.shared, s.off, b.off, s.ring_of, b.ring_of, s.anchor, b.anchor)
        if not added:
            return


#: Douglas-Peucker between consecutive anchors of every kept ring: the one implementation,
#: :func:`gpuroute.geo.simplify.dp_rings` (issue 19).
_dp = dp_rings


def simplify(rg, tol):
    """Vertices kept by Douglas-Peucker (``tol`` metres; 0: all) of the kept rings: bool (nv,)."""
    keep = np.zeros(rg.x.size, dtype=bool)
    if tol > 0:
        _dp(rg.x, rg.y, rg.off, rg.kept, rg.anchor, float(tol), keep)
    else:
        keep[:] = rg.kept[rg.ring_of]
    return keep


# ----------------------------------------------------------------------------------- degrees, checks
@njit(cache=True, nogil=True)
def _gather(x, y, off, order, keep, up, down, lon0, lat0, kx, ky, rounded):
    """The kept vertices of the rings ``order`` (in that order), in degrees (``rounded``: rounded to 6
    decimals, consecutive repeats and back-and-forth spikes ``p, q, p`` dropped); the closing vertex is
    implicit.

    Parameters
    ----------
    x, y : float64 (nv,)
        Metres.
    off : int64 (R + 1,)
    order : int64 (r,)
    keep : bool (nv,)
    up, down : int64 (nv,)
        The same vertex in the next larger / smaller contour, or -1.

    Returns
    -------
    lon, lat : float64 (N,)
    roff : int64 (r + 1,)
    vup, vdown : bool (N,)
        The vertex is shared with the next larger / smaller contour.
    src : int64 (N,)
        The (first) vertex each comes from.
    """
    n = 0
    for r in order:
        for v in range(off[r], off[r + 1]):
            if keep[v]:
                n += 1
    lon = np.empty(n)
    lat = np.empty(n)
    vup = np.empty(n, dtype=np.bool_)
    vdown = np.empty(n, dtype=np.bool_)
    src = np.empty(n, dtype=np.int64)
    roff = np.empty(order.shape[0] + 1, dtype=np.int64)
    roff[0] = 0
    k = 0
    for i in range(order.shape[0]):
        r = order[i]
        k0 = k
        for v in range(off[r], off[r + 1]):
            if not keep[v]:
                continue
            a = lon0 + x[v] / kx
            b = lat0 + y[v] / ky
            if rounded:
                a = np.rint(a * 1e6) / 1e6
                b = np.rint(b * 1e6) / 1e6
            if k > k0 and a == lon[k - 1] and b == lat[k - 1]:
                vup[k - 1] = vup[k - 1] and up[v] >= 0
                vdown[k - 1] = vdown[k - 1] and down[v] >= 0
                continue
            if rounded and k - k0 >= 2 and a == lon[k - 2] and b == lat[k - 2]:
                k -= 1  # p, q, p: a spike of the rounding, back to p
                vup[k - 1] = vup[k - 1] and up[v] >= 0
                vdown[k - 1] = vdown[k - 1] and down[v] >= 0
                continue
            lon[k] = a
            lat[k] = b
            vup[k] = up[v] >= 0
            vdown[k] = down[v] >= 0
            src[k] = v
            k += 1
        while k - k0 > 1 and lon[k - 1] == lon[k0] and lat[k - 1] == lat[k0]:
            k -= 1
        roff[i + 1] = k
    return lon[:k], lat[:k], roff, vup[:k], vdown[:k], src[:k]


@njit(cache=True, inline="always")
def _restore_one(v, keep, up, down):
    """Keep vertex ``v`` and the same vertex in every contour that shares it; returns how many changed."""
    changed = 0
    u = v
    while u >= 0:
        if not keep[u]:
            keep[u] = True
            changed += 1
        u = up[u]
    u = down[v]
    while u >= 0:
        if not keep[u]:
            keep[u] = True
            changed += 1
        u = down[u]
    return changed


@njit(cache=True, nogil=True)
def _restore(fails, nf, src, groff, off, ring_of, keep, up, down):
    """Keep again every vertex that Douglas-Peucker dropped under the segments listed in ``fails`` (pairs
    of gathered segments, their first vertex; ``groff`` the gathered ring offsets), and their copies in
    the contours that share them. Returns how many vertices changed."""
    changed = 0
    R = groff.shape[0] - 1
    for t in range(min(nf, fails.shape[0])):
        for side in range(2):
            i = fails[t, side]
            # the gathered ring of i (binary search) and its next vertex
            lo, hi = 0, R
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if groff[mid] <= i:
                    lo = mid
                else:
                    hi = mid
            j = i + 1 if i + 1 < groff[lo + 1] else groff[lo]
            a, b = src[i], src[j]
            r = ring_of[a]
            v = a
            while v != b:
                changed += _restore_one(v, keep, up, down)
                v = v + 1 if v + 1 < off[r + 1] else off[r]
            changed += _restore_one(b, keep, up, down)
    return changed


@njit(cache=True)
def _restore_ring(r, off, keep, up, down):
    """Keep every vertex of ring ``r`` (and their copies); returns how many changed."""
    changed = 0
    for v in range(off[r], off[r + 1]):
        changed += _restore_one(v, keep, up, down)
    return changed


@njit(cache=True, inline="always")
def _orient(ax, ay, bx, by, cx, cy):
    """Sign of the turn a -> b -> c (1: counter-clockwise), 0 when the floating-point filter is unsure
    (Shewchuk, "Adaptive precision floating-point arithmetic and fast robust geometric predicates", 1997,
    the first stage of orient2d)."""
    left = (ax - cx) * (by - cy)
    right = (ay - cy) * (bx - cx)
    det = left - right
    bound = _CCW_ERR * (abs(left) + abs(right))
    if det > bound:
        return 1
    if -det > bound:
        return -1
    return 0


@njit(cache=True, inline="always")
def _relation(p0x, p0y, p1x, p1y, q0x, q0y, q1x, q1y):
    """How two segments meet: 0 apart, 1 at one common end point only, 3 the same segment, 4 the same
    reversed, 2 otherwise (crossing, touching, overlapping or unsure)."""
    if max(p0x, p1x) < min(q0x, q1x) or max(q0x, q1x) < min(p0x, p1x) \
            or max(p0y, p1y) < min(q0y, q1y) or max(q0y, q1y) < min(p0y, p1y):
        return 0
    e00 = p0x == q0x and p0y == q0y
    e01 = p0x == q1x and p0y == q1y
    e10 = p1x == q0x and p1y == q0y
    e11 = p1x == q1x and p1y == q1y
    if e00 and e11:
        return 3
    if e01 and e10:
        return 4
    if e00 or e01 or e10 or e11:
        if e00:
            vx, vy, ax, ay, bx, by = p0x, p0y, p1x, p1y, q1x, q1y
        elif e01:
            vx, vy, ax, ay, bx, by = p0x, p0y, p1x, p1y, q0x, q0y
        elif e10:
            vx, vy, ax, ay, bx, by = p1x, p1y, p0x, p0y, q1x, q1y
        else:
            vx, vy, ax, ay, bx, by = p1x, p1y, p0x, p0y, q0x, q0y
        if _orient(vx, vy, ax, ay, bx, by) != 0:
            return 1
        if (ax - vx) * (bx - vx) + (ay - vy) * (by - vy) < 0.0:
            return 1
        return 2
    o1 = _orient(p0x, p0y, p1x, p1y, q0x, q0y)
    o2 = _orient(p0x, p0y, p1x, p1y, q1x, q1y)
    if o1 != 0 and o1 == o2:
        return 0
    o3 = _orient(q0x, q0y, q1x, q1y, p0x, p0y)
    o4 = _orient(q0x, q0y, q1x, q1y, p1x, p1y)
    if o3 != 0 and o3 == o4:
        return 0
    return 2


@njit(cache=True, inline="always")
def _nxt(i, roff, ring):
    return i + 1 if i + 1 < roff[ring[i] + 1] else roff[ring[i]]


@njit(cache=True, inline="always")
def _prv(i, roff, ring):
    return i - 1 if i > roff[ring[i]] else roff[ring[i] + 1] - 1


@njit(cache=True)
def _into(X, Y, roff, ring, s, b):
    """Whether the smaller contour's segment ``s`` (``s -> next``), meeting the larger contour's segment
    ``b`` at one common end point, runs from it into the larger contour's inside (or along its boundary,
    the same way)."""
    sn = _nxt(s, roff, ring)
    bn = _nxt(b, roff, ring)
    if X[b] == X[s] and Y[b] == Y[s] or X[b] == X[sn] and Y[b] == Y[sn]:
        kv = b
    else:
        kv = bn
    vx, vy = X[kv], Y[kv]
    nb = _nxt(kv, roff, ring)
    pb = _prv(kv, roff, ring)
    out = X[s] == vx and Y[s] == vy  # the smaller contour's segment leaves v
    a = sn if out else s
    ax, ay = X[a], Y[a]
    if ax == X[nb] and ay == Y[nb]:
        return out  # along the larger one's next segment: only the same way
    if ax == X[pb] and ay == Y[pb]:
        return not out
    c12 = _orient(vx, vy, X[nb], Y[nb], X[pb], Y[pb])
    c1w = _orient(vx, vy, X[nb], Y[nb], ax, ay)
    cw2 = _orient(vx, vy, ax, ay, X[pb], Y[pb])
    if c12 > 0:
        return c1w > 0 and cw2 > 0
    if c12 < 0:
        return c1w > 0 or cw2 > 0
    ux, uy = X[nb] - vx, Y[nb] - vy
    wx, wy = X[pb] - vx, Y[pb] - vy
    if ux * wx + uy * wy < 0.0:
        return c1w > 0
    return False


@njit(cache=True, nogil=True)
def _check(X, Y, roff, rlayer, rshell, rkpar, vup, vdown, mode, near, fails):
    """0 when the rounded rings of all contours (largest first) make valid polygons, each contour inside
    the next larger one (see the module doc); else the first check that failed or was not sure (see
    ``CHECKS``). ``mode`` 1: each contour on its own (the rounded positions: validity of the output);
    2: each contour against its neighbours (the positions before rounding: contours nest up to the
    rounding). Spikes (3) and segments that meet (4) are all listed, as pairs of segments (the index of
    each one's first vertex), in ``fails`` (F, 2) (the first F of them); the return value is then
    ``code + 16 * count``.

    Containment is tested where it could have changed: the rings were nested as the structure says
    before Douglas-Peucker and the rounding, and a vertex kept by both can only have crossed a ring's
    simplified boundary if it lies within ``near`` (the tolerance plus the rounding, in degrees) of it
    (a dropped run lies within the tolerance of the segment that replaced it, so does the pocket between
    them); for such vertices a ray is cast."""
    N = X.shape[0]
    R = roff.shape[0] - 1
    if N == 0:
        return 0
    ring = np.empty(N, dtype=np.int64)
    nf = 0
    for r in range(R):
        a, b = roff[r], roff[r + 1]
        if b - a < 3:
            return 1
        s = 0.0
        for i in range(a, b):
            ring[i] = r
            j = i + 1 if i + 1 < b else a
            s += (X[i] - X[a]) * (Y[j] - Y[a]) - (X[j] - X[a]) * (Y[i] - Y[a])
        if mode == 2:
            continue
        if (s > 0.0) != rshell[r] or s == 0.0:
            return 2
        for i in range(a, b):  # no spikes: a vertex whose two segments fold back onto each other
            j = i + 1 if i + 1 < b else a
            h = i - 1 if i > a else b - 1
            if _orient(X[h], Y[h], X[i], Y[i], X[j], Y[j]) == 0:
                if (X[h] - X[i]) * (X[j] - X[i]) + (Y[h] - Y[i]) * (Y[j] - Y[i]) >= 0.0:
                    if nf < fails.shape[0]:
                        fails[nf, 0] = h
                        fails[nf, 1] = i
                    nf += 1
    if nf:
        return 3 + 16 * nf
    # uniform grid of segments (each in the cells its bounding box touches)
    x0, x1, y0, y1 = X.min(), X.max(), Y.min(), Y.max()
    side = max(x1 - x0, y1 - y0)
    g = max(1, min(4096, int(2.0 * math.sqrt(N))))
    cs = side / g * (1.0 + 1e-9) if side > 0.0 else 1.0
    inv = 1.0 / cs
    gx = min(g, int((x1 - x0) * inv) + 1)
    gy = min(g, int((y1 - y0) * inv) + 1)
    nx = np.empty(N, dtype=np.int64)
    lay = np.empty(N, dtype=np.int64)
    bx0 = np.empty(N)
    bx1 = np.empty(N)
    by0 = np.empty(N)
    by1 = np.empty(N)
    cell = np.empty((N, 4), dtype=np.int64)
    cnt = np.zeros(gx * gy + 1, dtype=np.int64)
    for i in range(N):
        j = _nxt(i, roff, ring)
        nx[i] = j
        lay[i] = rlayer[ring[i]]
        bx0[i] = min(X[i], X[j])
        bx1[i] = max(X[i], X[j])
        by0[i] = min(Y[i], Y[j])
        by1[i] = max(Y[i], Y[j])
        ca = min(int((bx0[i] - x0) * inv), gx - 1)
        cb = min(int((bx1[i] - x0) * inv), gx - 1)
        ra = min(int((by0[i] - y0) * inv), gy - 1)
        rb = min(int((by1[i] - y0) * inv), gy - 1)
        cell[i, 0], cell[i, 1], cell[i, 2], cell[i, 3] = ca, cb, ra, rb
        for rr in range(ra, rb + 1):
            for cc in range(ca, cb + 1):
                cnt[rr * gx + cc + 1] += 1
    for c in range(gx * gy):
        cnt[c + 1] += cnt[c]
    items = np.empty(cnt[gx * gy], dtype=np.int64)
    fill = cnt[:-1].copy()
    for i in range(N):
        for rr in range(cell[i, 2], cell[i, 3] + 1):
            for cc in range(cell[i, 0], cell[i, 1] + 1):
                items[fill[rr * gx + cc]] = i
                fill[rr * gx + cc] += 1
    # pairs of segments sharing a cell (a cell lists its segments by contour, then by index): mode 1
    # pairs of one contour, mode 2 pairs of neighbouring contours
    after = np.empty(items.shape[0], dtype=np.int64)  # the first item of the cell in a later contour
    for c in range(gx * gy):
        lo, hi = cnt[c], cnt[c + 1]
        if hi - lo < 2:
            continue
        nxt_layer = hi
        for u in range(hi - 1, lo - 1, -1):
            if u + 1 < hi and lay[items[u + 1]] != lay[items[u]]:
                nxt_layer = u + 1
            after[u] = nxt_layer
        for u in range(lo, hi):
            i = items[u]
            i2 = nx[i]
            li = lay[i]
            ax0, ax1, ay0, ay1 = bx0[i], bx1[i], by0[i], by1[i]
            t0, t1 = (u + 1, after[u]) if mode == 1 else (after[u], hi)
            for t in range(t0, t1):
                j = items[t]
                lj = lay[j]
                if lj != li and lj != li + 1:
                    break
                if bx0[j] > ax1 or bx1[j] < ax0 or by0[j] > ay1 or by1[j] < ay0:
                    continue
                j2 = nx[j]
                rel = _relation(X[i], Y[i], X[i2], Y[i2], X[j], Y[j], X[j2], Y[j2])
                if rel == 0:
                    continue
                if li == lj:
                    if rel == 1 and (i2 == j or j2 == i):
                        continue  # neighbours on one ring
                elif rel == 3:
                    continue  # a run shared by the two contours
                elif rel == 1:
                    s, b = (i, j) if li > lj else (j, i)
                    if _into(X, Y, roff, ring, s, b):
                        continue  # the smaller contour leaves a common vertex into the larger one
                if nf < fails.shape[0]:
                    fails[nf, 0] = i
                    fails[nf, 1] = j
                nf += 1
    if nf:
        return 4 + 16 * nf
    # each ring inside exactly the rings the structure says (its contour), inside the next larger
    # contour and, for holes, outside the next smaller one
    top_layer = rlayer.max()
    stamp = np.full(N, -1, dtype=np.int64)
    parity = np.zeros(R, dtype=np.int64)
    hits = np.empty(R, dtype=np.int64)
    query = 0
    for r in range(R):
        lr = rlayer[r]
        for kind in range(3):
            if (kind == 0) != (mode == 1):
                continue
            if kind == 0:
                p = roff[r]
                want = lr
            elif kind == 1:
                if lr == 0:
                    continue
                p = -1
                for i in range(roff[r], roff[r + 1]):
                    if not vup[i]:
                        p = i
                        break
                if p < 0:
                    continue
                want = lr - 1
            else:
                if rshell[r] or lr == top_layer:
                    continue
                p = -1
                for i in range(roff[r], roff[r + 1]):
                    if not vdown[i]:
                        p = i
                        break
                if p < 0:
                    continue
                want = lr + 1
            px, py = X[p], Y[p]
            query += 1
            row = min(int((py - y0) * inv), gy - 1)
            col = min(int((px - x0) * inv), gx - 1)
            reach = int(near * inv) + 1
            close = False
            for rr in range(max(row - reach, 0), min(row + reach + 1, gy)):
                for cc in range(max(col - reach, 0), min(col + reach + 1, gx)):
                    c = rr * gx + cc
                    for u in range(cnt[c], cnt[c + 1]):
                        i = items[u]
                        rs = ring[i]
                        if rlayer[rs] != want or rs == r or stamp[i] == query:
                            continue
                        stamp[i] = query
                        i2 = nx[i]
                        if _seg_dist(px, py, X[i], Y[i], X[i2], Y[i2]) <= near:
                            close = True
                            break
                    if close:
                        break
                if close:
                    break
            if not close:
                continue
            nh = 0
            query += 1
            for cc in range(col, gx):
                c = row * gx + cc
                for u in range(cnt[c], cnt[c + 1]):
                    i = items[u]
                    if stamp[i] == query:
                        continue
                    stamp[i] = query
                    rs = ring[i]
                    if rlayer[rs] != want or rs == r:
                        continue
                    i2 = _nxt(i, roff, ring)
                    if (Y[i] > py) == (Y[i2] > py):
                        continue
                    o = _orient(X[i], Y[i], X[i2], Y[i2], px, py)
                    if o == 0:
                        return 7
                    if (o > 0) == (Y[i2] > Y[i]):
                        if parity[rs] == 0:
                            hits[nh] = rs
                            nh += 1
                        parity[rs] ^= 1
            odd = 0
            ok = True
            for h in range(nh):
                rs = hits[h]
                if parity[rs]:
                    odd += 1
                    if kind == 0:
                        a = rkpar[r]
                        while a >= 0 and a != rs:
                            a = rkpar[a]
                        if a < 0:
                            ok = False
                parity[rs] = 0
            if kind == 0:
                depth = 0
                a = rkpar[r]
                while a >= 0:
                    depth += 1
                    a = rkpar[a]
                if not ok or odd != depth:
                    return 8
            elif kind == 1:
                if odd % 2 != 1:
                    return 9
            elif odd % 2 != 0:
                return 10
    return 0


@njit(cache=True, inline="always")
def _seg_dist(px, py, ax, ay, bx, by):
    """Distance from a point to a segment."""
    dx, dy = bx - ax, by - ay
    len2 = dx * dx + dy * dy
    t = 0.0 if len2 == 0.0 else ((px - ax) * dx + (py - ay) * dy) / len2
    t = min(1.0, max(0.0, t))
    return math.hypot(px - (ax + t * dx), py - (ay + t * dy))


@njit(cache=True)
def _kparent(off, area, part, encl, drawn):
    """The drawn ring each ring lies directly inside (-1: none): a hole's shell; a shell's enclosing hole
    when that hole's part is drawn, else what encloses that part."""
    R = off.shape[0] - 1
    anc = np.full(R, -1, dtype=np.int64)
    for i in range(R):
        if area[i] < 0.0:
            anc[i] = part[i]
        else:
            h = encl[i]
            if h >= 0:
                p = part[h]
                anc[i] = h if drawn[p] else anc[p]
    return anc


# ----------------------------------------------------------------------------------- driver
_STAMP_LIMIT = 2 ** 31 - 1


def _vid_buffers(slot, H, W):
    """The two vertex-id grids of ping-pong slot ``slot`` and the stamp for the next trace."""
    st = lattice_scratch
    name = f"vid{slot}"
    buf = st.bufs.get(name)
    if buf is None or buf.shape[1] < H * W:
        buf = np.full((2, max(H * W, 1024)), -1, dtype=np.int32)
        st.bufs[name] = buf
        st.bufs[name + "_stamp"] = 0
    stamp = st.bufs[name + "_stamp"]
    if stamp + 2 * H * W + 1 >= _STAMP_LIMIT:
        buf.fill(-1)
        stamp = 0
    return buf[0, :H * W].reshape(H, W), buf[1, :H * W].reshape(H, W), stamp, name


class _Metres:
    """Per contour ``(xy (n, 2), ring index per vertex, polygon index per ring)`` of the drawn rings before
    simplification (local metres): what the GEOS path starts from, built when it is used."""

    def __init__(self, rings):
        self.rings = rings

    def __iter__(self):
        for rg, order in self.rings:
            sel = rg.kept[rg.ring_of]
            vr = rg.ring_of[sel]
            rank = np.empty(rg.off.size - 1, dtype=np.int64)
            rank[order] = np.arange(order.size)
            srt = np.argsort(rank[vr], kind="stable")
            first = np.ones(order.size, dtype=bool)
            first[1:] = rg.part[order][1:] != rg.part[order][:-1]
            yield np.column_stack([rg.x[sel], rg.y[sel]])[srt], rank[vr][srt], np.cumsum(first) - 1


class Layers:
    """The drawn rings of all contours (largest first), in degrees rounded to 6 decimals.

    Attributes
    ----------
    lon, lat : ndarray float64, shape (N,)
        Ring vertices (each ring's closing vertex implicit).
    roff : ndarray int64, shape (R + 1,)
    rlayer : ndarray int64, shape (R,)
        Contour of each ring (0: the largest).
    rshell : ndarray bool, shape (R,)
        Shells (counter-clockwise); the holes of a shell follow it.
    ok : bool
        The rings passed the checks (else the GEOS path draws them).
    why : int
        The check that failed (0: none; see ``CHECKS``).
    ulon, ulat : ndarray float64 or None
        The vertices before rounding (with its repeats) that the nesting check saw (several contours).
    """

    __slots__ = ("lon", "lat", "roff", "rlayer", "rshell", "rkpar", "vup", "vdown", "ok", "why", "metres", "dropped", "ulon", "ulat")


def rings_of(codes, lat, K, denoise, generalize, lon0, lat0):
    """Trace, structure, simplify and check the rings of ``K`` contours from their codes.

    Where the check finds segments that meet (Douglas-Peucker's shortcuts crossing a neighbouring ring)
    or spikes, the vertices Douglas-Peucker dropped under those segments are kept again (in every
    contour sharing them) and the check runs again, up to ``_REPAIR_ROUNDS`` times.

    Parameters
    ----------
    codes : ndarray uint8, shape (K, H, W)
    lat : Lattice
    denoise : float
    generalize : float
        Douglas-Peucker tolerance (metres).
    lon0, lat0 : float
        The frame's origin (degrees).

    Returns
    -------
    Layers
        With ``metres``: per contour ``(xy (n, 2), ring index per vertex, polygon index per ring)`` of
        the drawn rings before simplification (what the GEOS path starts from).
    """
    max_hole = float(config.SERVE_ISOCHRONE_MAX_HOLE_M2)
    rings = []
    for q in range(K):
        vid_h, vid_v, stamp, name = _vid_buffers(q % 2, lat.H, lat.W)
        rg = trace(codes[q], lat, q, vid_h, vid_v, stamp)
        lattice_scratch.bufs[name + "_stamp"] = rg.stamp + rg.x.size + 1
        structure(rg, lat, max_hole, denoise)
        if q > 0:
            big = rings[q - 1]
            drop_outside_larger(rg, big, lat)
            rg.shared = _shared(rg.edge, codes[q], codes[q - 1], big.vid_h, big.vid_v, big.stamp, lat.W, lat.kin)
        else:
            rg.shared = np.full(rg.x.size, -1, dtype=np.int64)
        rings.append(rg)
    anchors(rings)
    # every contour's vertices and rings in one numbering
    vbase = np.cumsum([0] + [rg.x.size for rg in rings])
    rbase = np.cumsum([0] + [rg.off.size - 1 for rg in rings])
    x = np.concatenate([rg.x for rg in rings])
    y = np.concatenate([rg.y for rg in rings])
    off = np.concatenate([rg.off[:-1] + vbase[q] for q, rg in enumerate(rings)] + [[vbase[-1]]]).astype(np.int64)
    ring_of = np.concatenate([rg.ring_of + rbase[q] for q, rg in enumerate(rings)]).astype(np.int64)
    up = np.full(vbase[-1], -1, dtype=np.int64)
    down = np.full(vbase[-1], -1, dtype=np.int64)
    for q in range(1, K):
        sh = rings[q].shared
        at = np.flatnonzero(sh >= 0)
        up[vbase[q] + at] = vbase[q - 1] + sh[at]
        down[vbase[q - 1] + sh[at]] = vbase[q] + at
    keep = np.concatenate([simplify(rg, generalize) for rg in rings])
    orders, layers, shells, kpars, metres = [], [], [], [], []
    dropped = False
    n_out = 0
    for q, rg in enumerate(rings):
        drawn = rg.kept & rg.shell
        dropped |= bool((rg.shell & ~drawn).any())
        kr = np.flatnonzero(rg.kept)
        order = kr[np.lexsort((kr, ~rg.shell[kr], rg.part[kr]))]
        glob = np.full(rg.off.size - 1, -1, dtype=np.int64)
        glob[order] = n_out + np.arange(order.size)
        anc = _kparent(rg.off, rg.area, rg.part, rg.encl, drawn)[order]
        kpars.append(np.where(anc >= 0, glob[np.maximum(anc, 0)], -1))
        orders.append(order + rbase[q])
        layers.append(np.full(order.size, q, dtype=np.int64))
        shells.append(rg.shell[order])
        n_out += order.size
        metres.append((rg, order))
    order = np.concatenate(orders).astype(np.int64)
    out = Layers()
    out.ulon = out.ulat = None
    out.rlayer = np.concatenate(layers)
    out.rshell = np.concatenate(shells)
    out.rkpar = np.concatenate(kpars).astype(np.int64)
    out.metres = _Metres(metres)
    out.dropped = dropped
    k = math.pi / 180.0 * EARTH_RADIUS_M
    kx = k * math.cos(math.radians(lat0))
    fails = np.empty((_REPAIR_PAIRS, 2), dtype=np.int64)
    # a vertex's distance (degrees) under which Douglas-Peucker and the rounding may have moved a ring
    # across it
    near = float(generalize) / min(kx, k) * 1.01 + 2e-6
    why = 0
    fails2 = np.empty((_REPAIR_PAIRS, 2), dtype=np.int64)

    def nesting():  # each contour against its neighbours: on the positions before rounding (and repeats)
        u = _gather(x, y, off, order, keep, up, down, lon0, lat0, kx, k, False)
        return u, int(_check(u[0], u[1], u[2], out.rlayer, out.rshell, out.rkpar, u[3], u[4], 2, near, fails2))

    for _ in range(_REPAIR_ROUNDS + 1):
        # the nesting check in a worker thread beside the validity check (numba releases the GIL)
        job = thread_pool().submit(nesting) if K > 1 and order.size else None
        out.lon, out.lat, out.roff, out.vup, out.vdown, src = _gather(x, y, off, order, keep, up, down, lon0, lat0,
                                                                       kx, k, True)
        small = np.flatnonzero(np.diff(out.roff) < 3)
        if small.size:
            if job is not None:
                job.result()
            why = 11
            changed = sum(_restore_ring(int(order[r]), off, keep, up, down) for r in small)
        else:
            why = 0 if order.size == 0 else int(_check(out.lon, out.lat, out.roff, out.rlayer, out.rshell, out.rkpar,
                                                        out.vup, out.vdown, 1, near, fails))
            why2 = 0
            if job is not None:
                u, why2 = job.result()
                out.ulon, out.ulat = u[0], u[1]
            bad = [w for w in (why, why2) if w % 16 not in (0, 3, 4)]
            if bad:
                why = bad[0]
                break
            if why == 0 and why2 == 0:
                break
            changed = 0
            if why:
                changed += _restore(fails, why // 16, src, out.roff, off, ring_of, keep, up, down)
            if why2:
                changed += _restore(fails2, why2 // 16, u[5], u[2], off, ring_of, keep, up, down)
            why = why or why2
        if not changed:
            why = 12
            break
    out.why = why % 16 if why % 16 in (3, 4) else why
    out.ok = why == 0
    return out


def geojson_fast(layers, q, polygons, arrays=False):
    """GeoJSON geometry of contour ``q`` from checked :class:`Layers` (shells counter-clockwise, holes
    clockwise, rings closed); each ring's positions a list of ``[lon, lat]`` lists, or (``arrays``) one
    float64 array (k, 2) (what orjson writes without building Python objects)."""
    sel = np.flatnonzero(layers.rlayer == q)
    if sel.size == 0:
        return {"type": "MultiPolygon" if polygons else "MultiLineString", "coordinates": []}
    a, b = int(layers.roff[sel[0]]), int(layers.roff[sel[-1] + 1])
    if arrays:
        xy = np.empty((b - a + sel.size, 2))
        rings = []
        for k, r in enumerate(sel):
            i, j = int(layers.roff[r]), int(layers.roff[r + 1])
            ring = xy[i - a + k:j - a + k + 1]
            ring[:-1, 0] = layers.lon[i:j]
            ring[:-1, 1] = layers.lat[i:j]
            ring[-1] = ring[0]
            rings.append(ring)
        return _assemble(rings, layers.rshell[sel], polygons)
    pts = np.column_stack([layers.lon[a:b], layers.lat[a:b]]).tolist()
    rings = []
    for r in sel:
        i, j = int(layers.roff[r]) - a, int(layers.roff[r + 1]) - a
        ring = pts[i:j]
        ring.append(pts[i])
        rings.append(ring)
    return _assemble(rings, layers.rshell[sel], polygons)


def _assemble(rings, shell, polygons):
    """A (Multi)Polygon of rings (each shell followed by its holes), or its rings as (Multi)LineString."""
    if polygons:
        polys = []
        for ring, sh in zip(rings, shell, strict=True):
            if sh:
                polys.append([ring])
            else:
                polys[-1].append(ring)
        if len(polys) == 1:
            return {"type": "Polygon", "coordinates": polys[0]}
        return {"type": "MultiPolygon", "coordinates": polys}
    lines = [r for r, sh in zip(rings, shell, strict=True) if sh] + [r for r, sh in zip(rings, shell, strict=True)
                                                                     if not sh]
    if len(lines) == 1:
        return {"type": "LineString", "coordinates": lines[0]}
    return {"type": "MultiLineString", "coordinates": lines}


def geos_geometries(shapely, metres, generalize, clip):
    """The GEOS path: shapely polygons (local metres) of the drawn rings of each contour (largest first),
    simplified ring by ring as lines (GEOS's Douglas-Peucker; GEOS's topology-keeping one where rings
    collapse or the result is invalid), then each contour clipped to the next larger one (``clip``)."""
    out = []
    for xy, idx, rpoly in metres:
        if rpoly.size == 0:
            out.append(shapely.Polygon())
            continue
        geom = None
        if generalize > 0:
            lines = shapely.simplify(shapely.linestrings(xy, indices=idx), generalize, preserve_topology=False)
            sxy, sidx = shapely.get_coordinates(lines, return_index=True)
            if (np.bincount(sidx, minlength=rpoly.size) >= 4).all():
                polys = shapely.polygons(shapely.linearrings(sxy, indices=sidx), indices=rpoly)
                geom = polys[0] if polys.size == 1 else shapely.multipolygons(polys)
                geom = geom if shapely.is_valid(geom) else None
        if geom is None:
            polys = shapely.polygons(shapely.linearrings(xy, indices=idx), indices=rpoly)
            geom = polys[0] if polys.size == 1 else shapely.multipolygons(polys)
            if generalize > 0:
                geom = shapely.simplify(geom, generalize, preserve_topology=True)
        out.append(geom)
    if clip:
        for q in range(1, len(out)):
            box = shapely.clip_by_rect(out[q - 1], *shapely.bounds(out[q]))  # cheaper overlay
            out[q] = shapely.intersection(out[q], box)
    return out


def geojson_geos(shapely, geom, lon0, lat0, polygons):
    """A GeoJSON geometry of a (Multi)Polygon in the local metres of ``(lon0, lat0)``, in degrees (6
    decimals, snap-rounded by GEOS so the rounded polygon stays valid): the polygon itself, or its rings
    as a (Multi)LineString."""
    k = math.pi / 180.0 * EARTH_RADIUS_M
    kx = k * math.cos(math.radians(lat0))
    geom = shapely.transform(geom, lambda xy: np.column_stack([lon0 + xy[:, 0] / kx, lat0 + xy[:, 1] / k]))
    fast = shapely.transform(geom, lambda xy: np.round(xy, 6))  # GEOS's snap-rounding only if invalid
    geom = fast if shapely.is_valid(fast) else shapely.set_precision(geom, 1e-6)

    def ring(r):
        return np.round(np.asarray(r.coords), 6).tolist()

    parts = [p for p in shapely.get_parts(geom) if isinstance(p, shapely.Polygon) and not p.is_empty]
    rings = [[ring(p.exterior)] + [ring(h) for h in p.interiors] for p in parts]
    if polygons:
        if len(rings) == 1:
            return {"type": "Polygon", "coordinates": rings[0]}
        return {"type": "MultiPolygon", "coordinates": rings}
    lines = [r[0] for r in rings] + [h for r in rings for h in r[1:]]
    if len(lines) == 1:
        return {"type": "LineString", "coordinates": lines[0]}
    return {"type": "MultiLineString", "coordinates": lines}


def geometries(shapely, codes, lat, K, denoise, generalize, lon0, lat0, polygons, arrays=False):
    """GeoJSON geometries of ``K`` contours (largest first) from their field codes: the checked fast path,
    or the GEOS path when the checks fail (positions as lists there).

    Returns
    -------
    list of dict
    bool
        Whether the fast path drew them.
    """
    layers = rings_of(codes, lat, K, denoise, generalize, lon0, lat0)
    if layers.ok:
        return [geojson_fast(layers, q, polygons, arrays) for q in range(K)], True
    geoms = geos_geometries(shapely, layers.metres, generalize, generalize > 0 or layers.dropped)
    return [geojson_geos(shapely, g, lon0, lat0, polygons) for g in geoms], False


__all__ = ["CHECKS", "Rings", "trace", "structure", "anchors", "simplify", "rings_of", "Layers", "geometries",
           "geojson_fast", "geos_geometries", "geojson_geos", "drop_outside_larger"]
