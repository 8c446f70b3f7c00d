"""The one haversine: :func:`gpuroute.geo.haversine_m` (NumPy) and its numba twin
:func:`gpuroute.geo.kernels.gc_metres` against an independent great-circle formula (Vincenty's, on the
sphere), and every former copy is the twin."""
import numpy as np
import pytest

from gpuroute.geo import EARTH_RADIUS_M, haversine_m
from gpuroute.geo.kernels import gc_metres, gc_metres_pairs


def _vincenty_sphere(lon1, lat1, lon2, lat2):
    """Central angle by the atan2 form (well conditioned everywhere, unlike the law of cosines), metres."""
    p1, p2, dl = np.radians(lat1), np.radians(lat2), np.radians(np.subtract(lon2, lon1))
    num = np.hypot(np.cos(p2) * np.sin(dl), np.cos(p1) * np.sin(p2) - np.sin(p1) * np.cos(p2) * np.cos(dl))
    den = np.sin(p1) * np.sin(p2) + np.cos(p1) * np.cos(p2) * np.cos(dl)
    return EARTH_RADIUS_M * np.arctan2(num, den)


def _points(seed, n=20000):
    rng = np.random.default_rng(seed)
    lon1, lat1 = rng.uniform(-180, 180, n), rng.uniform(-90, 90, n)
    near = rng.random(n) < 0.5  # half within ~1 km, half anywhere (antipodes included below)
    lon2 = np.where(near, lon1 + rng.normal(0, 0.01, n), rng.uniform(-180, 180, n))
    lat2 = np.where(near, np.clip(lat1 + rng.normal(0, 0.01, n), -90, 90), rng.uniform(-90, 90, n))
    lon2[:10], lat2[:10] = lon1[:10], lat1[:10]  # the same point
    lon2[10:20], lat2[10:20] = lon1[10:20] + 180.0, -lat1[10:20]  # antipodes (a clamped to 1)
    return lon1, lat1, lon2, lat2


@pytest.mark.parametrize("seed", [0, 1])
def test_numpy_and_numba_equal_an_independent_formula(seed):
    lon1, lat1, lon2, lat2 = _points(seed)
    want = _vincenty_sphere(lon1, lat1, lon2, lat2)
    got = haversine_m(lon1, lat1, lon2, lat2)
    np.testing.assert_allclose(got[20:], want[20:], rtol=1e-9, atol=1e-3)
    np.testing.assert_allclose(got[:10], 0.0)
    # at the antipode haversine loses digits (asin near 1): well under a metre of half the circumference
    np.testing.assert_allclose(got[10:20], np.pi * EARTH_RADIUS_M, rtol=0, atol=1.0)
    twin = gc_metres_pairs(lon1, lat1, lon2, lat2)
    np.testing.assert_allclose(twin, got, rtol=1e-14, atol=1e-9)  # the twins differ by rounding only
    assert np.all(twin[:10] == 0.0)
    assert gc_metres(float(lon1[-1]), float(lat1[-1]), float(lon2[-1]), float(lat2[-1])) == twin[-1]


def test_broadcasting_and_scalars():
    assert haversine_m(0.0, 0.0, 0.0, 1.0) == pytest.approx(EARTH_RADIUS_M * np.pi / 180, rel=1e-12)
    out = haversine_m(np.zeros((3, 1)), 0.0, np.zeros((1, 4)), np.arange(4.0))
    assert out.shape == (3, 4)
    np.testing.assert_allclose(out[0], EARTH_RADIUS_M * np.radians(np.arange(4.0)), rtol=1e-12)


def test_every_copy_is_the_twin():
    from gpuroute.geo import segments

    assert segments._haversine1 is gc_metres
    assert segments._haversine_pairs is gc_metres_pairs


def test_no_other_haversine_in_the_source():
    """The inverse haversine (``asin`` / ``arcsin``) is written only in the NumPy function and its twin."""
    from pathlib import Path

    import gpuroute

    root = Path(gpuroute.__file__).parent
    hits = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.suffix in (".py", ".cu", ".cuh")
                  and any(w in p.read_text(encoding="utf-8") for w in ("asin(", "arcsin(", "asinf(")))
    assert hits == ["geo/__init__.py", "geo/kernels.py"], hits
