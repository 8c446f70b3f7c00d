"""Batch snapping (``SegmentIndex.snap_batch``, ``snap_many`` and the engine's ``_snap``) against the oracle
of snapping one coordinate after the other with ``SegmentIndex.snap``: the same PhantomSet, array by array
and bit for bit (ties included), and the same first error, on Monaco and on New York."""
import math

import numpy as np
import pytest

pytest.importorskip("osmium")

from phantoms import point, points  # noqa: E402

from gpuroute import datasets  # noqa: E402
from gpuroute.engine import Engine, EngineError  # noqa: E402
from gpuroute.geo.segments import SNAP_TIE_M, NoSegment, PhantomSet, SegmentIndex  # noqa: E402

#: The Mediterranean 40 km south of Monaco (farther than the batch's 5 km: snapped one at a time), and
#: 1.5 km off the coast (in the batch).
SEA_FAR = (7.43, 43.35)
SEA_NEAR = (7.44, 43.72)


@pytest.fixture(scope="module")
def monaco():
    return SegmentIndex(datasets.load("monaco"))


@pytest.fixture(scope="module")
def ny():
    return SegmentIndex(datasets.load("ny-time"))


def one_by_one(index, lons, lats, radiuses=None, bearings=None, approaches=None, tie=SNAP_TIE_M):
    """The oracle: ``snap`` of each coordinate in order; their PhantomSet, or the first error."""
    out = []
    for i in range(len(lons)):
        try:
            out.append(index.snap(lons[i], lats[i], radius=None if radiuses is None else radiuses[i],
                                  bearing=None if bearings is None else bearings[i],
                                  approach=None if approaches is None else approaches[i], index=i, tie=tie))
        except ValueError as e:  # NoSegment too
            return e
    return PhantomSet.concat(out)


def assert_same_phantoms(got, want, where=""):
    """Two PhantomSets with equal arrays (dtypes, shapes and values, bit for bit)."""
    assert isinstance(got, PhantomSet), where
    for f in ("point_start", "arc", "fraction", "segment", "segment_fraction", "lon", "lat", "distance", "name_id",
              "tie", "input_lon", "input_lat"):
        g, w = getattr(got, f), getattr(want, f)
        assert g.dtype == w.dtype and g.shape == w.shape, f"{where}: {f} is {g.dtype} {g.shape}, snap: {w.dtype} {w.shape}"
        bits = (lambda x: x.view(np.int64)) if g.dtype == np.float64 else (lambda x: x)
        bad = np.flatnonzero(bits(g) != bits(w))
        assert bad.size == 0, f"{where}: {f}[{bad[:5]}] is {g[bad[:5]]}, snap gives {w[bad[:5]]}"


def assert_same_snaps(got, want):
    """Phantom lists equal field by field, or the same error (type, message, index, distance)."""
    if isinstance(want, Exception):
        assert isinstance(got, Exception), f"snap raises {want!r}, the batch answered"
        assert type(got) is type(want) and str(got) == str(want), (got, want)
        if isinstance(want, NoSegment):
            assert (got.index, got.distance) == (want.index, want.distance)
        return
    assert not isinstance(got, Exception), f"the batch raised {got!r}"
    assert_same_phantoms(got, want)


def batch(index, lons, lats, **kw):
    try:
        return index.snap_batch(lons, lats, **kw)
    except ValueError as e:
        return e


def mixed_points(index, k, seed):
    """Junction nodes (ties), points on segments, points near roads, and a few off the network."""
    g = index.graph
    rng = np.random.default_rng(seed)
    nodes = g.coords[rng.integers(0, g.n_nodes, k // 3)]
    s = rng.integers(0, index.n_segments, k // 3)
    f = rng.uniform(0, 1, s.size)
    on = np.column_stack([index.lon_u[s] + f * (index.lon_v[s] - index.lon_u[s]),
                          index.lat_u[s] + f * (index.lat_v[s] - index.lat_u[s])])
    near = g.coords[rng.integers(0, g.n_nodes, k - 2 * (k // 3))]
    near = near + rng.uniform(-1, 1, near.shape) * np.array([80 / 111_000 / math.cos(math.radians(near[0, 1])),
                                                              80 / 111_000])
    pts = np.concatenate([nodes, on, near])
    return pts[rng.permutation(len(pts))]


@pytest.mark.parametrize("tie", [SNAP_TIE_M, None, 2.0])
def test_batch_equals_one_by_one_on_monaco(monaco, tie, monkeypatch):
    pts = np.concatenate([mixed_points(monaco, 300, 1), [SEA_FAR, SEA_NEAR]])
    alone = []
    one = monaco._candidates
    monkeypatch.setattr(monaco, "_candidates", lambda *a: alone.append(a[6]) or one(*a))
    got = monaco.snap_batch(pts[:, 0], pts[:, 1], tie=tie)
    assert alone == [len(pts) - 2]  # only the coordinate 40 km out at sea, one at a time
    want = one_by_one(monaco, pts[:, 0], pts[:, 1], tie=tie)
    assert_same_snaps(got, want)
    assert point(got, len(pts) - 2).distance > 5000 and 1000 < point(got, len(pts) - 1).distance < 5000
    want = points(want)
    if tie == SNAP_TIE_M:
        assert int(got.tie.sum()) > 20  # the junction nodes tie
    if tie == 2.0:
        # radiuses between the nearest segment and its farthest tie: the ties beyond the radius drop out
        far_tie = [max((t.distance for t in p.ties), default=0.0) for p in want]
        r = [0.5 * (p.distance + f) if f > p.distance + 0.5 else None for p, f in zip(want, far_tie, strict=True)]
        want_r = one_by_one(monaco, pts[:, 0], pts[:, 1], radiuses=r, tie=tie)
        assert sum(len(p.ties) for p in points(want_r)) < sum(len(p.ties) for p in want)
        assert_same_snaps(monaco.snap_batch(pts[:, 0], pts[:, 1], radiuses=r, tie=tie), want_r)


def test_batch_equals_one_by_one_on_ny(ny):
    pts = mixed_points(ny, 600, 2)
    got = ny.snap_batch(pts[:, 0], pts[:, 1])
    assert_same_snaps(got, one_by_one(ny, pts[:, 0], pts[:, 1]))
    assert len(np.unique(got.segment[got.tie])) > 50


def test_radiuses_and_the_first_error(monaco):
    pts = np.concatenate([mixed_points(monaco, 60, 3), [SEA_NEAR, SEA_FAR, SEA_FAR]])
    lons, lats = pts[:, 0], pts[:, 1]
    free = points(one_by_one(monaco, lons, lats))
    rng = np.random.default_rng(4)
    # every coordinate snaps: radius 1 mm or 2 m on the network (junctions: ties at distance ~0), else wider
    radiuses = [float(rng.choice([1e-3, 2.0])) if p.distance < 1e-6 else (None if rng.uniform() < 0.5 else 300.0)
                for p in free]
    radiuses[-3:] = [2000.0, 50_000.0, None]
    want = one_by_one(monaco, lons, lats, radiuses=radiuses)
    assert not isinstance(want, Exception) and sum(len(p.ties) for p in points(want)) > 5
    assert_same_snaps(batch(monaco, lons, lats, radiuses=radiuses), want)
    # a radius leaving nothing: NoSegment naming the first such coordinate, near or far from the network
    for j, r_j in ((-3, 1000.0), (-2, 1000.0), (-2, 6000.0), (5, 0.0), (-1, 0.0)):
        r = list(radiuses)
        r[j] = r_j
        lo, la = lons.copy(), lats.copy()
        if j == 5:
            lo[j], la[j] = SEA_NEAR
            r[9] = 0.0 if free[9].distance > 1 else r[9]  # maybe a second one, later
        want = one_by_one(monaco, lo, la, radiuses=r)
        assert isinstance(want, NoSegment) and want.index == j % len(lo), (j, want)
        assert_same_snaps(batch(monaco, lo, la, radiuses=r), want)


@pytest.mark.parametrize("bad", [(200.0, 43.7), (7.42, -91.0), (float("nan"), 43.7), (7.42, float("inf"))])
def test_out_of_range_coordinates(monaco, bad):
    pts = mixed_points(monaco, 12, 5)
    lons, lats = pts[:, 0].copy(), pts[:, 1].copy()
    lons[7], lats[7] = bad
    want = one_by_one(monaco, lons, lats)
    assert isinstance(want, ValueError) and "coordinate 7" in str(want)
    assert_same_snaps(batch(monaco, lons, lats), want)
    # an earlier coordinate without a segment within its radius wins; a later one does not
    for j, code in ((3, NoSegment), (9, ValueError)):
        lo, la = lons.copy(), lats.copy()
        lo[j], la[j] = SEA_NEAR
        r = [None] * len(lo)
        r[j] = 100.0
        want = one_by_one(monaco, lo, la, radiuses=r)
        assert type(want) is code
        assert_same_snaps(batch(monaco, lo, la, radiuses=r), want)


def test_bearings_and_curb_take_the_one_by_one_path(monaco):
    pts = mixed_points(monaco, 60, 6)
    k = len(pts)
    rng = np.random.default_rng(7)
    bearings = [None if i % 3 else (float(rng.uniform(0, 360)), 45.0) for i in range(k)]
    approaches = [("curb", "unrestricted", None)[i % 3] for i in range(k)]
    radiuses = [None if i % 4 else 300.0 for i in range(k)]
    kw = dict(radiuses=radiuses, bearings=bearings, approaches=approaches)
    assert_same_snaps(batch(monaco, pts[:, 0], pts[:, 1], **kw), one_by_one(monaco, pts[:, 0], pts[:, 1], **kw))
    # bad options: the first one, unless a coordinate before it has no segment
    for j, opt, val in ((10, "bearings", (400.0, 10.0)), (12, "approaches", "opposite"), (8, "radiuses", -1.0)):
        bad = {**kw, opt: list(kw[opt])}
        bad[opt][j] = val
        want = one_by_one(monaco, pts[:, 0], pts[:, 1], **bad)
        assert isinstance(want, ValueError) and not isinstance(want, NoSegment)
        assert_same_snaps(batch(monaco, pts[:, 0], pts[:, 1], **bad), want)
        lo, la = pts[:, 0].copy(), pts[:, 1].copy()
        lo[[2, 30]], la[[2, 30]] = SEA_NEAR  # 2 in the batch, 30 (a bearing) one at a time: 2 comes first
        bad["radiuses"] = list(bad["radiuses"])
        bad["radiuses"][2] = bad["radiuses"][30] = 10.0
        assert bad["bearings"][30] is not None
        want = one_by_one(monaco, lo, la, **bad)
        assert isinstance(want, NoSegment) and want.index == 2
        assert_same_snaps(batch(monaco, lo, la, **bad), want)


def test_snap_many_and_shapes(monaco):
    pts = mixed_points(monaco, 20, 8)
    assert_same_snaps(monaco.snap_many(pts.tolist()), one_by_one(monaco, pts[:, 0], pts[:, 1]))
    assert monaco.snap_batch([], []).n_points == 0 and monaco.snap_many([]).n_points == 0
    assert monaco.snap_batch([], []).point_start.tolist() == [0]
    with pytest.raises(ValueError, match="one length"):
        monaco.snap_batch(pts[:3, 0], pts[:2, 1])
    with pytest.raises(ValueError, match="radiuses has 2 entries for 3"):
        monaco.snap_batch(pts[:3, 0], pts[:3, 1], radiuses=[1.0, 2.0])
    # not numbers: the one-by-one messages
    with pytest.raises(ValueError, match="coordinate 1 must be numbers"):
        monaco.snap_batch([7.42, None], [43.73, 43.73])
    with pytest.raises(ValueError, match="coordinate 1 must be a \\(lon, lat\\) pair"):
        monaco.snap_many([(7.42, 43.73), (7.42,)])


def test_engine_snaps_the_batch_and_checks_options_first():
    """The engine's snapping (a checked record, ``Engine._snap``) is the batch's, bit for bit; options are
    checked before anything is snapped (OSRM's order): a bad option is InvalidOptions even after a
    coordinate without a segment, and with good options the first coordinate without one is NoSegment."""
    from gpuroute.engine.params import RouteParams

    eng = Engine.open("monaco")
    pts = mixed_points(eng.segments, 9, 9).tolist()
    assert_same_snaps(eng._snap(RouteParams.from_kwargs(pts)), one_by_one(eng.segments, *np.asarray(pts).T))
    pts[2] = list(SEA_NEAR)
    radiuses = [None] * 9
    radiuses[2] = 100
    radiuses[6] = "far"
    with pytest.raises(EngineError, match="radius of coordinate 6") as ei:
        eng.route(pts, radiuses=radiuses)
    assert ei.value.code == "InvalidOptions"
    radiuses[6] = None
    with pytest.raises(EngineError, match="coordinate 2") as ei:
        eng.route(pts, radiuses=radiuses)
    assert ei.value.code == "NoSegment"
