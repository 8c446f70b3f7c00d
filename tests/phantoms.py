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
