"""Segment snapping (gpuroute.geo.segments) on the shipped Monaco extract, against a brute-force
projection of each point onto every arc, computed here independently."""
import math

import numpy as np
import pytest

pytest.importorskip("osmium")

from phantoms import point  # noqa: E402
from phantoms import points as phantom_points  # noqa: E402

from gpuroute import datasets  # noqa: E402
from gpuroute.geo import EARTH_RADIUS_M, haversine_m  # noqa: E402
from gpuroute.geo.segments import NoSegment, SegmentIndex  # noqa: E402
from gpuroute.geo.snap import SnapError, largest_scc_mask  # noqa: E402


@pytest.fixture(scope="module")
def monaco():
    return datasets.load("monaco")


@pytest.fixture(scope="module")
def index(monaco):
    return SegmentIndex(monaco)


def brute(g, lon, lat, arcs):
    """Distance (m, local equirectangular frame at the point), fraction, bearing of u -> v and side
    (< 0: right) of the point against every arc in ``arcs``."""
    c = g.coords
    k = math.pi / 180 * EARTH_RADIUS_M

    def xy(a):
        return (c[a, 0] - lon) * k * math.cos(math.radians(lat)), (c[a, 1] - lat) * k

    ax, ay = xy(g.tail[arcs])
    bx, by = xy(g.head[arcs])
    dx, dy = bx - ax, by - ay
    ll = dx * dx + dy * dy
    t = np.clip(np.where(ll > 0, -(ax * dx + ay * dy) / np.where(ll > 0, ll, 1), 0), 0, 1)
    d = np.hypot(ax + t * dx, ay + t * dy)
    bearing = np.degrees(np.arctan2(dx, dy)) % 360
    side = dx * -ay - dy * -ax
    return d, t, bearing, side


def points(g, k, seed, jitter_m=60.0):
    """Points near the network: random nodes moved by up to ``jitter_m`` metres."""
    rng = np.random.default_rng(seed)
    nodes = rng.integers(0, g.n_nodes, k)
    j = jitter_m / 111_000
    return np.column_stack([g.coords[nodes, 0] + rng.uniform(-j, j, k) / math.cos(math.radians(43.73)),
                            g.coords[nodes, 1] + rng.uniform(-j, j, k)])


def scc_arcs(g):
    m = largest_scc_mask(g)
    return np.flatnonzero(m[g.tail] & m[g.head])


def test_segments_pair_the_two_directions(monaco, index):
    g = monaco
    t, h = g.tail, g.head
    assert (t[index.forward_arc] == index.u).all() and (h[index.forward_arc] == index.v).all()
    two = index.reverse_arc >= 0
    r = index.reverse_arc[two]
    assert (t[r] == index.v[two]).all() and (h[r] == index.u[two]).all()
    # every arc of the largest component is exactly one segment's forward or reverse arc
    covered = np.concatenate([index.forward_arc, r])
    assert np.array_equal(np.sort(covered), scc_arcs(g))
    assert 0 < two.sum() < index.n_segments
    assert index.names and all(isinstance(s, str) for s in index.names)
    assert (index.name_id >= 0).mean() > 0.5  # most Monaco streets have a name
    assert SegmentIndex.of(g) is SegmentIndex.of(g)


def test_nearest_segment_equals_brute_force(monaco, index):
    g = monaco
    arcs = scc_arcs(g)
    for lon, lat in points(g, 150, 1):
        p = point(index.snap(lon, lat), 0, index)
        d, t, _, _ = brute(g, lon, lat, arcs)
        best = d.min()
        assert p.distance == pytest.approx(best, abs=1e-3, rel=1e-4)  # great circle vs the local frame
        # the phantom's segment is one of the nearest arcs, at the same fraction
        a = p.forward_arc if p.forward_arc >= 0 else p.reverse_arc
        k = int(np.flatnonzero(arcs == a)[0])
        assert d[k] == pytest.approx(best, abs=1e-6)
        f = t[k] if a == p.forward_arc else 1 - t[k]
        assert p.fraction == pytest.approx(f, abs=1e-9)
        # the snapped location lies on u -> v at that fraction, its distance is the great circle one
        cu, cv = g.coords[p.u], g.coords[p.v]
        assert (p.lon, p.lat) == pytest.approx(tuple(cu + p.fraction * (cv - cu)), abs=1e-12)
        assert p.distance == pytest.approx(float(haversine_m(lon, lat, p.lon, p.lat)), rel=1e-12)
        assert p.name_id == index.name_id[p.segment]


def test_nearest_k_equals_brute_force(monaco, index):
    g = monaco
    arcs = index.forward_arc
    for lon, lat in points(g, 20, 2):
        got = phantom_points(index.nearest(lon, lat, 6))
        d, _, _, _ = brute(g, lon, lat, arcs)  # one entry per segment
        want = np.sort(d)[:6]
        assert [p.distance for p in got] == pytest.approx(list(want), abs=1e-3)
        assert len({p.segment for p in got}) == 6


def test_radius(monaco, index):
    lon, lat = 7.4246, 43.7270  # at sea, south of the port: over 100 m from any road
    p = point(index.snap(lon, lat))
    assert p.distance > 100
    assert point(index.snap(lon, lat, radius=p.distance + 1)).segment == p.segment
    with pytest.raises(NoSegment, match="coordinate 3") as ei:
        index.snap(lon, lat, radius=50, index=3)
    assert ei.value.index == 3 and ei.value.code == "NoSegment" and isinstance(ei.value, SnapError)
    assert index.nearest(lon, lat, 50, radius=p.distance + 30)  # fewer than asked is fine
    assert (index.nearest(lon, lat, 50, radius=p.distance + 30).distance <= p.distance + 30).all()


def test_bearing_filter_equals_brute_force(monaco, index):
    g = monaco
    arcs = scc_arcs(g)
    rng = np.random.default_rng(3)
    for (lon, lat), value in zip(points(g, 40, 4), rng.uniform(0, 360, 40), strict=True):
        rng_deg = 30.0
        p = point(index.snap(lon, lat, bearing=(value, rng_deg)))
        d, _, b, _ = brute(g, lon, lat, arcs)
        diff = np.abs((b - value + 180) % 360 - 180)
        assert p.distance == pytest.approx(d[diff <= rng_deg].min(), abs=1e-3)
        for a, _f in p.arcs:  # only directions within the range are usable
            ba = float(np.degrees(np.arctan2(*(np.array([math.cos(math.radians(lat)), 1.0])
                                                * (g.coords[g.head[a]] - g.coords[g.tail[a]])))) % 360)
            assert abs((ba - value + 180) % 360 - 180) <= rng_deg + 1e-6


def test_curb_keeps_the_direction_with_the_point_on_its_right(monaco, index):
    g = monaco
    n_two = 0
    for lon, lat in points(g, 80, 5):
        free = point(index.snap(lon, lat), 0, index)
        p = point(index.snap(lon, lat, approach="curb"), 0, index)
        assert p.segment == free.segment  # the approach restricts directions, not the segment
        if index.reverse_arc[p.segment] < 0:
            assert (p.forward_arc, p.reverse_arc) == (free.forward_arc, -1)  # one-way: unchanged
            continue
        (a, _f), = p.arcs
        _, _, _, side = brute(g, lon, lat, np.array([a]))
        if abs(side[0]) > 1e-6:
            n_two += 1
            assert side[0] < 0  # right of the arc driven
    assert n_two > 10


def test_component_any_holds_more(monaco, index):
    allseg = SegmentIndex(monaco, component="any")
    assert allseg.n_segments > index.n_segments


@pytest.mark.parametrize("kw, match", [
    (dict(lon=float("nan"), lat=43.7), "coordinate 0"),
    (dict(lon=7.42, lat=95.0), "not a valid"),
    (dict(lon=7.42, lat=43.73, bearing=(400, 10)), "bearing of coordinate 0"),
    (dict(lon=7.42, lat=43.73, bearing=(90, 200)), "range"),
    (dict(lon=7.42, lat=43.73, approach="opposite"), "approach"),
    (dict(lon=7.42, lat=43.73, radius=-1), "radius"),
])
def test_bad_input(index, kw, match):
    with pytest.raises(ValueError, match=match):
        index.snap(**kw)


def test_snap_many_names_the_index(index):
    got = index.snap_many([(7.42, 43.735), (7.425, 43.74)], radiuses=[None, 500], approaches=["curb", None])
    assert got.n_points == 2 and list(got.input_lon) == [7.42, 7.425]
    with pytest.raises(ValueError, match="radiuses has 1 entries for 2"):
        index.snap_many([(7.42, 43.735), (7.425, 43.74)], radiuses=[5])
    with pytest.raises(NoSegment, match="coordinate 1") as ei:
        index.snap_many([(7.42, 43.735), (7.4246, 43.7270)], radiuses=[None, 20])
    assert ei.value.index == 1
