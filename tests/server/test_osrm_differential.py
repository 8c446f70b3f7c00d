"""Differential test against real OSRM (issue 12): ``osrm-extract`` with a Lua profile equal to gpuroute's
native ``car-basic`` profile (``tests/data/gpuroute_car.lua``), ``osrm-contract``, then ``osrm-routed --algorithm ch`` on
loopback, on Monaco (shipped) and Andorra (shared data); 1,000 random routes per extract and a 25 x 25
table are asked of both osrm-routed (HTTP) and :class:`gpuroute.engine.Engine` and must agree.

The binaries come from the ``osrm-bindings`` wheel, fetched by ``.ci/fetch_osrm.sh`` (``make osrm-bin``;
``$OSRM_BIN`` overrides): a failing fetch fails this test with the script's message, it never skips.

Coordinates: a random point inside a random segment of gpuroute's largest strongly connected component (at
20..80 % of a segment of 5 m or more), rounded to OSRM's 1e-6 degree precision and given to both. Such a
point lies on exactly one segment, so both engines snap to the same place (a coordinate exactly ON a node
is a tie between the segments meeting there: OSRM >= 5.26 considers every equidistant segment, gpuroute's
SegmentIndex one, which gives gpuroute longer routes for some node coordinates; see the report of
issue 12), and the partial-segment rule is exercised at both ends.

How the two still differ, and the tolerance that follows:

* **Segment lengths.** gpuroute measures each segment with the haversine formula on a sphere
  (R = 6,371,008.8 m) on 1e-7 degree coordinates; OSRM with its ``greatCircleDistance`` (mapbox
  cheap-ruler, a WGS84 ellipsoid approximation, per latitude bucket) on 1e-6 degree coordinates (its
  per-segment annotation distances match cheap-ruler at the segment's latitude to ~0.1 m). Around
  43 deg N the ellipsoid makes east-west lengths ~0.27 % longer and north-south ~0.08 % shorter; single
  segments differ by up to ~0.5 % (more on metre-long ones, from the coordinate precision). Reported
  distances differ by that much.
* **Durations.** Both store per segment ``max(1, round(10 * length / speed))`` deciseconds (OSRM with
  ``weight_name = 'duration'``), from their own lengths, so a segment's duration can differ by 0.1 s
  where the two lengths straddle a rounding boundary; partial segments at the phantoms are fractions of
  the segment's duration (OSRM rounds them to 0.1 s). Route durations therefore agree to
  ``REL_TOL * duration + ABS_TOL_S`` (0.5 % + 0.5 s); the measured spread is printed (at the time of
  writing: no pair outside it; |difference| q99 0.3 %, max 4.2 s; gpuroute's durations ~0.1 % shorter
  in the median, as its east-west lengths are).
* **Near-ties.** Where two paths cost almost the same, the length difference can make each engine pick
  another one (both within the tolerance); the share of pairs whose node sequences differ is printed.
* **Profile.** The Lua profile mirrors :meth:`gpuroute.io.osm.Profile.way_speeds` (its data block is
  generated from ``PROFILES["car-basic"]`` and checked here). Against OSRM's default ``car.lua`` gpuroute's
  ``car-basic`` profile differs by (OSRM's own car.lua, run unchanged, is the test beside this one,
  test_osrm_differential_profile.py): no turn penalties (car.lua: sigmoid up to 7.5 s, +2 s across oncoming traffic),
  no U-turn penalty (20 s), no traffic-signal/stop/give-way penalties, no barriers, no ferries/movable
  bridges, no surface/tracktype/smoothness speeds, no width/height/length/weight limits, no side-road
  (x0.8), lane-marking or priority penalties, no ``routability`` weight (car.lua penalises
  destination/private access instead of dropping it), a shorter access blacklist (car.lua also closes
  taxi, bus, destination, permit, residents, military, ... and service=private), no ``oneway:motorcar``
  / ``oneway:conditional`` and no hov/toll handling, and turn restrictions: load_osm reads them, but the
  Engine's node-based hierarchy does not apply them (``use_turn_restrictions = false`` here).
"""
from __future__ import annotations

import json
import math
import re
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import shared_data
from osrm_peer import OSRMRouted, osrm_bin_dir, run_tool

pytest.importorskip("osmium")

from gpuroute.engine import Engine  # noqa: E402
from gpuroute.geo.snap import largest_scc_mask  # noqa: E402
from gpuroute.io.osm import PROFILES  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LUA = ROOT / "tests" / "data" / "gpuroute_car.lua"
#: Each extract: a shipped file, or its path's parts in the shared real data (``conftest.shared_data``).
EXTRACTS = {"monaco": ROOT / "src" / "gpuroute" / "datasets" / "data" / "monaco.osm.pbf",
            "andorra": ("osm", "andorra.osm.pbf")}

N_PAIRS = 1000
TABLE_K = 25
#: Per-pair tolerance on durations (s) and distances (m): ``REL_TOL * value + ABS_TOL``.
REL_TOL = 5e-3
ABS_TOL_S = 0.5
ABS_TOL_M = 2.0
#: Share of pairs allowed outside the tolerance (snapping or path differences nobody can rule out).
MAX_BAD_FRACTION = 0.01

pytestmark = pytest.mark.slow


# ------------------------------------------------------------------------------------------ the Lua profile
def _lua_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    return json.dumps(v)


def lua_data_block(profile=PROFILES["car-basic"]):
    """The generated part of the Lua profile: the data of :class:`gpuroute.io.osm.Profile` as Lua tables."""
    from gpuroute.io.osm import _MPH

    ind = "    "
    out = [f'{ind}-- BEGIN generated from gpuroute.io.osm.PROFILES["{profile.name}"]', f"{ind}highway_speeds = {{"]
    out += [f"{ind}  [{json.dumps(k)}] = {_lua_value(v)}," for k, v in profile.highway_speeds.items()]
    out += [f"{ind}}},", f"{ind}access_tags = {{{', '.join(json.dumps(t) for t in profile.access_tags)}}},",
            f"{ind}access_blacklist = {{"]
    out += [f"{ind}  [{json.dumps(k)}] = true," for k in sorted(profile.access_blacklist)]
    for name in ("maxspeed_table", "maxspeed_table_default"):
        out += [f"{ind}}},", f"{ind}{name} = {{"]
        out += [f"{ind}  [{json.dumps(k)}] = {_lua_value(float(v))}," for k, v in sorted(getattr(profile, name).items())]
    out += [f"{ind}}},", f"{ind}speed_reduction = {_lua_value(float(profile.speed_reduction))},",
            f"{ind}implied_oneway = {{"]
    out += [f"{ind}  [{json.dumps(k)}] = true," for k in sorted(profile.implied_oneway)]
    out += [f"{ind}}},", f"{ind}forbidden = {{"]
    out += [f"{ind}  [{json.dumps(k)}] = {{{', '.join(f'[{json.dumps(v)}] = true' for v in sorted(vals))}}},"
            for k, vals in sorted(profile.forbidden.items())]
    out += [f"{ind}}},", f"{ind}obey_oneway = {_lua_value(bool(profile.obey_oneway))},",
            f"{ind}mph = {_lua_value(_MPH)},", f"{ind}-- END generated"]
    return "\n".join(out) + "\n"


_BLOCK_RE = re.compile(r"^ *-- BEGIN generated.*?^ *-- END generated\n", re.S | re.M)


def write_lua():
    text = LUA.read_text()
    LUA.write_text(_BLOCK_RE.sub(lambda _: lua_data_block(), text, count=1))


def test_lua_profile_matches_python_profile():
    """The Lua profile's speeds, access, maxspeed and oneway tables are gpuroute's car profile."""
    found = _BLOCK_RE.search(LUA.read_text())
    assert found, f"{LUA}: no generated block"
    assert found.group(0) == lua_data_block(), (
        f"{LUA} is out of date with gpuroute.io.osm.PROFILES['car-basic']; regenerate it: "
        ".venv/bin/python tests/server/test_osrm_differential.py --write-lua")


# ------------------------------------------------------------------------------------------ OSRM
@pytest.fixture(scope="session")
def osrm_bin():
    """The osrm-* binaries (tests/osrm_peer.py; a failing fetch fails the test)."""
    return osrm_bin_dir(required=True)


@pytest.fixture(scope="session", params=sorted(EXTRACTS))
def pair(request, osrm_bin, tmp_path_factory):
    """(name, gpuroute Engine, running osrm-routed) for one extract; osrm-routed stops at teardown."""
    name = request.param
    pbf = EXTRACTS[name]
    if isinstance(pbf, tuple):
        pbf = shared_data(*pbf)  # skips this extract's tests, with the reason, where the data is absent
    work = tmp_path_factory.mktemp(f"osrm_{name}")
    src = work / f"{name}.osm.pbf"
    shutil.copyfile(pbf, src)
    run_tool([osrm_bin / "osrm-extract", "-p", LUA, "-t", "2", src], work)
    base = work / f"{name}.osrm"
    run_tool([osrm_bin / "osrm-contract", "-t", "2", base], work)
    eng = Engine.open(pbf, profile="car-basic")
    server = OSRMRouted(osrm_bin, base)
    try:
        yield name, eng, server
    finally:
        server.close()


# ------------------------------------------------------------------------------------------ sampling
def random_points(eng, k, rng):
    """``k`` (lon, lat) points inside random segments (>= 5 m, 20..80 % along) of the largest SCC, rounded
    to 1e-6 degree."""
    g = eng.graph
    scc = largest_scc_mask(g)
    length = np.asarray(g.arc_attrs["length_m"])
    ok = np.flatnonzero(scc[g.tail] & scc[g.head] & (length >= 5.0))
    arcs = rng.choice(ok, k)
    f = rng.uniform(0.2, 0.8, k)[:, None]
    c = g.coords
    pts = np.round(c[g.tail[arcs]] * (1 - f) + c[g.head[arcs]] * f, 6)
    return [(float(x), float(y)) for x, y in pts]


def _fmt(c):
    return ";".join(f"{x:.6f},{y:.6f}" for x, y in c)


def _within(a, b, rel, abs_):
    return abs(a - b) <= rel * max(abs(a), abs(b)) + abs_


def _q(x):
    return np.round(np.quantile(np.asarray(x), [0.5, 0.9, 0.99, 1.0]), 5).tolist()


# ------------------------------------------------------------------------------------------ tests
def test_routes_agree_with_osrm(pair):
    name, eng, osrm = pair
    rng = np.random.default_rng(12)
    pts = random_points(eng, 2 * N_PAIRS, rng)
    rows, bad_dur, bad_len, same_path, t_ours, t_osrm = [], [], [], 0, 0.0, 0.0
    for i in range(N_PAIRS):
        c = pts[2 * i:2 * i + 2]
        t = time.perf_counter()
        ours = eng.route(c, overview="false", annotations=["nodes"])
        t_ours += time.perf_counter() - t
        t = time.perf_counter()
        ref = osrm.get(f"/route/v1/driving/{_fmt(c)}?overview=false&annotations=nodes")
        t_osrm += time.perf_counter() - t
        assert ref["code"] == "Ok", (name, c, ref)
        a, b = ours["routes"][0], ref["routes"][0]
        rows.append((a["duration"], b["duration"], a["distance"], b["distance"]))
        same = a["legs"][0]["annotation"]["nodes"] == b["legs"][0]["annotation"]["nodes"]
        same_path += same
        x = (c, a["duration"], b["duration"], a["distance"], b["distance"], "same path" if same else "other path")
        if not _within(a["duration"], b["duration"], REL_TOL, ABS_TOL_S):
            bad_dur.append(x)
        if not _within(a["distance"], b["distance"], REL_TOL, ABS_TOL_M):
            bad_len.append(x)
    r = np.array(rows)
    dd, dl = r[:, 0] - r[:, 1], r[:, 2] - r[:, 3]
    print(f"\n{name}: {N_PAIRS} routes (gpuroute {t_ours:.1f} s, osrm-routed over HTTP {t_osrm:.1f} s); "
          f"same node path {same_path / N_PAIRS:.1%}; duration outside tolerance {len(bad_dur)}, distance "
          f"outside tolerance {len(bad_len)}; |d duration| s q50/q90/q99/max {_q(np.abs(dd))}, relative "
          f"{_q(np.abs(dd) / np.maximum(r[:, 1], 1))}, median signed relative "
          f"{float(np.median(dd / np.maximum(r[:, 1], 1))):+.2e}; |d distance| relative "
          f"{_q(np.abs(dl) / np.maximum(r[:, 3], 1))}, median signed {float(np.median(dl / np.maximum(r[:, 3], 1))):+.2e}")
    for x in (bad_dur + bad_len)[:12]:
        print("  outside:", x)
    # durations (the routing weight) agree for (almost) every pair, whatever path each engine picked
    assert len(bad_dur) <= MAX_BAD_FRACTION * N_PAIRS, (name, len(bad_dur), bad_dur[:5])
    # distances may differ only where the engines took different paths of (nearly) the same duration
    assert all(x[-1] == "other path" for x in bad_len), (name, [x for x in bad_len if x[-1] == "same path"][:5])
    assert len(bad_len) <= 2 * MAX_BAD_FRACTION * N_PAIRS, (name, len(bad_len), bad_len[:5])
    assert same_path >= 0.97 * N_PAIRS, (name, same_path)
    # no bias beyond the length model
    assert abs(float(np.median(dd / np.maximum(r[:, 1], 1)))) < 2e-3, name


def test_table_agrees_with_osrm(pair):
    name, eng, osrm = pair
    rng = np.random.default_rng(1212)
    pts = random_points(eng, TABLE_K, rng)
    ours = eng.table(pts, annotations=("duration", "distance"))
    ref = osrm.get(f"/table/v1/driving/{_fmt(pts)}?annotations=duration,distance")
    assert ref["code"] == "Ok", ref
    bad, n = [], 0
    for what, rel_abs in (("durations", ABS_TOL_S), ("distances", ABS_TOL_M)):
        A, B = ours[what], ref[what]
        assert len(A) == len(B) == TABLE_K
        for i in range(TABLE_K):
            for j in range(TABLE_K):
                a, b = A[i][j], B[i][j]
                n += 1
                if (a is None) != (b is None) or (a is not None and not _within(a, b, REL_TOL, rel_abs)):
                    bad.append((what, i, j, a, b))
    D = np.array(ours["durations"], dtype=float) - np.array(ref["durations"], dtype=float)
    print(f"\n{name}: {TABLE_K}x{TABLE_K} table: cells outside tolerance {len(bad)} of {n}; "
          f"|d duration| s max {np.nanmax(np.abs(D)):.2f}")
    assert len(bad) <= math.floor(MAX_BAD_FRACTION * n), (name, bad[:10])
    # the table's cells are the routes' values (gpuroute against itself)
    for i, j in ((0, 1), (3, 7), (24, 0)):
        route = eng.route([pts[i], pts[j]], overview="false")["routes"][0]
        assert abs(route["duration"] - ours["durations"][i][j]) <= 0.1 + 1e-9


if __name__ == "__main__":
    if sys.argv[1:] == ["--write-lua"]:
        write_lua()
        print(f"wrote {LUA}")
    else:
        print(__doc__)
