"""Differential test of ``/match`` against osrm-routed (issue 22, deliverable 3): OSRM's ``car.lua`` on the
shipped Monaco extract (``osrm-extract``, ``osrm-partition``, ``osrm-customize``, ``osrm-routed --algorithm
mld --max-matching-size 1000``) and gpuroute on the same file with the same profile (run by the Lua runtime);
the same traces (made from real routes with Gaussian GPS noise, sigma 5, 10, 20 m, 1 to 10 s sampling,
seeded: tests/match_traces.py) asked of both with ``tidy=true`` and each point's sigma as its radius.

gpuroute's matched route length must be at least as close to the true route's as OSRM's (aggregate: as many
traces within 2 %, and a mean relative error no larger), and the answers must have OSRM's shape (the same
codes, as many tracepoints, null where OSRM's are mostly, the keys OSRM writes).

The binaries and profiles come from the ``osrm-bindings`` wheel (tests/osrm_peer.py): a failing fetch fails
this test, it never skips."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from match_traces import make_trace, matched_length
from osrm_peer import OSRMRouted, build_mld, osrm_bin_dir, osrm_profiles_dir

pytest.importorskip("osmium")
pytest.importorskip("lupa", reason="lupa (pip install 'gpuroute[lua]') runs OSRM's car.lua")

from gpuroute.engine import Engine  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MONACO = ROOT / "src" / "gpuroute" / "datasets" / "data" / "monaco.osm.pbf"
SIGMAS = (5.0, 10.0, 20.0)
STEPS = (1.0, 2.0, 5.0, 10.0)
PER_CASE = 2

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def peers(tmp_path_factory, monaco_car_dir):
    """(gpuroute Engine, osrm-routed MLD) on Monaco with OSRM's car.lua."""
    bindir = osrm_bin_dir(required=True)
    lua = osrm_profiles_dir(bindir) / "car.lua"
    base = build_mld(bindir, MONACO, lua, tmp_path_factory.mktemp("osrm_match"))
    eng = Engine.open(monaco_car_dir)  # the session's Monaco with the same car.lua (tests/conftest.py)
    eng.limits["max_locations_map_matching"] = 1000
    server = OSRMRouted(bindir, base, algorithm="mld", extra=["--max-matching-size", "1000"])
    try:
        yield eng, server
    finally:
        server.close()


def _url(coords, ts, sigma):
    return ("/match/v1/driving/" + ";".join(f"{x:.6f},{y:.6f}" for x, y in coords) + "?timestamps="
            + ";".join(map(str, ts)) + "&radiuses=" + ";".join(f"{sigma:g}" for _ in coords)
            + "&tidy=true&overview=false")


def test_match_at_least_as_close_as_osrm(peers):
    eng, osrm = peers
    rng = np.random.default_rng(2022)
    ours, theirs, null_agree, n_points = [], [], 0, 0
    for sigma in SIGMAS:
        for dt in STEPS:
            for _ in range(PER_CASE):
                coords, ts, truth = make_trace(eng, rng, sigma, dt)
                coords = [(round(x, 6), round(y, 6)) for x, y in coords]  # what OSRM reads
                o = osrm.get(_url(coords, ts, sigma))
                g = eng.match(coords, timestamps=ts, radiuses=[sigma] * len(coords), tidy=True, overview="false")
                assert o["code"] == g["code"] == "Ok", (o.get("message"), g.get("message"))
                assert len(g["tracepoints"]) == len(o["tracepoints"]) == len(coords)
                for key in set(o["matchings"][0]) - {"geometry"}:
                    assert key in g["matchings"][0], key
                tp_o = next(t for t in o["tracepoints"] if t is not None)
                tp_g = next(t for t in g["tracepoints"] if t is not None)
                assert set(tp_o) <= set(tp_g) | {"waypoint_index"} and "waypoint_index" in tp_g
                null_agree += sum((a is None) == (b is None) for a, b in zip(o["tracepoints"], g["tracepoints"],
                                                                              strict=True))
                n_points += len(coords)
                ours.append(abs(matched_length(g) / truth - 1.0))
                theirs.append(abs(matched_length(o) / truth - 1.0))
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    report = (f"within 2 %: gpuroute {(ours <= 0.02).mean():.3f}, osrm {(theirs <= 0.02).mean():.3f}; mean error "
              f"gpuroute {ours.mean():.4f}, osrm {theirs.mean():.4f}; null tracepoints agree on "
              f"{null_agree / n_points:.3f}")
    print(report)
    assert (ours <= 0.02).sum() >= (theirs <= 0.02).sum(), report
    assert ours.mean() <= theirs.mean() + 1e-9, report
    assert null_agree / n_points >= 0.8, report
