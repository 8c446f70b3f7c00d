"""Live traffic by speed on a dataset built with OSRM's car.lua (metric ``routability``), with
osrm-customize's ``--segment-speed-file`` semantics (``src/updater/updater.cpp``):

* duration (deciseconds) ``max(1, std::round(10 * length / (speed / 3.6)))`` (``convertToDuration``);
* weight ``max(1, std::round(length / rate * 10**weight_precision))`` (``convertToWeight``), ``rate`` the
  4th CSV column, or ``speed / 3.6`` without it; an empty 4th column (``"rate": null``) keeps the weight;
* turn durations and weights stay.

Oracles: those formulas written out here, the turn-aware Dijkstra of ``tests/turn_oracle.py`` on the
profile's arc weights with the updated ones substituted, and the route's arcs read back from its node
annotation with the graph's turn durations.
"""
from __future__ import annotations

import math
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("lupa", reason="lupa (pip install 'gpuroute[lua]') runs the Lua profiles")
pytest.importorskip("osmium", reason="osmium reads the OSM extract")

from phantoms import point  # noqa: E402
from turn_oracle import phantom_cost, route_arcs  # noqa: E402

from gpuroute.engine import Engine, EngineError  # noqa: E402
from gpuroute.engine.dataset import TRAFFIC  # noqa: E402
from gpuroute.engine.services import isochrone as iso  # noqa: E402
from gpuroute.graph.turn_costs import turn_arrays  # noqa: E402
from gpuroute.pipeline import build_dataset  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FETCH = ROOT / ".ci" / "fetch_osrm.sh"
MONACO = ROOT / "src" / "gpuroute" / "datasets" / "data" / "monaco.osm.pbf"
CELLS = (64, 1024)
FAST = 200.0  # km/h: faster than any Monaco road, so a route's arcs only get cheaper


def _round(x):
    """C++ ``std::round`` of x >= 0."""
    return math.floor(x + 0.5)


def osrm_duration(length_m, speed_kmh):
    return max(1, _round(length_m / (speed_kmh / 3.6) * 10.0))


def osrm_weight(length_m, rate, multiplier=10.0):
    return max(1, _round(length_m / rate * multiplier))


@pytest.fixture(scope="module")
def profiles():
    try:
        r = subprocess.run(["bash", str(FETCH)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"OSRM's profiles are not available: {FETCH.relative_to(ROOT)} did not run ({e})")
    if r.returncode != 0:
        pytest.skip(f"OSRM's profiles are not available: {r.stderr.strip()[-400:]}")
    d = (ROOT / r.stdout.strip().splitlines()[-1] / ".." / "share" / "profiles").resolve()
    if not (d / "car.lua").is_file():
        pytest.skip(f"OSRM's profiles are not available: no car.lua in {d}")
    return d


@pytest.fixture(scope="module")
def built(profiles, monaco_car_dir):
    return monaco_car_dir  # the session's Monaco with car.lua, cells CELLS (tests/conftest.py)


@pytest.fixture
def dataset(built, tmp_path):
    """A private copy (hard links: dataset files are only ever replaced), so saved traffic stays here."""
    d = tmp_path / "monaco-car"
    shutil.copytree(built, d, copy_function=os.link)
    return d


def _route(e, pts):
    return e.route(pts, overview="false", annotations=["nodes", "duration"])["routes"][0]


def _speed(e, arc, speed, **rate):
    ids = np.asarray(e.graph.node_ids)
    return {"from": int(ids[e.graph.tail[arc]]), "to": int(ids[e.graph.head[arc]]), "speed_kmh": speed, **rate}


def _a_route(e, seed=3, min_inner=4):
    """Two points and the arcs of the route between them, with at least ``min_inner`` whole arcs."""
    seg = e.segments
    rng = np.random.default_rng(seed)
    for _ in range(200):
        i, j = rng.choice(seg.n_segments, 2)
        pts = [(float((seg.lon_u[k] + seg.lon_v[k]) / 2), float((seg.lat_u[k] + seg.lat_v[k]) / 2)) for k in (i, j)]
        try:
            r = _route(e, pts)
        except EngineError:
            continue
        arcs = route_arcs(e, r)
        if len(arcs) >= min_inner + 2:
            return pts, r, arcs
    raise AssertionError("no route with enough arcs")


def _turn_durations_ds(g, arcs):
    tc = g.turn_costs
    first = turn_arrays(g.first_out, g.head)[0]
    return sum(int(tc.duration[first[a] + b - g.first_out[g.head[a]]]) for a, b in zip(arcs[:-1], arcs[1:], strict=True))


def _expected_duration(e, pts, arcs, dur_ds):
    """Fraction-weighted arc durations (s) at the ends, whole ones between, plus the turns' durations."""
    sp = [point(e.segments.snap(*p)) for p in pts]
    fa = dict(sp[0].arcs)[arcs[0]]
    fb = dict(sp[1].arcs)[arcs[-1]]
    d = (1.0 - fa) * dur_ds[arcs[0]] + dur_ds[arcs[1:-1]].sum() + fb * dur_ds[arcs[-1]]
    return 0.1 * (d + _turn_durations_ds(e.graph, arcs))


def _oracle_weight(e, pts, w, closed=()):
    """Least routability (OSRM units) between the points over arc weights ``w`` (int) + turn weights, the
    ``closed`` arcs removed."""
    g = e.graph
    tc = g.turn_costs
    _, t_in, t_out = turn_arrays(g.first_out, g.head)
    ok = (tc.weight >= 0) & ~np.isin(t_out, list(closed)) & ~np.isin(t_in, list(closed))
    w = np.asarray(w, dtype=np.float64)
    tg = (t_in[ok], t_out[ok], tc.weight[ok].astype(np.float64) + w[t_out[ok]], w)

    class _Arcs:
        graph = g

    sp = [point(e.segments.snap(*p)) for p in pts]
    return phantom_cost(_Arcs(), sp[0], sp[1], tg) * 0.1


def test_speed_update_sets_osrm_duration_and_weight(dataset):
    """Speed updates (no rate) on a route's inner arcs: duration and weight from OSRM's formulas; the
    route, table and isochrone follow; turn durations stay."""
    e = Engine.open(dataset)
    g = e.graph
    assert e.overlay.metric.name == "routability"
    pts, before, arcs = _a_route(e)
    length = np.asarray(g.arc_attrs["length_m"], dtype=np.float64)
    inner = arcs[1:-1]
    res = e.customize([_speed(e, a, FAST) for a in inner])
    assert res["metric"] == "routability" and res["arcs"] == len(set(inner))
    dur = g.weight("travel_time").astype(np.int64)
    w = g.weight("weight").astype(np.int64)
    for a in inner:
        dur[a] = osrm_duration(length[a], FAST)
        w[a] = osrm_weight(length[a], FAST / 3.6)  # no rate: OSRM's rate = speed in m/s
    np.testing.assert_array_equal(np.asarray(e.overlay.arc_cost)[inner], w[inner])
    after = _route(e, pts)
    assert route_arcs(e, after) == arcs  # cheaper arcs: the same route
    assert after["weight"] == pytest.approx(_oracle_weight(e, pts, w), abs=0.051)
    assert after["weight"] < before["weight"]
    want = _expected_duration(e, pts, arcs, dur)
    assert after["duration"] == pytest.approx(want, abs=0.05 * (len(arcs) + 2))
    assert after["duration"] < before["duration"] - 0.1 * len(inner) / 2
    seg = after["legs"][0]["annotation"]["duration"]
    assert seg[1:-1] == pytest.approx((dur[inner] * 0.1).tolist(), abs=0.051)
    # the table cell is the route's duration
    t = e.table(pts, sources=[0], destinations=[1], annotations=("duration",))
    assert t["durations"][0][0] == pytest.approx(after["duration"], abs=0.15)
    # the isochrone searches the live travel times (deciseconds, turn durations added)
    met = iso.metric_of(e, "duration")
    np.testing.assert_array_equal(np.asarray(met.w, dtype=np.int64), dur)


def test_rate_sets_the_weight_apart_from_the_duration(dataset):
    """4th column: a rate sets weight = length / rate * 10; an empty one (``null``) keeps the weight;
    the duration follows the speed either way. A later ``{"arc", "cost"}`` update keeps the durations."""
    e = Engine.open(dataset)
    g = e.graph
    pts, before, arcs = _a_route(e, seed=5)
    length = np.asarray(g.arc_attrs["length_m"], dtype=np.float64)
    a, b = arcs[1], arcs[2]
    w0 = np.asarray(e.overlay.arc_cost).copy()
    e.customize([_speed(e, a, 30.0, rate=50.0), _speed(e, b, 15.0, rate=None)])
    st = e.overlay._need_state()
    assert int(st.arc_cost[a]) == osrm_weight(length[a], 50.0)
    assert int(st.arc_cost[b]) == int(w0[b])
    assert int(st.arc_duration[a]) == osrm_duration(length[a], 30.0)
    assert int(st.arc_duration[b]) == osrm_duration(length[b], 15.0)
    other = int(np.flatnonzero(np.asarray(st.arc_cost) > 5)[-1])
    e.customize([{"arc": other, "cost": int(st.arc_cost[other]) + 7}])
    st2 = e.overlay._need_state()
    np.testing.assert_array_equal(st2.arc_duration, st.arc_duration)
    # a whole metric drops the traffic, durations included
    e.customize(metric="routability")
    assert e.overlay._need_state().arc_duration is None


def test_speed_or_rate_zero_closes_the_arc(dataset):
    """osrm-customize's speed 0 (and a rate of 0: an invalid weight) closes the segment: the route leaves
    the closed arcs, at the least routability of the graph without them (oracle); a rate of 0 still sets
    the duration from the speed, a speed of 0 leaves it; a positive speed reopens."""
    from gpuroute.crp import CLOSED

    e = Engine.open(dataset)
    g = e.graph
    w = g.weight("weight")
    for seed in range(7, 40):  # a route with a detour around its 2nd and 3rd arcs
        pts, before, arcs = _a_route(e, seed=seed)
        a, b = arcs[1], arcs[2]
        if math.isfinite(_oracle_weight(e, pts, w, closed=(a, b))):
            break
    length = np.asarray(g.arc_attrs["length_m"], dtype=np.float64)
    e.customize([_speed(e, a, 0), _speed(e, b, 30.0, rate=0)])
    st = e.overlay._need_state()
    assert int(st.arc_cost[a]) == CLOSED and int(st.arc_cost[b]) == CLOSED
    assert int(st.arc_duration[b]) == osrm_duration(length[b], 30.0)
    assert int(st.arc_duration[a]) == int(g.weight("travel_time")[a])
    after = _route(e, pts)
    assert not {a, b} & set(route_arcs(e, after))
    assert after["weight"] == pytest.approx(_oracle_weight(e, pts, w, closed=(a, b)), abs=0.051)
    assert after["weight"] > before["weight"]
    e.customize([_speed(e, a, 30.0), _speed(e, b, 30.0)])
    assert (np.asarray(e.overlay.arc_cost)[[a, b]] < CLOSED).all() and e.overlay.metric.closed is None


@pytest.mark.parametrize("entry, field", [
    ({"speed_kmh": -1e-9}, "speed_kmh"), ({"speed_kmh": -5}, "speed_kmh"), ({"speed_kmh": float("inf")}, "speed_kmh"),
    ({"speed_kmh": "fast"}, "speed_kmh"), ({"speed_kmh": 1e-300}, "speed_kmh"),
    ({"speed_kmh": 30, "rate": -1e-9}, "rate"), ({"speed_kmh": 30, "rate": -1.5}, "rate"),
    ({"speed_kmh": 30, "rate": "x"}, "rate"), ({"speed_kmh": 30, "rate": 1e-300}, "rate"),
    ({"speed_kmh": 30, "ratio": 2}, "ratio"),
])
def test_bad_speeds_are_refused_naming_the_entry(dataset, entry, field):
    e = Engine.open(dataset)
    st = e.overlay._need_state()
    arc = int(np.flatnonzero(np.asarray(e.graph.arc_attrs["length_m"]) > 20)[0])
    ok = _speed(e, arc, 40.0)
    bad = {k: v for k, v in _speed(e, arc + 1, 1).items() if k != "speed_kmh"} | entry
    with pytest.raises(EngineError) as ei:
        e.customize([ok, bad])
    assert ei.value.code == "InvalidValue" and "updates[1]" in ei.value.message and field in ei.value.message
    assert e.overlay._need_state() is st  # nothing applied
    assert not (dataset / TRAFFIC).exists()


def test_speeds_on_other_metrics(dataset):
    """On the ``duration`` metric a speed sets the cost (a rate is refused: the weight is the duration);
    on ``distance`` speeds are refused."""
    e = Engine.open(dataset)
    length = np.asarray(e.graph.arc_attrs["length_m"], dtype=np.float64)
    arc = int(np.flatnonzero(length > 20)[0])
    e.customize(metric="duration")
    e.customize([_speed(e, arc, 25.0)])
    assert int(e.overlay.arc_cost[arc]) == osrm_duration(length[arc], 25.0)
    with pytest.raises(EngineError, match=r"updates\[0\].*rate"):
        e.customize([_speed(e, arc, 25.0, rate=5.0)])
    e.customize(metric="distance")
    with pytest.raises(EngineError, match=r"updates\[0\].*time metric"):
        e.customize([_speed(e, arc, 25.0)])


def test_restart_restores_the_durations(dataset):
    e = Engine.open(dataset)
    pts, _, arcs = _a_route(e)
    e.customize([_speed(e, a, FAST) for a in arcs[1:-1]] + [_speed(e, arcs[1], 50.0, rate=None)])
    want = _route(e, pts)
    dur = e.overlay._need_state().arc_duration.copy()
    r = Engine.open(dataset)
    assert r.info["traffic"]["restored"] is True
    np.testing.assert_array_equal(r.overlay._need_state().arc_duration, dur)
    np.testing.assert_array_equal(r.overlay.arc_cost, e.overlay.arc_cost)
    got = _route(r, pts)
    assert (got["duration"], got["weight"]) == (want["duration"], want["weight"])


# ------------------------------------------------------------------------- against osrm-customize
def _osm(path, nodes, ways):
    items = [f'<node id="{i}" version="1" lat="{lat:.7f}" lon="{lon:.7f}"/>' for i, (lon, lat) in nodes.items()]
    for wid, refs, tags in ways:
        items.append(f'<way id="{wid}" version="1">' + "".join(f'<nd ref="{r}"/>' for r in refs)
                     + "".join(f'<tag k="{k}" v="{v}"/>' for k, v in tags.items()) + "</way>")
    path.write_text('<?xml version="1.0" encoding="UTF-8"?>\n<osm version="0.6" generator="test">\n'
                    + "\n".join(items) + "\n</osm>\n")


@pytest.mark.slow
def test_agrees_with_osrm_customize_segment_speed_file(tmp_path):
    """The same speed file (speed only, speed and rate, an empty rate) through ``osrm-customize
    --segment-speed-file`` (MLD) and ``/customize``: route weight, duration and per-segment durations
    agree."""
    from osrm_peer import OSRMRouted, osrm_bin_dir, osrm_profiles_dir, run_tool

    osrm_bin = osrm_bin_dir(required=False)
    lua = osrm_profiles_dir(osrm_bin) / "car.lua"
    nodes = {i: (7.400 + 0.002 * (i - 1), 43.700) for i in range(1, 7)}  # a straight road, west to east
    nodes[7] = (7.404, 43.703)
    ways = [(10, [1, 2, 3, 4, 5, 6], {"highway": "primary", "name": "Main"}),
            (11, [2, 7, 5], {"highway": "secondary", "name": "Bypass"})]
    _osm(tmp_path / "road.osm", nodes, ways)
    speeds = [(2, 3, 20.0, ""), (3, 4, 35.0, ",8"), (4, 5, 50.0, ","), (1, 2, 90.0, ",30.5")]
    (tmp_path / "speeds.csv").write_text("".join(f"{f},{t},{v:g}{r}\n" for f, t, v, r in speeds))
    base = tmp_path / "road.osrm"
    run_tool([osrm_bin / "osrm-extract", "-p", lua, "-t", "1", tmp_path / "road.osm"], tmp_path)
    run_tool([osrm_bin / "osrm-partition", base], tmp_path)
    run_tool([osrm_bin / "osrm-customize", "--segment-speed-file", tmp_path / "speeds.csv", base], tmp_path)
    build_dataset(str(tmp_path / "road.osm"), tmp_path / "ds", profile=lua, cell_sizes=(4,))
    e = Engine.open(tmp_path / "ds")
    ups = []
    for f, t, v, r in speeds:
        u = {"from": f, "to": t, "speed_kmh": v}
        if r == ",":
            u["rate"] = None  # the empty 4th column
        elif r:
            u["rate"] = float(r[1:])
        ups.append(u)
    e.customize(ups)
    pts = [(7.401, 43.700), (7.4092, 43.700)]
    mine = e.route(pts, overview="false", annotations=["duration", "nodes"])["routes"][0]
    server = OSRMRouted(osrm_bin, base, algorithm="mld")
    try:
        coords = ";".join(f"{x:.6f},{y:.6f}" for x, y in pts)
        got = server.get(f"/route/v1/driving/{coords}?overview=false&annotations=duration,nodes")
    finally:
        server.close()
    theirs = got["routes"][0]
    assert mine["legs"][0]["annotation"]["nodes"] == theirs["legs"][0]["annotation"]["nodes"]
    assert mine["weight"] == pytest.approx(theirs["weight"], abs=0.25)
    assert mine["duration"] == pytest.approx(theirs["duration"], abs=0.25)
    assert mine["legs"][0]["annotation"]["duration"] == pytest.approx(theirs["legs"][0]["annotation"]["duration"],
                                                                      abs=0.11)


def _rewrite(path, edit):
    """Load a traffic file, let ``edit(header, arrays)`` change it, save it with consistent hashes."""
    import hashlib
    import json

    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    header = json.loads(bytes(arrays.pop("header")).decode())
    edit(header, arrays)
    header["arrays"] = {k: {"dtype": str(a.dtype), "shape": list(a.shape),
                            "sha256": hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()}
                        for k, a in arrays.items()}
    with open(path, "wb") as f:
        np.savez(f, header=np.frombuffer(json.dumps(header).encode(), np.uint8), **arrays)


def _as_version_1(header, arrays):
    header["version"] = 1
    arrays.pop("arc_duration")


def _zero_duration(header, arrays):
    arrays["arc_duration"] = arrays["arc_duration"].copy()
    arrays["arc_duration"][5] = 0


def test_old_and_damaged_duration_files(dataset):
    """A version 1 file (no arc_duration) is still read, its durations the graph's; a version 1 file
    naming arc_duration, or a zero duration, is refused naming the file."""
    e = Engine.open(dataset)
    arc = int(np.flatnonzero(np.asarray(e.graph.arc_attrs["length_m"]) > 20)[0])
    e.customize([_speed(e, arc, 12.0)])
    path = dataset / TRAFFIC
    good = path.read_bytes()
    _rewrite(path, _as_version_1)
    r = Engine.open(dataset)
    assert r.info["traffic"]["restored"] is True and r.overlay._need_state().arc_duration is None
    np.testing.assert_array_equal(r.overlay.arc_cost, e.overlay.arc_cost)
    for edit, why in ((lambda h, a: h.update(version=1), "arc_duration"), (_zero_duration, "arc_duration[5]")):
        path.write_bytes(good)
        _rewrite(path, edit)
        r = Engine.open(dataset)
        t = r.info["traffic"]
        assert t["restored"] is False and str(path) in t["refused"] and why in t["refused"]
        assert r.overlay._need_state().arc_duration is None
