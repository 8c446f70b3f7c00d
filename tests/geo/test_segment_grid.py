"""The grid index of segments (``SegmentIndex._grid``: the candidates of a request's plain coordinates, issue 20)
against brute force: its candidates hold every segment within the reach (projected onto every segment of the
index), its phantoms are the brute-force nearest segment and ties, and they are bit for bit those of the k-d
tree's balls (the index without its grid), on random points near the network, at exact segment ends, repeated,
and far outside the network's extent."""
import math

import numpy as np
import pytest

pytest.importorskip("osmium")

from gpuroute import RoadGraph, datasets  # noqa: E402
from gpuroute.geo import haversine_m  # noqa: E402
from gpuroute.geo import segments as S  # noqa: E402
from gpuroute.geo.segments import SNAP_TIE_M, NoSegment, SegmentIndex  # noqa: E402

FIELDS = ("point_start", "arc", "fraction", "segment", "segment_fraction", "lon", "lat", "distance", "name_id", "tie",
          "input_lon", "input_lat")


@pytest.fixture(scope="module")
def monaco():
    return SegmentIndex(datasets.load("monaco"))


def assert_same_snaps(got, want):
    """Two PhantomSets with equal arrays (dtypes, shapes, bits), or the same NoSegment (message, index,
    distance)."""
    if isinstance(want, NoSegment):
        assert isinstance(got, NoSegment), f"expected {want!r}, got {got!r}"
        assert (str(got), got.index, got.distance) == (str(want), want.index, want.distance)
        return
    assert not isinstance(got, Exception), f"expected phantoms, got {got!r}"
    for f in FIELDS:
        g, w = getattr(got, f), getattr(want, f)
        assert (g.dtype, g.shape) == (w.dtype, w.shape) and g.tobytes() == w.tobytes(), f


def sample_points(index, k, seed):
    """Near the network (junctions, on segments, up to 80 m off), exact segment ends, repeats, and far out:
    float64 (k + 14, 2)."""
    rng = np.random.default_rng(seed)
    nodes = index.graph.coords[rng.integers(0, index.graph.n_nodes, k // 3)]
    s = rng.integers(0, index.n_segments, k // 3)
    f = rng.uniform(0, 1, s.size)
    on = np.column_stack([index.lon_u[s] + f * (index.lon_v[s] - index.lon_u[s]),
                          index.lat_u[s] + f * (index.lat_v[s] - index.lat_u[s])])
    near = index.graph.coords[rng.integers(0, index.graph.n_nodes, k - 2 * (k // 3))]
    near = near + rng.uniform(-1, 1, near.shape) * np.array([80 / 111_000 / math.cos(math.radians(43.73)), 80 / 111_000])
    pts = np.concatenate([nodes, on, near])
    s = rng.integers(0, index.n_segments, 4)
    ends = np.column_stack([np.r_[index.lon_u[s], index.lon_v[s]], np.r_[index.lat_u[s], index.lat_v[s]]])
    far = np.array([[7.43, 43.35], [7.44, 43.72], [7.6, 43.8], [-73.9, 40.7], [7.42, -43.7], [179.9, 0.0]])
    return np.concatenate([pts, ends, ends[:2], far[:2], far[2:]])


def brute_within(index, lon, lat, reach):
    """Every segment whose projection (the point's frame, ``project``) lies within ``reach`` metres."""
    d = index.project(lon, lat, np.arange(index.n_segments))["distance"]
    return set(np.flatnonzero(d <= reach).tolist())


def test_the_candidates_hold_every_segment_within_the_reach(monaco):
    g = monaco._grid
    assert g is not None
    pts = sample_points(monaco, 150, 1)
    out = np.empty(4, dtype=np.int64)  # small: the buffer grows
    grown = 0
    for lon, lat in pts:
        for reach in (0.0, 0.5, 25.0, 130.0, 700.0):
            buf, c = S._grid_candidates(lon, lat, reach, *g, monaco._geom, out)
            grown += buf.size > out.size
            assert c >= 0  # no rectangle here crosses the antimeridian
            got = buf[:c]
            assert np.all(np.diff(got) > 0), "ascending, each segment once"
            want = brute_within(monaco, lon, lat, reach)
            assert want <= set(got.tolist()), (lon, lat, reach, sorted(want - set(got.tolist()))[:5])
    assert grown
    # a rectangle across the antimeridian: the grid cannot answer (-1)
    assert S._grid_candidates(179.99999, 0.0, 25.0, *g, monaco._geom, out)[1] == -1


def brute_snap(index, lon, lat, limit, tie):
    """The oracle: the nearest segment within ``limit`` (the smaller id on equal distances) and, with ``tie``,
    every other within ``tie`` of its distance (and the limit) whose snapped point lies within ``tie`` of its,
    by distance then id: ``[segments]``, [] when none."""
    p = index.project(lon, lat, np.arange(index.n_segments))
    d = p["distance"]
    ok = np.flatnonzero(d <= limit)
    if ok.size == 0:
        return []
    order = ok[np.lexsort((ok, d[ok]))]
    b = int(order[0])
    if tie is None:
        return [b]
    near = haversine_m(p["lon"][order], p["lat"][order], p["lon"][b], p["lat"][b]) <= tie
    return [b] + [int(j) for j, n in zip(order[1:], near[1:], strict=True) if n and d[j] <= d[b] + tie]


@pytest.mark.parametrize("tie", [SNAP_TIE_M, None, 2.0])
def test_the_grid_snaps_as_brute_force(monaco, tie, monkeypatch):
    answered = []
    grid_rows = S._grid_rows
    monkeypatch.setattr(S, "_grid_rows", lambda *a: answered.append(grid_rows(*a)[0]) or grid_rows(*a))
    pts = sample_points(monaco, 120, 2)
    rng = np.random.default_rng(3)
    for lon, lat in pts:
        limit = rng.choice([math.inf, math.inf, 0.0, 3.0, 20.0, 40.0, 400.0])
        want = brute_snap(monaco, lon, lat, limit, tie)
        try:
            got = monaco.snap_checked(np.array([lon]), np.array([lat]), radius=np.array([limit]), tie=tie)
        except NoSegment:
            assert want == [], (lon, lat, limit)
            continue
        seg = [int(s) for i, s in enumerate(got.segment) if i == 0 or s != got.segment[i - 1]]
        assert seg == want, (lon, lat, limit)
        assert not got.tie[got.segment == want[0]].any() and got.tie[got.segment != want[0]].all()
    assert sum(answered) > 0.7 * len(pts)  # most by the grid (the others: none within the radius, far at sea)


@pytest.mark.parametrize("tie", [SNAP_TIE_M, None, 2.0])
def test_the_grid_answers_as_the_kdtree(monaco, tie, monkeypatch):
    """Requests of 1-6 coordinates (repeats, segment ends, radiuses, bearings, curb approaches, points far out:
    the k-d tree's way or NoSegment): the same PhantomSets, bit for bit, or the same error, with the grid and
    without it (the k-d tree's balls, and :meth:`SegmentIndex._search` for bearings and approaches)."""
    pts = sample_points(monaco, 600, 4)
    rng = np.random.default_rng(5)
    answered = []
    grid_rows = S._grid_rows
    monkeypatch.setattr(S, "_grid_rows", lambda *a: answered.append(grid_rows(*a)[0]) or grid_rows(*a))

    def snap(grid, lon, lat, radius, bearing, curb):
        monkeypatch.setattr(monaco, "_grid", grid)
        try:
            return monaco.snap_checked(lon, lat, radius=radius, bearing=bearing, curb=curb, tie=tie)
        except NoSegment as e:
            return e

    grid = monaco._grid
    special = 0
    for _ in range(300):
        k = int(rng.integers(1, 7))
        p = pts[rng.integers(0, len(pts), k)]
        radius = bearing = curb = None
        if rng.random() < 0.3:
            radius = rng.choice([math.inf, 0.0, 1.0, 10.0, 30.0, 200.0], k)
        if rng.random() < 0.3:  # bearings (NaN rows: none), as the engine's records carry them
            bearing = np.column_stack([rng.choice([0.0, 90.0, 200.0, 360.0], k), rng.choice([0.0, 20.0, 90.0, 180.0], k)])
            bearing[rng.random(k) < 0.3] = np.nan
        if rng.random() < 0.3:
            curb = rng.random(k) < 0.6
        n = len(answered)
        assert_same_snaps(snap(grid, p[:, 0], p[:, 1], radius, bearing, curb),
                          snap(None, p[:, 0], p[:, 1], radius, bearing, curb))
        special += (bearing is not None or curb is not None) and answered[n]
    assert sum(answered) > 150 and special > 40


def test_a_segment_across_the_antimeridian_leaves_the_index_without_grid():
    coords = np.array([[179.9995, -16.5], [-179.9995, -16.5], [179.999, -16.501]])
    g = RoadGraph.from_arcs(3, [0, 1, 0, 2], [1, 0, 2, 0], {"d": [100, 100, 120, 120]}, coords=coords,
                            coord_system="lonlat")
    idx = SegmentIndex(g, component="any")
    assert idx._grid is None
    lon, lat = np.array([180.0, -179.9999, 179.999]), np.array([-16.5001, -16.4999, -16.5009])
    ph = idx.snap_checked(lon, lat)
    want = [brute_snap(idx, x, y, math.inf, SNAP_TIE_M)[0] for x, y in zip(lon, lat, strict=True)]
    assert ph.segment[ph.point_start[:-1]].tolist() == want


def test_the_grid_near_the_antimeridian_falls_back():
    """Segments near (not across) the antimeridian: a coordinate whose rectangle crosses it snaps the k-d
    tree's way, one farther in by the grid, both as brute force."""
    coords = np.array([[179.998, 10.0], [179.9999, 10.0], [179.99, 10.001]])
    g = RoadGraph.from_arcs(3, [0, 1, 0, 2], [1, 0, 2, 0], {"d": [100, 100, 120, 120]}, coords=coords,
                            coord_system="lonlat")
    idx = SegmentIndex(g, component="any")
    assert idx._grid is not None
    for lon, lat in ((179.99995, 10.00001), (179.995, 10.0004), (-179.9999, 10.0)):
        want = brute_snap(idx, lon, lat, math.inf, SNAP_TIE_M)
        got = idx.snap_checked(np.array([lon]), np.array([lat]))
        assert int(got.segment[0]) == want[0]


def test_nearest_by_the_grid_as_brute_force_and_the_kdtree(monaco, monkeypatch):
    """``nearest_checked`` (OSRM's /nearest with ``number``): the ``number`` nearest segments within the radius by
    distance then id (brute force), and the PhantomSet of the k-d tree's search bit for bit."""
    answered = []
    grid_nearest = S._grid_nearest
    monkeypatch.setattr(S, "_grid_nearest", lambda *a: answered.append(grid_nearest(*a)[0]) or grid_nearest(*a))
    pts = sample_points(monaco, 90, 6)
    rng = np.random.default_rng(7)
    grid = monaco._grid

    def nearest(g, lon, lat, number, radius):
        monkeypatch.setattr(monaco, "_grid", g)
        try:
            return monaco.nearest_checked(lon, lat, number, radius=radius)
        except NoSegment as e:
            return e

    for lon, lat in pts:
        number = int(rng.choice([1, 2, 5, 40]))
        radius = None if rng.random() < 0.6 else float(rng.choice([0.0, 10.0, 60.0]))
        got = nearest(grid, lon, lat, number, radius)
        assert_same_snaps(got, nearest(None, lon, lat, number, radius))
        d = monaco.project(lon, lat, np.arange(monaco.n_segments))["distance"]
        ok = np.flatnonzero(d <= (math.inf if radius is None else radius))
        want = ok[np.lexsort((ok, d[ok]))][:number]
        if want.size == 0:
            assert isinstance(got, NoSegment)
        else:
            assert got.segment[got.first].tolist() == want.tolist()
    assert sum(answered) > 0.7 * len(pts)
