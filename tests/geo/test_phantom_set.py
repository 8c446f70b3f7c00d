"""The PhantomSet's layout (``gpuroute.geo.segments.PhantomSet``): one row per snapping option in CSR
order, its dtypes, the nearest segment's options first (forward before reverse) then the ties', and its
helpers (``padded``, ``take``, ``concat``, ``offsets``) against per-point loops written here."""
import numpy as np
import pytest

pytest.importorskip("osmium")

from gpuroute import datasets  # noqa: E402
from gpuroute.geo.segments import PhantomSet, SegmentIndex  # noqa: E402


@pytest.fixture(scope="module")
def index():
    return SegmentIndex(datasets.load("monaco"))


@pytest.fixture(scope="module")
def ps(index):
    """Junction nodes (ties), points inside segments and a few metres off them."""
    rng = np.random.default_rng(1)
    k = 120
    seg = rng.integers(0, index.n_segments, k)
    f = np.where(rng.random(k) < 0.4, 0.0, rng.uniform(0.05, 0.95, k))
    lon = index.lon_u[seg] + f * (index.lon_v[seg] - index.lon_u[seg]) + rng.normal(0, 1e-5, k) * (f > 0)
    lat = index.lat_u[seg] + f * (index.lat_v[seg] - index.lat_u[seg])
    return index.snap_batch(lon, lat)


def test_layout_and_dtypes(index, ps):
    n, r = ps.n_points, int(ps.point_start[-1])
    assert ps.point_start.dtype == np.int64 and ps.point_start.shape == (n + 1,) and ps.point_start[0] == 0
    assert (np.diff(ps.point_start) >= 1).all()  # every point has an option
    for f, dt in (("arc", np.int32), ("fraction", np.float64), ("segment", np.int32), ("segment_fraction", np.float64),
                  ("lon", np.float64), ("lat", np.float64), ("distance", np.float64), ("name_id", np.int32),
                  ("tie", np.bool_)):
        assert getattr(ps, f).dtype == dt and getattr(ps, f).shape == (r,), f
    assert ps.input_lon.shape == ps.input_lat.shape == (n,)
    assert ps.tie.any() and not ps.tie[ps.first].any()
    for i in range(n):
        rows = np.arange(ps.point_start[i], ps.point_start[i + 1])
        own = rows[~ps.tie[rows]]
        assert (own == rows[:own.size]).all()  # the nearest segment's options first, then the ties'
        s = int(ps.segment[rows[0]])
        assert (ps.segment[own] == s).all() and not np.isin(ps.segment[rows[own.size:]], [s]).any()
        for j in rows:  # forward at the fraction, reverse at 1 - fraction; forward first
            sg, f = int(ps.segment[j]), float(ps.segment_fraction[j])
            if ps.arc[j] == index.forward_arc[sg]:
                assert ps.fraction[j] == f
            else:
                assert ps.arc[j] == index.reverse_arc[sg] and ps.fraction[j] == 1.0 - f
                assert j == rows[0] or ps.segment[j - 1] != sg or ps.arc[j - 1] == index.forward_arc[sg]
        assert (ps.distance[rows[1:]] >= ps.distance[rows[0]] - 1e-3).all()  # frame vs great circle


def test_padded_take_concat_offsets(ps):
    rng = np.random.default_rng(2)
    idx = rng.integers(0, ps.n_points, 30)
    arcs, frac = ps.padded(idx)
    assert arcs.shape[1] == max(2, int(ps.counts[idx].max()))
    sub = ps.take(idx)
    for j, i in enumerate(idx.tolist()):
        a, f = ps.options(i)
        assert arcs[j, :a.size].tolist() == a.tolist() and frac[j, :a.size].tolist() == f.tolist()
        assert (arcs[j, a.size:] == -1).all() and (frac[j, a.size:] == 0).all()
        b, g = sub.options(j)
        assert b.tolist() == a.tolist() and g.tolist() == f.tolist()
        assert sub.input_lon[j] == ps.input_lon[i]
    both = PhantomSet.concat([sub, ps])
    assert both.n_points == sub.n_points + ps.n_points
    assert both.options(sub.n_points + 3)[0].tolist() == ps.options(3)[0].tolist()
    cost = rng.uniform(1, 100, int(ps.arc.max()) + 1)
    fw, bw = ps.offsets(cost)
    for j in range(0, ps.arc.size, 7):
        c = cost[ps.arc[j]]
        assert fw[j] == (1.0 - ps.fraction[j]) * c and bw[j] == ps.fraction[j] * c


def test_one_pass_rows_equal_candidate_rows(index):
    """A request settled by its first ball (``snap_checked``'s common case) gets its PhantomSet from one
    compiled pass (``_settled_rows``): the same arrays as the candidate arrays' counting sort
    (``_from_candidates``, the general path), ties included."""
    from gpuroute.geo import segments as S

    rng = np.random.default_rng(7)
    k = 60
    seg = rng.integers(0, index.n_segments, k)
    f = np.where(rng.random(k) < 0.4, 0.0, rng.uniform(0.05, 0.95, k))
    lon = np.ascontiguousarray(index.lon_u[seg] + f * (index.lon_v[seg] - index.lon_u[seg]))
    lat = np.ascontiguousarray(index.lat_u[seg] + f * (index.lat_v[seg] - index.lat_u[seg]))
    limit = np.full(k, np.inf)
    fast, found, _ = index._snap_plain(lon, lat, limit, np.arange(k), S.SNAP_TIE_M, whole=True)
    assert isinstance(fast, PhantomSet) and found.all()
    cands, found, _ = index._snap_plain(lon, lat, limit, np.arange(k), S.SNAP_TIE_M)
    ref = S._from_candidates(cands, k, lon, lat)
    assert fast.tie.any()
    for name in ("point_start", *S._ROW_FIELDS, "input_lon", "input_lat"):
        a, b = getattr(fast, name), getattr(ref, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    assert index.snap_checked(lon, lat).arc.tolist() == ref.arc.tolist()
