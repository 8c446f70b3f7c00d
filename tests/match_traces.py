"""GPS traces made from real routes, for the map-matching tests (tests/engine/test_match.py and the
differential test against osrm-routed) and benchmarks (benchmarks/match.py, benchmarks/match_quality.py): a
route between two random points inside segments of the engine's snapping component, sampled every ``dt``
seconds along its full geometry (time interpolated from the route's per-segment durations), each sample moved
by Gaussian noise of ``sigma`` metres east and north; integer timestamps, strictly increasing. The truth is the
route's length (and, from :func:`make_trace_truth`, its geometry and the samples' true positions on it)."""
from __future__ import annotations

import numpy as np

#: Metres per degree of latitude (the noise's scale; the noise is what it is, its exact size does not matter).
_M_PER_DEG = 111320.0


def make_trace(engine, rng, sigma, dt, *, min_m=2000.0, max_m=4000.0, max_points=400):
    """One trace: ``(coords [(lon, lat)], timestamps [int], true_length_m)``.

    Parameters
    ----------
    engine : gpuroute.engine.Engine
    rng : numpy.random.Generator
    sigma : float
        Noise standard deviation (m), per axis.
    dt : float
        Sampling step (s).
    min_m, max_m : float
        The route's length range (m).
    max_points : int
    """
    t = make_trace_truth(engine, rng, sigma, dt, min_m=min_m, max_m=max_m, max_points=max_points)
    return t["coords"], t["timestamps"], t["length"]


def make_trace_truth(engine, rng, sigma, dt, *, min_m=2000.0, max_m=4000.0, max_points=400):
    """:func:`make_trace` with its truth (the same draws from ``rng``: the same trace): a dict of ``coords``,
    ``timestamps``, ``length`` (m, the route's ``distance``), ``route`` float64 (K, 2) the route's full
    geometry (lon, lat), ``along`` float64 (K,) each geometry point's distance from the start along it (m,
    scaled so the last is ``length``), ``true`` float64 (n, 2) the samples before the noise and ``true_along``
    float64 (n,) their distances along the route (m)."""
    seg = engine.segments
    while True:
        i, j = rng.integers(0, seg.n_segments, 2)
        fa, fb = rng.uniform(0.2, 0.8, 2)
        a = (seg.lon_u[i] + fa * (seg.lon_v[i] - seg.lon_u[i]), seg.lat_u[i] + fa * (seg.lat_v[i] - seg.lat_u[i]))
        b = (seg.lon_u[j] + fb * (seg.lon_v[j] - seg.lon_u[j]), seg.lat_u[j] + fb * (seg.lat_v[j] - seg.lat_u[j]))
        try:
            r = engine.route([a, b], overview="full", geometries="geojson", annotations=["duration"])["routes"][0]
        except Exception:  # noqa: BLE001 - no route between them: draw again
            continue
        T = r["duration"]
        if not (min_m <= r["distance"] <= max_m and 4 * dt <= T <= dt * (max_points - 2)):
            continue
        pts = np.asarray(r["geometry"]["coordinates"], dtype=np.float64)
        cum = np.concatenate([[0.0], np.cumsum(r["legs"][0]["annotation"]["duration"])])
        ts = np.append(np.arange(0.0, cum[-1], dt), cum[-1])
        lon0 = np.interp(ts, cum, pts[:, 0])
        lat0 = np.interp(ts, cum, pts[:, 1])
        lon = lon0 + rng.normal(0.0, sigma, lon0.size) / (_M_PER_DEG * np.cos(np.radians(lat0)))
        lat = lat0 + rng.normal(0.0, sigma, lat0.size) / _M_PER_DEG
        tsi = np.round(ts).astype(np.int64)
        for q in range(1, tsi.size):
            tsi[q] = max(tsi[q], tsi[q - 1] + 1)
        along = np.concatenate([[0.0], np.cumsum(_step_m(pts))])
        if along[-1] > 0:
            along *= float(r["distance"]) / along[-1]
        return {
            "coords": [(float(x), float(y)) for x, y in zip(lon, lat, strict=True)],
            "timestamps": tsi.tolist(),
            "length": float(r["distance"]),
            "route": pts,
            "along": along,
            "true": np.column_stack([lon0, lat0]),
            "true_along": np.interp(ts, cum, along),
        }


def _step_m(pts):
    """Great-circle lengths (m) of a polyline's steps (haversine, the engine's Earth radius)."""
    from gpuroute.geo import haversine_m

    return haversine_m(pts[:-1, 0], pts[:-1, 1], pts[1:, 0], pts[1:, 1])


def matched_length(answer):
    """Total distance (m) of an OSRM match answer's matchings (0 for an error answer)."""
    return float(sum(m["distance"] for m in answer.get("matchings", [])))


def local_xy(lonlat, lat0):
    """Local metres (east, north) of (k, 2) lon/lat degrees around latitude ``lat0`` (the noise's frame)."""
    a = np.asarray(lonlat, dtype=np.float64).reshape(-1, 2)
    return np.column_stack([a[:, 0] * _M_PER_DEG * np.cos(np.radians(lat0)), a[:, 1] * _M_PER_DEG])


def project_on_route(truth, lonlat, lo=None, hi=None):
    """Nearest points of ``lonlat`` (k, 2) on the true route of ``truth`` (:func:`make_trace_truth`), among the
    route's steps whose along-route range meets ``[lo[i], hi[i]]`` where given (m; a route may pass a place twice):
    ``(along, off)`` float64 (k,), the distance along the route (m) and from it (m)."""
    lat0 = float(truth["route"][0, 1])
    r = local_xy(truth["route"], lat0)
    along = truth["along"]
    a, ab = r[:-1], r[1:] - r[:-1]
    l2 = np.maximum((ab * ab).sum(1), 1e-12)
    p = local_xy(lonlat, lat0)[:, None, :]
    t = np.clip(((p - a) * ab).sum(2) / l2, 0.0, 1.0)
    d = np.sqrt(((p - (a + t[..., None] * ab)) ** 2).sum(2))
    s = along[:-1] + t * (along[1:] - along[:-1])
    if lo is not None:
        away = (along[1:][None, :] < np.asarray(lo)[:, None]) | (along[:-1][None, :] > np.asarray(hi)[:, None])
        d = np.where(away, np.inf, d)
    k = np.argmin(d, axis=1)
    i = np.arange(k.size)
    return s[i, k], d[i, k]


def oracle_error(truth, sigma):
    """The relative length error of a perfect matcher: it drives the true route from the noisy first point's
    nearest point on it to the noisy last point's (each within 3 sigma + 30 m, along the route, of the true
    position): the error no matcher that starts and ends where the first and last points snap avoids."""
    ta = truth["true_along"]
    w = 3.0 * sigma + 30.0
    c = np.asarray(truth["coords"], dtype=np.float64)
    s, _ = project_on_route(truth, c[[0, -1]], lo=[ta[0] - w, ta[-1] - w], hi=[ta[0] + w, ta[-1] + w])
    return float(abs((s[1] - s[0]) / truth["length"] - 1.0))


def nth_trace(engine, seed, sigma, dt, n):
    """Trace ``n`` (from 0) of :func:`make_trace_truth`'s generator seeded with ``seed`` (2-4 km routes, up to
    1,000 points); benchmarks/match_quality.py's Monaco cell (sigma, dt) is ``seed = [22, 0, sigma, dt]``."""
    rng = np.random.default_rng(seed)
    for _ in range(n + 1):
        tr = make_trace_truth(engine, rng, sigma, dt, max_points=1000)
    return tr
