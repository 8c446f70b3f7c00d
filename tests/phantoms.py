"""Reading one point of a :class:`gpuroute.geo.segments.PhantomSet` in tests: the fields of its nearest
segment and of its ties as plain namespaces (the service code reads the arrays; the oracles compare per
point), and a PhantomSet made from option lists (the search tests' waypoints)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from gpuroute.geo.segments import PhantomSet


def point(ps, i=0, index=None):
    """Point ``i`` of ``ps``: ``segment``, ``fraction`` (along u -> v), ``lon``, ``lat``, ``distance``,
    ``name_id``, ``input_lon``, ``input_lat``, ``arcs`` (its segment's options as (arc, fraction) pairs), ``all_arcs`` (every option, ties
    included), ``ties`` (one namespace per tied segment, without ties), and with ``index`` (the
    SegmentIndex) ``u``, ``v``, ``forward_arc``, ``reverse_arc`` (-1: not usable)."""
    r = ps.rows(i)
    seg = ps.segment[r]
    groups = []  # (segment, rows) in order
    for j in range(r.start, r.stop):
        if not groups or groups[-1][0] != int(ps.segment[j]):
            groups.append((int(ps.segment[j]), []))
        groups[-1][1].append(j)

    def one(s, rows):
        j = rows[0]
        out = SimpleNamespace(segment=s, fraction=float(ps.segment_fraction[j]), lon=float(ps.lon[j]),
                              lat=float(ps.lat[j]), distance=float(ps.distance[j]), name_id=int(ps.name_id[j]),
                              arcs=[(int(ps.arc[k]), float(ps.fraction[k])) for k in rows], index=i,
                              input_lon=float(ps.input_lon[i]), input_lat=float(ps.input_lat[i]))
        if index is not None:
            out.u, out.v = int(index.u[s]), int(index.v[s])
            arcs = [int(ps.arc[k]) for k in rows]
            fw, rv = int(index.forward_arc[s]), int(index.reverse_arc[s])
            out.forward_arc = fw if fw in arcs else -1
            out.reverse_arc = rv if rv >= 0 and rv in arcs else -1
        return out

    p = one(*groups[0])
    p.ties = tuple(one(*g) for g in groups[1:])
    p.all_arcs = [(int(a), float(f)) for a, f in zip(ps.arc[r], ps.fraction[r], strict=True)]
    assert len({s for s, _ in groups}) == len(groups) and seg.size == len(p.all_arcs)
    return p


def points(ps, index=None):
    """:func:`point` of every point."""
    return [point(ps, i, index) for i in range(ps.n_points)]


def from_options(opts):
    """A PhantomSet whose point ``i`` has the options ``opts[i]`` (a list of (arc, fraction) pairs), the
    other fields zero: what the searches read."""
    n = len(opts)
    cnt = np.array([len(o) for o in opts], dtype=np.int64)
    start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(cnt, out=start[1:])
    flat = np.array([x for o in opts for x in o], dtype=np.float64).reshape(-1, 2)
    r = flat.shape[0]
    z = np.zeros(r)
    return PhantomSet(start, flat[:, 0].astype(np.int32), flat[:, 1].copy(), np.zeros(r, np.int32), z, z, z, z,
                      np.full(r, -1, np.int32), np.zeros(r, bool), np.zeros(n), np.zeros(n))


def random_points(e, k, seed):
    """``k`` (lon, lat) points within ~30 m of distinct random nodes of ``e``'s largest strongly connected
    component."""
    from gpuroute.geo.snap import largest_scc_mask

    g = e.graph
    rng = np.random.default_rng(seed)
    nodes = rng.choice(np.flatnonzero(largest_scc_mask(g)), k, replace=False)
    j = 30 / 111_000
    return [(float(g.coords[v, 0] + rng.uniform(-j, j)), float(g.coords[v, 1] + rng.uniform(-j, j))) for v in nodes]


def option_point(arcs, frac):
    """A phantom as the oracles read it (tests/turn_oracle.py ``phantom_cost``): ``arcs`` and ``all_arcs``, lists
    of (arc, fraction), from one row of option arrays (arc -1: an unused slot)."""
    opts = [(int(a), float(f)) for a, f in zip(arcs, frac, strict=True) if a >= 0]
    return SimpleNamespace(arcs=opts, all_arcs=opts)


def random_options(g, rng, k, o=3):
    """``k`` points as option arrays (arcs int64 (k, o), fractions float64 (k, o); the many-to-many tables'
    input): an arc at a random fraction, its reverse arc (where there is one) at ``1 - f`` four times in five,
    now and then a third arc (a snapping tie); unused slots -1, and some rows with the first slot unused."""
    m = g.n_arcs
    rev = {(int(u), int(v)): i for i, (u, v) in enumerate(zip(g.tail, g.head, strict=True))}
    arcs = np.full((k, o), -1, np.int64)
    frac = np.zeros((k, o))
    for i in range(k):
        a, f = int(rng.integers(m)), float(rng.random())
        arcs[i, 0], frac[i, 0] = a, f
        r = rev.get((int(g.head[a]), int(g.tail[a])))
        if r is not None and rng.random() < 0.8:
            arcs[i, 1], frac[i, 1] = r, 1.0 - f
        if rng.random() < 0.3:
            arcs[i, 2], frac[i, 2] = int(rng.integers(m)), float(rng.random())
        if rng.random() < 0.2:
            arcs[i] = np.roll(arcs[i], 1)
            frac[i] = np.roll(frac[i], 1)
    return arcs, frac
