"""Departure-time routing (``depart_at=``, :mod:`gpuroute.engine.timeslots`) on the shared Monaco dataset
(native car profile, metric ``time`` in deciseconds): slot-at-departure.

Oracle: the slot's arc costs computed here from the profile's definition (``round(10 * length_m / (speed
/ 3.6))`` deciseconds for a speed row, ``round(factor * built cost)`` for a factor row, the most specific
row winning, live ``/customize`` costs kept), the turn costs of the overlay's current metric with the
out-arc's cost replaced by the slot's, then a Dijkstra on that turn-expanded graph between the snapped
phantoms (``tests/turn_oracle.py``)."""
from __future__ import annotations

import datetime as dt
import math
import textwrap

import numpy as np
import pytest

pytest.importorskip("osmium")

from phantoms import point, random_points  # noqa: E402
from turn_oracle import phantom_cost, route_arcs  # noqa: E402

from gpuroute import config  # noqa: E402
from gpuroute.engine import EngineError  # noqa: E402
from gpuroute.engine.timeslots import TimeProfile, TimeProfileError, parse_depart_at  # noqa: E402

#: Thursday 26 November 2026 (Monaco: UTC+1) and Saturday 28 November.
THU, SAT = "2026-11-26", "2026-11-28"

RUSH = """\
# timezone: Europe/Monaco
# slot_minutes: 15
day,start,end,road_class,way_id,arc,speed_kmh,factor
weekday,07:00,09:30,primary,,,12,
weekday,07:00,09:30,secondary,,,,2.5
weekday,07:00,09:30,tertiary,,,,1.75
thu,08:00,08:15,primary,,,6,
weekday,17:00,19:00,residential,,,,3
weekend,00:00,24:00,primary,,,30,
"""


def _write(tmp_path, text, name="profile.csv"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


@pytest.fixture
def rush(tmp_path):
    return _write(tmp_path, RUSH)


def _class_code(e, name):
    return list(e.graph.meta["road_classes"]).index(name)


def _slot_costs(e, rows, live=None):
    """The oracle's slot arc costs (float64 (m,)): ``rows`` a list of (arc mask, kind, value) from the least
    to the most specific; ``live`` the overlay's current costs (arcs /customize changed keep them)."""
    built = np.asarray(e.graph.weight("travel_time"), dtype=np.float64)
    cur = built.copy() if live is None else np.asarray(live, dtype=np.float64)
    out = cur.copy()
    length = np.asarray(e.graph.arc_attrs["length_m"], dtype=np.float64)
    for mask, kind, v in rows:
        if kind == "speed":
            c = np.maximum(1.0, np.floor(10.0 * length / (v / 3.6) + 0.5))
        else:
            c = np.maximum(1.0, np.floor(v * built + 0.5))
        out = np.where(mask, c, out)
    return np.where(cur != built, cur, out)


def _oracle_tg(e, cost):
    """The turn graph of the overlay's current turns with the arc costs ``cost``."""
    ov = e.overlay
    tr = ov.turns
    m = e.graph.n_arcs
    tc = np.asarray(ov.turn_cost, dtype=np.float64)
    out = np.asarray(tr.out_arc, dtype=np.int64)
    cur = np.asarray(ov.arc_cost, dtype=np.float64)
    in_arc = np.repeat(np.arange(m), np.diff(np.asarray(tr.first)))
    ok = tc >= 0
    w = tc - cur[out] + cost[out]
    return in_arc[ok], out[ok], w[ok], cost


def _rush_thu_0800(e):
    rc = np.asarray(e.graph.arc_attrs["road_class"], dtype=np.int64)
    return [(rc == _class_code(e, "secondary"), "factor", 2.5), (rc == _class_code(e, "tertiary"), "factor", 1.75),
            (rc == _class_code(e, "primary"), "speed", 6.0)]


def _rush_weekday_0730(e):
    rc = np.asarray(e.graph.arc_attrs["road_class"], dtype=np.int64)
    return [(rc == _class_code(e, "primary"), "speed", 12.0), (rc == _class_code(e, "secondary"), "factor", 2.5),
            (rc == _class_code(e, "tertiary"), "factor", 1.75)]


def _check_routes(e, pts, depart_at, cost, *, table=True):
    """Routes (and a table) between consecutive points of ``pts`` at ``depart_at``: their weights (ds) equal
    the oracle's least costs on ``cost``, and the table's cells equal the routes."""
    tg = _oracle_tg(e, cost)
    idx = e.segments
    got = []
    for a, b in zip(pts[:-1], pts[1:], strict=True):
        want = phantom_cost(e.overlay, point(idx.snap(*a)), point(idx.snap(*b)), tg)
        r = e.route([a, b], depart_at=depart_at, annotations=["nodes", "duration"])["routes"][0]
        assert r["duration"] == pytest.approx(want / 10.0, abs=0.06)
        arcs = route_arcs(e, r)
        ann = r["legs"][0]["annotation"]["duration"]
        inner = np.asarray(ann[1:-1])  # whole arcs: each one's slot cost, never another slot's
        assert np.allclose(inner, cost[arcs[1:-1]] / 10.0, atol=0.051)
        got.append(r["duration"])
    if table:
        t = e.table(pts, depart_at=depart_at)["durations"]
        for i, d in enumerate(got):
            assert t[i][i + 1] == pytest.approx(d, abs=0.11)
    return got


# ------------------------------------------------------------------------------------------ the format
@pytest.mark.parametrize("text, where, what", [
    ("day,start,end,road_class,speed_kmh\nweekday,07:00,09:00,primary,20\n", ":1", "timezone"),
    ("# timezone: Mars/Olympus\nday,start,end,road_class,speed_kmh\n", ":1", "Mars/Olympus"),
    ("# timezone: UTC\n# slot_minutes: 7\nday,start,end,road_class,speed_kmh\n", ":2", "slot_minutes"),
    ("# timezone: UTC\nday,start,end,road_kind,speed_kmh\n", ":2", "road_kind"),
    ("# timezone: UTC\nday,start,end,road_class,speed_kmh\nweekday,07:00,09:00,primary,20\nholiday,07:00,09:00,"
     "primary,20\n", ":4", "holiday"),
    ("# timezone: UTC\nday,start,end,road_class,speed_kmh\nweekday,07:10,09:00,primary,20\n", ":3", "07:10"),
    ("# timezone: UTC\nday,start,end,road_class,speed_kmh\nweekday,22:00,02:00,primary,20\n", ":3", "midnight"),
    ("# timezone: UTC\nday,start,end,road_class,speed_kmh\nweekday,07:00,09:00,primary,0\n", ":3", "speed_kmh"),
    ("# timezone: UTC\nday,start,end,road_class,speed_kmh\nweekday,07:00,09:00,primary,fast\n", ":3", "'fast'"),
    ("# timezone: UTC\nday,start,end,road_class,way_id,speed_kmh\nweekday,07:00,09:00,primary,12,20\n", ":3",
     "exactly one"),
    ("# timezone: UTC\nday,slot,road_class,speed_kmh\nweekday,96,primary,20\n", ":3", "slot '96'"),
    ("# timezone: UTC\nday,start,end,road_class,speed_kmh\nweekday,07:00,09:00,primary,20\n"
     "weekday,08:30,10:00,primary,25\n", ":4", "line 3"),
    ("# timezone: UTC\nday,start,end,road_class,speed_kmh\nweekday,07:00,09:00,primary\n", ":3", "fields"),
    ("# timezone: UTC\n# valid_from: 2026-13-01\nday,start,end,road_class,speed_kmh\n", ":2", "valid_from"),
])
def test_bad_profile_names_file_line_and_field(tmp_path, text, where, what):
    p = _write(tmp_path, text)
    with pytest.raises(TimeProfileError) as err:
        TimeProfile.read(p)
    assert f"{p}{where}" in str(err.value) if where != ":1" or "timezone" not in what else str(p) in str(err.value)
    assert what in str(err.value)


@pytest.mark.parametrize("row, what", [("weekday,07:00,09:00,boulevard,,,20,", "boulevard"),
                                       ("weekday,07:00,09:00,,999999999999,,20,", "999999999999"),
                                       ("weekday,07:00,09:00,,,99999999,20,", "99999999")])
def test_keys_not_in_the_graph_name_the_line(overlay_engine, tmp_path, row, what):
    p = _write(tmp_path, "# timezone: UTC\nday,start,end,road_class,way_id,arc,speed_kmh,factor\n"
                         "weekend,07:00,09:00,primary,,,20,\n" + row + "\n")
    e = overlay_engine
    with pytest.raises(TimeProfileError) as err:
        e.set_time_profile(p)
    assert f"{p}:4" in str(err.value) and what in str(err.value)
    assert e._time_slots is None  # nothing half-loaded


# ------------------------------------------------------------------------------------------ oracle
def test_route_and_table_follow_the_departure_slot(overlay_engine, rush):
    e = overlay_engine
    e.set_time_profile(rush)
    pts = random_points(e, 6, seed=22)
    built = np.asarray(e.graph.weight("travel_time"), dtype=np.float64)
    rushed = _check_routes(e, pts, f"{THU}T08:05", _slot_costs(e, _rush_thu_0800(e)))
    plain = _check_routes(e, pts, f"{THU}T12:00", built, table=False)  # no row: the current metric
    assert plain == [e.route([a, b])["routes"][0]["duration"] for a, b in zip(pts[:-1], pts[1:], strict=True)]
    assert sum(rushed) > sum(plain)  # the rows slow the network (not the oracle: a sanity check of the fixture)
    _check_routes(e, pts, f"{THU}T07:30", _slot_costs(e, _rush_weekday_0730(e)), table=False)
    rc = np.asarray(e.graph.arc_attrs["road_class"], dtype=np.int64)
    _check_routes(e, pts, f"{SAT}T08:05", _slot_costs(e, [(rc == _class_code(e, "primary"), "speed", 30.0)]),
                  table=False)


def test_precedence_arc_over_way_over_class_and_named_day(overlay_engine, tmp_path):
    e = overlay_engine
    g = e.graph
    rc = np.asarray(g.arc_attrs["road_class"], dtype=np.int64)
    way = np.asarray(g.arc_attrs["way_id"], dtype=np.int64)
    prim = np.flatnonzero(rc == _class_code(e, "primary"))
    w = int(way[prim[0]])
    arc = int(np.flatnonzero(way == w)[-1])
    p = _write(tmp_path, f"""\
        # timezone: Europe/Monaco
        day,start,end,road_class,way_id,arc,speed_kmh,factor
        all,08:00,09:00,,,{arc},,4
        weekday,08:00,09:00,,{w},,,3
        thu,08:00,09:00,primary,,,,2
        weekday,08:00,09:00,primary,,,20,
        """)
    e.set_time_profile(p)
    slots = e._time_slots
    v, _, _ = slots.resolve(parse_depart_at(f"{THU}T08:30"))
    met, dur = slots.slot_metric(v, e.overlay._need_state())
    want = _slot_costs(e, [(rc == _class_code(e, "primary"), "speed", 20.0),  # weekday class row ...
                           (rc == _class_code(e, "primary"), "factor", 2.0),  # ... under thu's class row
                           (way == w, "factor", 3.0),  # a way beats any class row
                           (np.arange(g.n_arcs) == arc, "factor", 4.0)])  # an arc beats its way, whatever the day
    assert dur is None and np.array_equal(np.asarray(met.arc_cost, dtype=np.float64), want)


# ------------------------------------------------------------------------------------------ time
def test_slot_boundaries_and_day_types(overlay_engine, rush):
    e = overlay_engine
    e.set_time_profile(rush)
    prof = e._time_slots.profile
    plain = prof.variant[3, 0]  # Thursday 00:00: no row
    var = {t: e._time_slots.resolve(parse_depart_at(f"{THU}T{t}"))[0]
           for t in ("06:59:59", "07:00", "07:59:59", "08:00", "08:14:59.999", "08:15", "09:29", "09:30")}
    assert var["06:59:59"] == var["09:30"] == plain
    assert var["07:00"] == var["07:59:59"] == var["08:15"] == var["09:29"] != plain  # one metric, shared
    assert var["08:00"] == var["08:14:59.999"] not in (plain, var["07:00"])  # thu's own slot
    fri = e._time_slots.resolve(parse_depart_at("2026-11-27T08:00"))[0]
    assert fri == var["07:00"]  # Friday has no named row: the weekday one
    sat, sun = (e._time_slots.resolve(parse_depart_at(f"2026-11-{d}T08:00"))[0] for d in (28, 29))
    assert sat == sun not in (plain, fri)
    a, b = random_points(e, 2, seed=5)
    d = {t: e.route([a, b], depart_at=f"{THU}T{t}")["routes"][0]["duration"]
         for t in ("07:59:59", "08:00", "08:14:59", "08:15")}
    assert d["07:59:59"] == d["08:15"] and d["08:00"] == d["08:14:59"]


def test_time_zones(overlay_engine, rush, tmp_path):
    e = overlay_engine
    e.set_time_profile(rush)
    s = e._time_slots
    at = {t: s.resolve(parse_depart_at(t)) for t in (f"{THU}T08:00", f"{THU}T08:00+01:00", f"{THU}T07:00Z",
                                                     f"{THU}T07:00:00+00:00", f"{THU}T02:00-05:00",
                                                     f"{THU}T08:00 01:00")}  # a URL's unencoded '+'
    assert len(set(at.values())) == 1 and next(iter(at.values()))[1:] == (3, 32)
    # summer time: 08:00 in Monaco is 06:00 UTC
    assert s.resolve(parse_depart_at("2026-07-02T06:00Z"))[1:] == (3, 32)
    assert s.resolve(parse_depart_at(dt.datetime(2026, 7, 2, 6, 0, tzinfo=dt.timezone.utc)))[1:] == (3, 32)
    # a fixed offset; the local day may be another than UTC's
    p = _write(tmp_path, RUSH.replace("Europe/Monaco", "+05:30"), "offset.csv")
    e.set_time_profile(p)
    assert e._time_slots.resolve(parse_depart_at(f"{THU}T02:30Z"))[1:] == (3, 32)
    assert e._time_slots.resolve(parse_depart_at("2026-11-25T22:00Z"))[1:] == (3, 14)  # Thursday 03:30 local


# ------------------------------------------------------------------------------------------ caching
def test_a_slot_is_customized_once_and_cached(overlay_engine, rush, monkeypatch):
    e = overlay_engine
    e.set_time_profile(rush)
    s = e._time_slots
    a, b = random_points(e, 2, seed=7)
    e.route([a, b], depart_at=f"{THU}T07:00")
    assert s.stats["customizations"] == 1
    for t in ("07:00", "07:15", "09:15", "07:59"):  # the same rows: the same metric
        e.route([a, b], depart_at=f"{THU}T{t}")
        e.table([a, b], depart_at=f"{THU}T{t}")
    e.trip([a, b], depart_at=f"{THU}T07:45")
    assert s.stats["customizations"] == 1 and s.stats["hits"] >= 9
    e.route([a, b], depart_at=f"{THU}T12:00")  # no row: the current metric, nothing customized
    assert s.stats["customizations"] == 1
    monkeypatch.setattr(config, "SERVE_DEPART_CACHE", 1)
    e.route([a, b], depart_at=f"{THU}T08:00")
    assert s.stats["customizations"] == 2
    e.route([a, b], depart_at=f"{THU}T07:00")  # evicted by the 08:00 one (cache of 1)
    assert s.stats["customizations"] == 3 and s.stats["evicted"] >= 1
    info = e.info["time_profile"]
    assert info["cached"] == 1 and info["bytes_per_metric"] > 0 and info["variants"] == len(s.profile.variant_rows)


def test_factor_one_customizes_nothing(overlay_engine, tmp_path):
    e = overlay_engine
    e.set_time_profile(_write(tmp_path, "# timezone: UTC\nday,start,end,road_class,factor\nall,00:00,24:00,primary,1\n"))
    a, b = random_points(e, 2, seed=8)
    assert e.route([a, b], depart_at=f"{THU}T08:00") == e.route([a, b])
    assert e._time_slots.stats["customizations"] == 0


# ------------------------------------------------------------------------------------------ live traffic
def test_live_traffic_overrides_the_profile(overlay_engine, rush):
    e = overlay_engine
    e.set_time_profile(rush)
    s = e._time_slots
    pts = random_points(e, 5, seed=31)
    e.route(pts[:2], depart_at=f"{THU}T08:00")
    before = s.stats["customizations"]
    # live traffic on primary arcs (which the 08:00 slot also sets) and on arcs no row covers
    rc = np.asarray(e.graph.arc_attrs["road_class"], dtype=np.int64)
    rng = np.random.default_rng(3)
    prim = rng.choice(np.flatnonzero(rc == _class_code(e, "primary")), 40, replace=False)
    other = rng.choice(np.flatnonzero(rc == _class_code(e, "residential")), 40, replace=False)
    arcs = np.concatenate([prim, other])
    built = np.asarray(e.graph.weight("travel_time"), dtype=np.int64)
    e.customize([{"arc": int(a), "cost": int(built[a]) + 50 + int(a) % 5} for a in arcs])
    live = np.asarray(e.overlay.arc_cost, dtype=np.float64)
    cost = _slot_costs(e, _rush_thu_0800(e), live)
    assert np.array_equal(cost[arcs], live[arcs])  # the oracle's rule, checked on the arcs changed
    _check_routes(e, pts, f"{THU}T08:00", cost)
    assert s.stats["customizations"] == before + 1  # the cached slot was stale: customized again, once


def test_depart_at_needs_a_time_metric(overlay_engine, rush):
    e = overlay_engine
    e.set_time_profile(rush)
    a, b = random_points(e, 2, seed=9)
    e.customize(metric="distance")
    with pytest.raises(EngineError) as err:
        e.route([a, b], depart_at=f"{THU}T08:00")
    assert err.value.code == "InvalidValue" and "'distance'" in str(err.value)
    e.route([a, b], depart_at=f"{THU}T12:00")  # a slot without rows is the current metric: answered


# ------------------------------------------------------------------------------------------ one slot per answer
def test_one_answer_never_mixes_two_slots(overlay_engine, tmp_path):
    """A route leaving one second before the slot's end whose travel runs well past it: every arc of it at
    the departure slot's cost, its duration the oracle's on that slot alone; a trip's matrix and legs on
    one slot."""
    e = overlay_engine
    rc = np.asarray(e.graph.arc_attrs["road_class"], dtype=np.int64)
    e.set_time_profile(_write(tmp_path, """\
        # timezone: Europe/Monaco
        day,start,end,road_class,speed_kmh
        all,08:00,08:15,primary,5
        all,08:15,08:30,primary,80
        all,08:00,08:15,secondary,5
        all,08:15,08:30,secondary,80
        """))
    pts = random_points(e, 4, seed=41)
    slow = _slot_costs(e, [(rc == _class_code(e, "primary"), "speed", 5.0),
                           (rc == _class_code(e, "secondary"), "speed", 5.0)])
    got = _check_routes(e, pts, f"{THU}T08:14:59", slow)
    assert max(got) > 1.0  # it runs past 08:15 (the oracle above holds it to the 08:00 slot)
    trip = e.trip(pts, depart_at=f"{THU}T08:14:59", source="first")["trips"][0]
    cells = np.asarray(e.table(pts, depart_at=f"{THU}T08:14:59")["durations"], dtype=np.float64)
    legs = [leg["duration"] for leg in trip["legs"]]
    order = [0]
    for leg in trip["legs"][:-1]:  # the tour's order from the legs' costs: each leg is its matrix cell
        nxt = [j for j in range(len(pts)) if j not in order and abs(cells[order[-1], j] - leg["duration"]) < 0.11]
        assert nxt
        order.append(nxt[0])
    assert sum(legs) == pytest.approx(sum(cells[i, j] for i, j in zip(order, order[1:] + [0], strict=True)),
                                      abs=0.3)


# ------------------------------------------------------------------------------------------ bad input
def test_bad_depart_at(overlay_engine, rush, tmp_path):
    e = overlay_engine
    a, b = random_points(e, 2, seed=10)
    with pytest.raises(EngineError) as err:
        e.route([a, b], depart_at=f"{THU}T08:00")
    assert err.value.code == "InvalidValue" and "no time profile is loaded" in str(err.value)
    assert not any(row["depart_at"] for row in e.capabilities)
    e.set_time_profile(rush)
    assert {row["service"] for row in e.capabilities if row["depart_at"]} == {"route", "table", "trip", "isochrone"}
    for bad in ("tomorrow", f"{THU}", f"{THU}T25:00", "26/11/2026 08:00", 1764140400):
        with pytest.raises(EngineError) as err:
            e.table([a, b], depart_at=bad)
        assert err.value.code == "InvalidValue" and repr(bad) in str(err.value)
    e.set_time_profile(_write(tmp_path, "# timezone: Europe/Monaco\n# valid_until: 2026-12-31\n"
                                        "day,start,end,road_class,speed_kmh\nweekday,07:00,09:00,primary,20\n",
                              "weekdays.csv"))
    for outside in (f"{SAT}T08:00", "2027-01-04T08:00"):
        with pytest.raises(EngineError) as err:
            e.route([a, b], depart_at=outside)
        assert err.value.code == "InvalidValue" and "calendar" in str(err.value) and outside in str(err.value)
    e.set_time_profile(None)
    assert e.info["time_profile"] is None


def test_http_grammar_and_isochrone(overlay_engine, rush):
    from gpuroute.server.parse import OSRMError, parse_request

    e = overlay_engine
    e.set_time_profile(rush)
    (lon, lat), (lon2, lat2) = random_points(e, 2, seed=12)
    coords = f"{lon},{lat};{lon2},{lat2}"
    call = parse_request("route", "driving", coords, {"depart_at": f"{THU}T08:00 01:00"})
    assert call.params.depart_at == dt.datetime(2026, 11, 26, 8, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert e.run(call.params) == e.route([(lon, lat), (lon2, lat2)], depart_at=f"{THU}T08:00+01:00")
    for service in ("table", "trip"):
        assert parse_request(service, "driving", coords, {"depart_at": f"{THU}T08:00"}).params.depart_at is not None
    iso = parse_request("isochrone", "driving", f"{lon},{lat}", {"contours_minutes": "2", "depart_at": f"{THU}T08:00"})
    assert iso.params.depart_at == dt.datetime(2026, 11, 26, 8)
    with pytest.raises(OSRMError) as err:
        parse_request("table", "driving", coords, {"depart_at": "soon"})
    assert err.value.code == "InvalidValue" and "'soon'" in err.value.message
    with pytest.raises(OSRMError):
        parse_request("nearest", "driving", f"{lon},{lat}", {"depart_at": f"{THU}T08:00"})
    # an isochrone searches the slot's travel times (no customization), its turns the current metric's
    from gpuroute.engine.services.isochrone import metric_of
    from gpuroute.engine.timeslots import departure

    p = types_ns(depart_at=parse_depart_at(f"{THU}T08:00"), metric="duration")
    n = e._time_slots.stats["customizations"]
    met = departure(e, p, None).isochrone_metric(metric_of(e, "duration"))
    want = _slot_costs(e, _rush_thu_0800(e))
    assert np.array_equal(np.asarray(met.w), want) and e._time_slots.stats["customizations"] == n
    first, out_arc, tcost = met.turns
    cur = np.asarray(e.overlay.turn_cost, dtype=np.float64)
    ok = cur >= 0
    assert np.array_equal(tcost[ok], (cur - np.asarray(e.overlay.arc_cost, dtype=np.float64)[out_arc] + want[out_arc])[ok])
    assert np.array_equal(tcost < 0, ~ok)
    pytest.importorskip("shapely")
    iso = e.isochrone((lon, lat), [120], depart_at=f"{THU}T08:00")
    assert iso["code"] == "Ok" and math.isfinite(iso["features"][0]["properties"]["contour"])


def types_ns(**kw):
    import types

    return types.SimpleNamespace(**kw)


def test_parquet_reads_as_csv(overlay_engine, rush, tmp_path):
    pd = pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    csv_prof = TimeProfile.read(rush)
    df = pd.read_csv(rush, comment="#", dtype=str, keep_default_na=False)
    table = pa.Table.from_pandas(df, preserve_index=False)
    table = table.replace_schema_metadata({"timezone": "Europe/Monaco", "slot_minutes": "15"})
    path = tmp_path / "profile.parquet"
    pq.write_table(table, path)
    prof = TimeProfile.read(path)
    assert np.array_equal(prof.variant, csv_prof.variant)
    for k in ("mask", "lo", "hi", "key_kind", "key", "value_kind", "value"):
        assert np.array_equal(prof.rows[k], csv_prof.rows[k])
    bad = table.replace_schema_metadata({"slot_minutes": "15"})
    pq.write_table(bad, path)
    with pytest.raises(TimeProfileError, match="timezone"):
        TimeProfile.read(path)


def test_cli_trip_depart_at(overlay_engine, monaco_overlay_dir, rush, tmp_path, capsys):
    import json

    from gpuroute.cli.main import main

    e = overlay_engine
    pts = random_points(e, 3, seed=13)
    stops = tmp_path / "stops.json"
    stops.write_text(json.dumps(pts))
    base = ["trip", "--graph", str(monaco_overlay_dir), "--stops", str(stops), "--json"]
    assert main(base + ["--time-profile", str(rush), "--depart-at", f"{THU}T08:00"]) == 0
    got = json.loads(capsys.readouterr().out)
    e.set_time_profile(rush)
    assert got["trips"][0]["duration"] == e.trip(pts, depart_at=f"{THU}T08:00", geometries="geojson",
                                                 overview="full")["trips"][0]["duration"]
    assert main(base + ["--depart-at", f"{THU}T08:00"]) != 0  # no profile: refused
    assert "--time-profile" in capsys.readouterr().err


@pytest.mark.gpu
def test_gpu_slot_customization_equals_the_cpu_twin(overlay_engine, rush):
    """On the GPU a slot's metric is customized by the GPU customization (as /customize): its cliques equal
    the CPU twin's, and routes on it equal the oracle."""
    from gpuroute.backend import gpu_available

    if not gpu_available():
        pytest.skip("needs CuPy and a CUDA GPU")
    e = overlay_engine
    e.set_time_profile(rush)
    s = e._time_slots
    v = s.resolve(parse_depart_at(f"{THU}T08:05"))[0]
    met, _ = s.slot_metric(v, e.overlay._need_state())
    gpu = e.overlay.customized_state(met, device="gpu")
    cpu = e.overlay.customized_state(met, device="cpu")
    def host(x):
        return x.get() if hasattr(x, "get") else np.asarray(x)

    assert np.array_equal(host(gpu.clique), host(cpu.clique))
    _check_routes(e, random_points(e, 4, seed=23), f"{THU}T08:05", _slot_costs(e, _rush_thu_0800(e)))


def test_http_depart_at_end_to_end(overlay_engine, rush):
    """Over HTTP: the route equals the Python API's at that time; a bad or uncovered depart_at is a 400
    InvalidValue naming it (never a 500)."""
    pytest.importorskip("starlette")
    pytest.importorskip("orjson")
    pytest.importorskip("polyline")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # newer Starlette asks for httpx2; httpx works the same
        from starlette.testclient import TestClient
    from gpuroute.server import create_app

    e = overlay_engine
    (lon, lat), (lon2, lat2) = random_points(e, 2, seed=14)
    url = f"/route/v1/driving/{lon},{lat};{lon2},{lat2}?overview=false&depart_at="
    client = TestClient(create_app(e))
    r = client.get(url + f"{THU}T08:05")
    assert r.status_code == 400 and r.json()["code"] == "InvalidValue" and "no time profile" in r.json()["message"]
    e.set_time_profile(rush)
    r = client.get(url + f"{THU}T08:05%2B01:00")
    assert r.status_code == 200
    want = e.route([(lon, lat), (lon2, lat2)], overview="false", depart_at=f"{THU}T08:05+01:00")["routes"][0]
    assert r.json()["routes"][0]["duration"] == want["duration"]
    for bad in ("yesterday", "2026-11-26T31:00"):
        r = client.get(url + bad)
        assert r.status_code == 400 and r.json()["code"] == "InvalidValue" and bad in r.json()["message"]
