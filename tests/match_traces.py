"""GPS traces made from real routes, for the map-matching tests (tests/engine/test_match.py and the
differential test against osrm-routed): a route between two random points inside segments of the engine's
snapping component, sampled every ``dt`` seconds along its full geometry (time interpolated from the route's
per-segment durations), each sample moved by Gaussian noise of ``sigma`` metres east and north; integer
timestamps, strictly increasing. The truth is the route's length."""
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
        lon = np.interp(ts, cum, pts[:, 0])
        lat = np.interp(ts, cum, pts[:, 1])
        lon = lon + rng.normal(0.0, sigma, lon.size) / (_M_PER_DEG * np.cos(np.radians(lat)))
        lat = lat + rng.normal(0.0, sigma, lat.size) / _M_PER_DEG
        tsi = np.round(ts).astype(np.int64)
        for q in range(1, tsi.size):
            tsi[q] = max(tsi[q], tsi[q - 1] + 1)
        return [(float(x), float(y)) for x, y in zip(lon, lat, strict=True)], tsi.tolist(), float(r["distance"])


def matched_length(answer):
    """Total distance (m) of an OSRM match answer's matchings (0 for an error answer)."""
    return float(sum(m["distance"] for m in answer.get("matchings", [])))
