"""OSM loader: car profile rules, graph construction on a hand-written extract, real extracts."""
import os

import numpy as np
import pytest

osmium = pytest.importorskip("osmium")

from gpuroute.datasets import path_of  # noqa: E402
from gpuroute.graph.errors import ParseError  # noqa: E402
from gpuroute.io.osm import CAR, EARTH_RADIUS_M, PROFILES, load_osm  # noqa: E402

MONACO = path_of("monaco")
ANDORRA = "/work/shared/data/osm/andorra.osm.pbf"
STEP_M = EARTH_RADIUS_M * np.radians(0.001)  # 0.001 degree of latitude, ~111.2 m


# ---------------------------------------------------------------- profile rules
@pytest.mark.parametrize(
    "value, kmh",
    [("50", 50), ("50 km/h", 50), ("30 mph", 30 * 1.609344), ("none", 140), ("DE:urban", 50),
     ("FR:rural", 80), ("RU:living_street", 20), ("de:motorway", 0), ("signals", 0), ("", 0), (None, 0),
     ("7,5", 7.5)],
)
def test_parse_maxspeed(value, kmh):
    assert CAR.parse_maxspeed(value) == pytest.approx(kmh)


@pytest.mark.parametrize(
    "tags, fwd, bwd",
    [
        ({"highway": "residential"}, 25, 25),
        ({"highway": "motorway"}, 90, 0),  # implied oneway
        ({"highway": "motorway", "oneway": "no"}, 90, 90),
        ({"highway": "motorway_link"}, 45, 45),
        ({"highway": "primary", "oneway": "yes"}, 65, 0),
        ({"highway": "primary", "oneway": "1"}, 65, 0),
        ({"highway": "primary", "oneway": "true"}, 65, 0),
        ({"highway": "secondary", "oneway": "-1"}, 0, 55),
        ({"highway": "tertiary", "junction": "roundabout"}, 40, 0),
        ({"highway": "tertiary", "junction": "roundabout", "oneway": "no"}, 40, 40),
        ({"highway": "primary", "maxspeed": "50"}, 40, 40),  # x 0.8, as OSRM
        ({"highway": "primary", "maxspeed": "50", "maxspeed:backward": "30"}, 40, 24),
        ({"highway": "living_street"}, 10, 10),
        ({"highway": "service"}, 15, 15),
        ({"highway": "service", "service": "emergency_access"}, 0, 0),
        ({"highway": "residential", "access": "private"}, 0, 0),
        ({"highway": "residential", "access": "no"}, 0, 0),
        ({"highway": "residential", "access": "destination"}, 25, 25),
        ({"highway": "residential", "access": "no", "motorcar": "yes"}, 25, 25),  # most specific tag wins
        ({"highway": "residential", "access": "yes", "motor_vehicle": "no"}, 0, 0),
        ({"highway": "residential", "area": "yes"}, 0, 0),
        ({"highway": "residential", "oneway": "reversible"}, 0, 0),
        ({"highway": "footway"}, 0, 0),
        ({"highway": "cycleway"}, 0, 0),
        ({"highway": "steps"}, 0, 0),
        ({"highway": "construction"}, 0, 0),
        ({"building": "yes"}, 0, 0),
    ],
)
def test_car_way_speeds(tags, fwd, bwd):
    f, b = CAR.way_speeds(tags)
    assert (f, b) == (pytest.approx(fwd), pytest.approx(bwd))


def test_profiles_registry():
    assert PROFILES["car"] is CAR
    with pytest.raises(KeyError, match="known profiles"):
        load_osm(MONACO, profile="hovercraft", progress=False)


# ---------------------------------------------------------------- a hand-written extract
def node(i, lat, lon):
    return f'<node id="{i}" version="1" lat="{lat:.7f}" lon="{lon:.7f}"/>'


def way(i, refs, **tags):
    nds = "".join(f'<nd ref="{r}"/>' for r in refs)
    tg = "".join(f'<tag k="{k}" v="{v}"/>' for k, v in tags.items())
    return f'<way id="{i}" version="1">{nds}{tg}</way>'


@pytest.fixture
def tiny_osm(tmp_path):
    # nodes 1..9 on a north-south line, 0.001 degree apart; node 99 is referenced but missing
    nodes = [node(i, 43.7 + 0.001 * i, 7.4) for i in range(1, 10)]
    ways = [
        way(10, [1, 2], highway="residential"),
        way(11, [2, 3], highway="primary", oneway="yes"),
        way(12, [3, 4], highway="secondary", oneway="-1"),
        way(13, [4, 5], highway="motorway"),
        way(14, [5, 6], highway="residential", maxspeed="30 mph"),
        way(15, [6, 7, 99, 8], highway="residential"),  # 7-99 and 99-8 cannot be placed
        way(16, [1, 9], highway="footway"),
        way(17, [8, 9], highway="service", access="private"),
        way(18, [2, 3], highway="living_street"),  # parallel to 11, slower, two-way
    ]
    p = tmp_path / "tiny.osm"
    p.write_text('<?xml version="1.0" encoding="UTF-8"?>\n<osm version="0.6" generator="test">\n'
                 + "\n".join(nodes + ways) + "\n</osm>\n")
    return str(p)


def test_tiny_extract(tiny_osm):
    g = load_osm(tiny_osm, progress=False)
    ids = g.node_ids.tolist()
    assert ids == [1, 2, 3, 4, 5, 6, 7]  # 8 and 9 only sit on dropped segments / non-car ways
    assert g.weight_names == ["travel_time", "distance"]
    assert {k: (u.symbol, u.quantity, u.scale) for k, u in g.units.items()} == {
        "travel_time": ("ds", "time", 0.1), "distance": ("m", "length", 1.0)}
    np.testing.assert_allclose(g.coords[0], [7.4, 43.701])
    arcs = {(ids[g.tail[a]], ids[g.head[a]]): (int(g.weight("travel_time")[a]), int(g.weight("distance")[a]))
            for a in range(g.n_arcs)}
    d = round(STEP_M)

    def tt(kmh):
        return round(STEP_M * 36 / kmh)

    assert set(arcs) == {(1, 2), (2, 1), (2, 3), (3, 2), (4, 3), (4, 5), (5, 6), (6, 5), (6, 7), (7, 6)}
    assert arcs[(1, 2)] == (tt(25), d)
    assert arcs[(2, 3)] == (tt(65), d)  # the primary oneway beats the living street
    assert arcs[(3, 2)] == (tt(10), d)  # only the living street goes back
    assert arcs[(4, 3)] == (tt(55), d)  # oneway=-1
    assert arcs[(4, 5)] == (tt(90), d)  # motorway: implied oneway
    assert arcs[(5, 6)] == (tt(30 * 1.609344 * 0.8), d)
    assert g.meta["segments_missing_location"] == 2
    assert g.meta["parallel_arcs_dropped"] == 1
    assert g.meta["profile"] == "car"
    assert g.name == "tiny"


def test_missing_and_corrupt_files(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_osm(str(tmp_path / "absent.osm.pbf"), progress=False)
    data = open(MONACO, "rb").read()
    cut = tmp_path / "cut.osm.pbf"
    cut.write_bytes(data[: len(data) // 3])
    with pytest.raises(ParseError, match="cannot read OSM file") as ei:
        load_osm(str(cut), progress=False)
    assert ei.value.path == str(cut)


# ---------------------------------------------------------------- real extracts
def _speeds_kmh(g, min_m):
    d = g.weight("distance").astype(float)
    t = g.weight("travel_time").astype(float)
    keep = d >= min_m
    return 36.0 * d[keep] / t[keep]


@pytest.fixture(scope="module")
def monaco():
    return load_osm(MONACO, progress=False)


def test_monaco_counts_and_weights(monaco):
    g = monaco
    # 26,088 nodes sit on highway=* ways of any kind; the car graph uses a large part of them
    assert 10_000 < g.n_nodes < 26_088
    assert g.n_nodes <= g.n_arcs <= 2 * 27_348
    for k in ("distance", "travel_time"):
        assert g.weight(k).min() >= 1
    s = _speeds_kmh(g, 100)
    assert s.min() >= 9.0 and s.max() <= 91.0  # 10 km/h living streets (rounding) .. 90 km/h motorway
    assert np.all(np.diff(g.node_ids) > 0)
    lon, lat = g.coords[:, 0], g.coords[:, 1]
    assert 7.34 < lon.min() and lon.max() < 7.50 and 43.70 < lat.min() and lat.max() < 43.78
    # segments are short: nothing longer than a few kilometres inside Monaco
    assert g.weight("distance").max() < 5_000


def test_monaco_oneways_respected(monaco):
    g = monaco
    arcs = set(zip(g.node_ids[g.tail].tolist(), g.node_ids[g.head].tolist(), strict=True))
    assert any((b, a) not in arcs for a, b in arcs), "a car graph with oneway streets is not symmetric"
    # Oracle straight from the file: segments of plain oneway=yes streets must exist forward; backward
    # only if some other way (one that is not oneway in that direction) joins the same two nodes.
    oneway, other = [], set()
    for w in osmium.FileProcessor(MONACO, osmium.osm.WAY).with_filter(osmium.filter.KeyFilter("highway")):
        refs = [n.ref for n in w.nodes]
        hw = w.tags.get("highway")
        if hw not in CAR.highway_speeds:
            continue
        segs = list(zip(refs, refs[1:], strict=False))
        plain = not any(k in w.tags for k in ("access", "motor_vehicle", "motorcar", "vehicle", "maxspeed"))
        if w.tags.get("oneway") == "yes" and hw in ("primary", "secondary", "residential", "tertiary") and plain:
            oneway.extend(segs)
        else:
            other.update(segs)
            other.update((b, a) for a, b in segs)
    assert len(oneway) > 100
    checked = 0
    for a, b in oneway:
        assert (a, b) in arcs
        if (b, a) not in other:
            assert (b, a) not in arcs
            checked += 1
    assert checked > 100


@pytest.mark.skipif(not os.path.exists(ANDORRA), reason="shared data absent")
def test_andorra():
    g = load_osm(ANDORRA, progress=False)
    assert g.name == "andorra"
    assert 8_000 < g.n_nodes < 38_556
    assert g.n_arcs <= 2 * 38_991
    s = _speeds_kmh(g, 100)
    assert s.min() >= 9.0 and s.max() <= 91.0
    lon, lat = g.coords[:, 0], g.coords[:, 1]
    assert 1.40 < lon.min() and lon.max() < 1.80 and 42.40 < lat.min() and lat.max() < 42.70
    # the graph is not symmetric (oneways) but most streets are two-way
    A = g.to_scipy().astype(bool).astype(np.int8)
    asym = (A != A.T).nnz
    assert 0 < asym < 0.5 * g.n_arcs
