"""``depart_at=`` on the shipped Monaco built with OSRM's own car.lua: the metric is the profile's weight
(``routability``, not a time), so a speed row sets the weight by OSRM's ``convertToWeight`` (rate = speed in
m/s) and the durations by ``convertToDuration``, as a ``/customize`` speed update; ``exclude=`` composes with
the departure slot (one customization per (slot, combination)).

Oracle: the slot's weights and durations computed here from the profile's rows, the overlay's current turn
costs with the out-arc's weight replaced by the slot's (turns into excluded arcs removed for ``exclude``),
and a Dijkstra on that turn-expanded graph between the snapped phantoms (``tests/turn_oracle.py``)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("osmium")
pytest.importorskip("lupa", reason="lupa (pip install 'gpuroute[lua]') runs OSRM's Lua profiles")

from osrm_peer import osrm_bin_dir, osrm_profiles_dir  # noqa: E402
from phantoms import point  # noqa: E402
from turn_oracle import phantom_cost, route_arcs  # noqa: E402

from gpuroute.engine import Engine  # noqa: E402
from gpuroute.engine.exclude import excluder  # noqa: E402
from gpuroute.pipeline import build_dataset  # noqa: E402

MONACO = Path(__file__).resolve().parents[2] / "src" / "gpuroute" / "datasets" / "data" / "monaco.osm.pbf"
THU = "2026-11-26"


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    car = osrm_profiles_dir(osrm_bin_dir(required=False)) / "car.lua"
    d = tmp_path_factory.mktemp("ds") / "monaco-car"
    build_dataset(MONACO, d, profile=car, cell_sizes=(64, 1024))
    e = Engine.open(d)
    p = d.parent / "rush.csv"
    p.write_text("# timezone: Europe/Monaco\nday,start,end,road_class,speed_kmh,factor\n"
                 "weekday,08:00,09:00,primary,9,\nweekday,08:00,09:00,secondary,,2\n"
                 "weekday,08:00,09:00,side_residential,,3\n")
    e.set_time_profile(p)
    return e


def _slot(e):
    """The oracle's slot weights (float64 (m,), the metric's unit) and durations (int64 (m,), ds)."""
    g = e.graph
    names = list(g.meta["road_classes"])
    rc = np.asarray(g.arc_attrs["road_class"], dtype=np.int64)
    length = np.asarray(g.arc_attrs["length_m"], dtype=np.float64)
    w = np.asarray(e.overlay.arc_cost, dtype=np.float64).copy()
    dur = np.asarray(g.weight("travel_time"), dtype=np.int64).copy()
    mult = 10.0 ** int(g.turn_costs.meta.get("weight_precision", g.meta.get("weight_precision")))
    prim = rc == names.index("primary")
    w[prim] = np.maximum(1.0, np.floor(length[prim] / (9 / 3.6) * mult + 0.5))
    dur[prim] = np.maximum(1, np.floor(10 * length[prim] / (9 / 3.6) + 0.5)).astype(np.int64)
    for name, f in (("secondary", 2.0), ("side_residential", 3.0)):
        k = rc == names.index(name)
        w[k] = np.maximum(1.0, np.floor(f * w[k] + 0.5))
        dur[k] = np.maximum(1, np.floor(f * dur[k] + 0.5)).astype(np.int64)
    return w, dur


def _tg(e, cost, excluded=None):
    ov = e.overlay
    tr = ov.turns
    m = e.graph.n_arcs
    tc = np.asarray(ov.turn_cost, dtype=np.float64)
    out = np.asarray(tr.out_arc, dtype=np.int64)
    in_arc = np.repeat(np.arange(m), np.diff(np.asarray(tr.first)))
    ok = tc >= 0
    if excluded is not None:
        ok &= ~excluded[out]
    w = tc - np.asarray(ov.arc_cost, dtype=np.float64)[out] + cost[out]
    return in_arc[ok], out[ok], w[ok], cost


def _pairs(e, k, seed):
    s = e.segments
    rng = np.random.default_rng(seed)
    pick = rng.choice(s.n_segments, 2 * k)
    f = rng.uniform(0.3, 0.7, 2 * k)
    lon = s.lon_u[pick] + f * (s.lon_v[pick] - s.lon_u[pick])
    lat = s.lat_u[pick] + f * (s.lat_v[pick] - s.lat_u[pick])
    return [[(lon[2 * i], lat[2 * i]), (lon[2 * i + 1], lat[2 * i + 1])] for i in range(k)]


def test_weight_and_durations_of_a_lua_weight_slot(engine):
    e = engine
    assert e._traffic.snapshot().name == "routability"
    w, dur = _slot(e)
    tg = _tg(e, w)
    scale = e._traffic.snapshot().scale
    slower = 0
    for c in _pairs(e, 6, seed=3):
        sp = [point(e.segments.snap(*p)) for p in c]
        want = phantom_cost(e.overlay, sp[0], sp[1], tg)
        r = e.route(c, depart_at=f"{THU}T08:30", annotations=["nodes", "duration"])["routes"][0]
        assert r["weight"] == pytest.approx(want * scale, abs=0.051)
        slower += r["weight"] > e.route(c)["routes"][0]["weight"] + 0.05
        arcs = route_arcs(e, r)
        inner = np.asarray(r["legs"][0]["annotation"]["duration"][1:-1])
        assert np.allclose(inner, dur[arcs[1:-1]] / 10.0, atol=0.051)  # the slot's durations, arc by arc
    assert slower >= 3  # the slot is not the plain metric on these pairs (the test exercises it)


def test_exclude_composes_with_the_slot(engine):
    e = engine
    ex = excluder(e).resolve("motorway")
    w, _ = _slot(e)
    tg = _tg(e, w, ex.excluded)
    scale = e._traffic.snapshot().scale
    n0 = e._time_slots.stats["customizations"]
    index = ex.segments()
    for c in _pairs(e, 5, seed=9):
        sp = [point(index.snap(*p)) for p in c]
        want = phantom_cost(e.overlay, sp[0], sp[1], tg)
        r = e.route(c, depart_at=f"{THU}T08:10", exclude="motorway", annotations=["nodes"])["routes"][0]
        assert r["weight"] == pytest.approx(want * scale, abs=0.051)
        assert not ex.excluded[route_arcs(e, r)].any()
    assert e._time_slots.stats["customizations"] == n0 + 1  # one (slot, exclusion) pair, once
