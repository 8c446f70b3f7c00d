"""The one Douglas-Peucker (gpuroute.geo.simplify) against a plain recursive oracle
(tests/naive.py: naive_douglas_peucker) on random polylines and anchored rings; the engine's route
geometry and isochrone rings use it."""
import numpy as np
import pytest
from naive import naive_douglas_peucker

from gpuroute.geo.segments import local_xy
from gpuroute.geo.simplify import douglas_peucker_keep, dp_rings, simplify_lonlat


def _polylines(seed, count=60):
    rng = np.random.default_rng(seed)
    for q in range(count):
        k = int(rng.integers(0, 40))
        if q % 3 == 0:  # grid points: exact ties, repeated points, zero-length spans
            x = rng.integers(0, 6, k).astype(np.float64)
            y = rng.integers(0, 6, k).astype(np.float64)
        else:  # a random walk, metres
            x = np.cumsum(rng.normal(0, 30, k))
            y = np.cumsum(rng.normal(0, 30, k))
        yield x, y, float(rng.choice([0.0, 1.0, 5.0, 20.0, 80.0]))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_polyline_equals_recursive_oracle(seed):
    for x, y, tol in _polylines(seed):
        got = douglas_peucker_keep(x, y, tol)
        np.testing.assert_array_equal(got, naive_douglas_peucker(x, y, tol), err_msg=f"k={x.size} tol={tol}")


def _ring_oracle(x, y, off, kept_ring, anchor, tol):
    keep = np.zeros(x.size, dtype=bool)
    for r in np.flatnonzero(kept_ring):
        a, b = int(off[r]), int(off[r + 1])
        cuts = [a + i for i in range(b - a) if anchor[a + i]] + [b]
        for c0, c1 in zip(cuts[:-1], cuts[1:], strict=True):
            if c1 == b:  # the last piece ends at the ring start (the implicit closing vertex)
                m = naive_douglas_peucker(x[c0:c1], y[c0:c1], tol, closing=(x[a], y[a]))
            else:
                m = naive_douglas_peucker(x[c0:c1 + 1], y[c0:c1 + 1], tol)[:-1]
            keep[c0:c1] |= m
    return keep


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rings_equal_recursive_oracle(seed):
    rng = np.random.default_rng(100 + seed)
    for q in range(25):
        sizes = rng.integers(1, 30, int(rng.integers(1, 6)))
        off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        nv = int(off[-1])
        ang = np.concatenate([np.sort(rng.uniform(0, 2 * np.pi, s)) for s in sizes])
        rad = rng.uniform(50, 200, nv)
        x, y = rad * np.cos(ang), rad * np.sin(ang)
        if q % 4 == 0:
            x, y = np.round(x / 40), np.round(y / 40)
        anchor = rng.random(nv) < 0.15
        anchor[off[:-1]] = True
        kept_ring = rng.random(sizes.size) < 0.8
        tol = float(rng.choice([0.5, 3.0, 15.0, 60.0]))
        keep = np.zeros(nv, dtype=bool)
        dp_rings(x, y, off, kept_ring, anchor, tol, keep)
        np.testing.assert_array_equal(keep, _ring_oracle(x, y, off, kept_ring, anchor, tol), err_msg=f"q={q}")


def test_lonlat_in_local_metres():
    rng = np.random.default_rng(7)
    for _ in range(20):
        k = int(rng.integers(3, 50))
        lonlat = np.column_stack([7.42 + np.cumsum(rng.normal(0, 2e-4, k)), 43.73 + np.cumsum(rng.normal(0, 2e-4, k))])
        tol = float(rng.choice([1.0, 10.0, 40.0]))
        x, y = local_xy(lonlat[:, 0], lonlat[:, 1], lonlat[0, 0], lonlat[0, 1])
        want = lonlat[naive_douglas_peucker(x, y, tol)]
        np.testing.assert_array_equal(simplify_lonlat(lonlat, tol), want)


def test_lonlat_edge_cases_and_errors():
    two = np.array([[7.0, 43.0], [7.001, 43.0]])
    np.testing.assert_array_equal(simplify_lonlat(two, 5.0), two)
    same = np.array([[7.0, 43.0]] * 4)  # all points equal: first and last kept
    assert simplify_lonlat(same, 1.0).shape == (2, 2)
    with pytest.raises(ValueError, match="tolerance"):
        simplify_lonlat(two, -1.0)
    with pytest.raises(ValueError, match="tolerance"):
        simplify_lonlat(two, float("nan"))


def _first_module(*names):
    import importlib

    for name in names:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError:
            continue
    pytest.fail(f"none of {names} exists")


def test_engine_uses_the_one_implementation():
    # where the engine keeps route geometry and isochrone rings (the modules have been moving: issue 19)
    fmt = _first_module("gpuroute.engine.format.osrm", "gpuroute.engine.osrm")
    rings = _first_module("gpuroute.engine.services.isochrone.polygons", "gpuroute.engine.isochrone")
    assert fmt.simplify is simplify_lonlat
    assert fmt.douglas_peucker_keep is douglas_peucker_keep
    assert rings._dp is dp_rings
