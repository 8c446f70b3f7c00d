"""Alternative routes against osrm-routed (issue 22): the shipped Monaco extract, both sides built with OSRM's own
``car.lua`` run unchanged -- gpuroute's dataset by ``build_dataset(PBF, profile=car.lua)`` (the session fixture
``monaco_car_dir``), OSRM's by ``osrm-extract -p car.lua``, ``osrm-partition``, ``osrm-customize`` and
``osrm-routed --algorithm mld --max-alternatives 3`` on loopback. The same seeded pairs (points inside random
segments, 20..80 % along, rounded to OSRM's 1e-6 degrees) are asked of both with ``alternatives=true`` and
``alternatives=3``.

Asserted (measured on 50 pairs, seed 22, at the time of writing: every main route within the tolerance, the
largest duration difference 0.4 %; with ``true`` gpuroute 38 alternatives vs OSRM's 17, mean stretch 1.058 vs
1.109; with ``3`` 80 alternatives on 38 pairs vs OSRM's 39 on 28, mean stretch 1.105 vs 1.131; BENCHMARKS.md has
the 200-pair run of benchmarks/alternatives_osrm.py):

* **the main route equals osrm-routed's**: duration within ``REL_TOL * duration + ABS_TOL_S`` and distance
  within ``REL_TOL * distance + ABS_TOL_M``, as tests/server/test_osrm_differential.py compares them (segment
  lengths and rounding differ a little), for all but ``MAX_BAD_FRACTION`` of the pairs;
* **every alternative of ours is valid** (tests/alternatives_oracle.py: re-costed on the turn-expanded graph of
  the same metric by scipy's Dijkstra -- its weight is its path's cost --, the main route optimal, stretch <=
  ``1 + config.SERVE_ALTERNATIVES_STRETCH``, sharing <= ``config.SERVE_ALTERNATIVES_SHARING``, the T-test, no two
  routes the same); ``true`` gives at most one;
* **in aggregate, at least as many as osrm-routed, stretch no worse**: for both values, gpuroute's alternatives
  and pairs with an alternative are at least OSRM's, and their mean stretch (weight over the main route's) is at
  most OSRM's (+ ``STRETCH_SLACK``).

The binaries and profiles come from the ``osrm-bindings`` wheel (``.ci/fetch_osrm.sh``, ``$OSRM_BIN``;
tests/osrm_peer.py): where they are not available the test is skipped with the reason.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("osmium")
pytest.importorskip("lupa", reason="lupa (pip install 'gpuroute[lua]') runs OSRM's car.lua")

from alternatives_oracle import STRETCH, TurnOracle, check_alternatives  # noqa: E402
from osrm_peer import OSRMRouted, build_mld, osrm_bin_dir, osrm_profiles_dir  # noqa: E402

from gpuroute.engine import Engine  # noqa: E402
from gpuroute.engine.algorithms import metric_snapshot  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MONACO = ROOT / "src" / "gpuroute" / "datasets" / "data" / "monaco.osm.pbf"
N_PAIRS = 50
SEED = 22
#: The alternatives values asked (OSRM's grammar: true is one).
VALUES = ("true", "3")
#: Main route tolerances (tests/server/test_osrm_differential.py's).
REL_TOL = 5e-3
ABS_TOL_S = 0.5
ABS_TOL_M = 2.0
MAX_BAD_FRACTION = 0.02
#: Slack of the mean-stretch comparison (a sample of 50 pairs).
STRETCH_SLACK = 0.01


@pytest.fixture(scope="module")
def peers(monaco_car_dir, tmp_path_factory):
    """(gpuroute Engine on Monaco built with car.lua, osrm-routed MLD on the same extract and profile)."""
    bindir = osrm_bin_dir(required=False)
    lua = osrm_profiles_dir(bindir) / "car.lua"
    base = build_mld(bindir, MONACO, lua, tmp_path_factory.mktemp("osrm_alternatives"))
    server = OSRMRouted(bindir, base, algorithm="mld", extra=("--max-alternatives", 3))
    try:
        yield Engine.open(monaco_car_dir), server
    finally:
        server.close()


def _pairs(e, k, seed):
    s = e.segments
    rng = np.random.default_rng(seed)
    ok = np.flatnonzero(s.length_m >= 5.0)
    pick = rng.choice(ok, 2 * k)
    f = rng.uniform(0.2, 0.8, 2 * k)
    lon = np.round(s.lon_u[pick] + f * (s.lon_v[pick] - s.lon_u[pick]), 6)
    lat = np.round(s.lat_u[pick] + f * (s.lat_v[pick] - s.lat_u[pick]), 6)
    pts = list(zip(lon.tolist(), lat.tolist(), strict=True))
    return [pts[2 * i:2 * i + 2] for i in range(k)]


def _stretch(routes):
    w0 = routes[0]["weight"]
    return [r["weight"] / w0 for r in routes[1:]] if w0 > 0 else []


def test_alternatives_against_osrm_routed(peers):
    e, osrm = peers
    oracle = TurnOracle(e, metric_snapshot(e))
    stats = {v: {"ours": [], "osrm": [], "ours_stretch": [], "osrm_stretch": []} for v in VALUES}
    bad_main, compared = [], 0
    for c in _pairs(e, N_PAIRS, SEED):
        q = ";".join(f"{x:.6f},{y:.6f}" for x, y in c)
        for v in VALUES:
            ref = osrm.get(f"/route/v1/driving/{q}?overview=false&alternatives={v}")
            ours = e.route(c, alternatives=1 if v == "true" else int(v), overview="false", annotations=["nodes"])
            assert ref["code"] == "Ok" and ours["code"] == "Ok"  # pairs inside the main component: routable
            g, o = ours["routes"], ref["routes"]
            if v == "3":  # the main route: once per pair
                compared += 1
                a, b = g[0], o[0]
                if not (abs(a["duration"] - b["duration"]) <= REL_TOL * b["duration"] + ABS_TOL_S
                        and abs(a["distance"] - b["distance"]) <= REL_TOL * b["distance"] + ABS_TOL_M):
                    bad_main.append((c, a["duration"], b["duration"], a["distance"], b["distance"]))
                check_alternatives(e, c, ours, oracle)  # every alternative valid (raises otherwise)
            else:
                assert len(g) <= 2 and len(o) <= 2  # true: one alternative at most, on both sides
            s = stats[v]
            s["ours"].append(len(g) - 1)
            s["osrm"].append(len(o) - 1)
            s["ours_stretch"] += _stretch(g)
            s["osrm_stretch"] += _stretch(o)
    summary = {v: {"ours": (sum(s["ours"]), sum(x > 0 for x in s["ours"])),
                   "osrm": (sum(s["osrm"]), sum(x > 0 for x in s["osrm"])),
                   "stretch": (float(np.mean(s["ours_stretch"])) if s["ours_stretch"] else None,
                               float(np.mean(s["osrm_stretch"])) if s["osrm_stretch"] else None)}
               for v, s in stats.items()}
    print(f"main routes outside the tolerance: {len(bad_main)} of {compared}; (alternatives, pairs with any) and "
          f"mean stretch, gpuroute vs osrm-routed: {summary}")
    assert len(bad_main) <= MAX_BAD_FRACTION * compared, bad_main[:5]
    for v, s in stats.items():
        assert max(s["ours_stretch"], default=1.0) <= 1 + STRETCH + 1e-9
        ours, theirs = summary[v]["ours"], summary[v]["osrm"]
        assert ours[0] >= theirs[0] and ours[1] >= theirs[1], (v, summary[v])
        assert ours[0] > 0  # the pairs exercise alternatives
        mine, ref = summary[v]["stretch"]
        if ref is not None:
            assert mine <= ref + STRETCH_SLACK, (v, summary[v])
