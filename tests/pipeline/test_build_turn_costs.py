"""A build of a graph with per-turn costs (a Lua profile's: OSRM's car.lua) stores no contraction hierarchy
(issue 20: it was 22 of a Monaco dataset's 25 MB and no service read it): the dataset is format version 2
without a ``ch`` part, every service answers exactly as from a build with the hierarchy, none of them
contracts it, and :attr:`Engine.ch` contracts on demand the very hierarchy a build would have stored.
Datasets with a hierarchy are still written as version 1 and open as before."""
from __future__ import annotations

import json

import numpy as np
import pytest
from crp_oracle import with_restrictions
from naive import random_road_graph

from gpuroute import RoadGraph, Unit
from gpuroute.engine import Engine
from gpuroute.engine.dataset import FORMAT_READS, DatasetError, load_dataset
from gpuroute.graph.turn_costs import TurnCosts, n_turns_of
from gpuroute.pipeline import build
from gpuroute.pipeline.build import build_dataset
from gpuroute.store import save_graph

CELLS = [8, 32]


def _profiled(seed=11, n=90):
    """A random road graph with a profile's routability weight and per-turn costs (some turns closed)."""
    rng = np.random.default_rng(seed)
    g0, _ = random_road_graph(rng, n, one_way=0.25)
    g0 = with_restrictions(g0, rng, 10)
    T = n_turns_of(g0.first_out, g0.head)
    dur = rng.integers(0, 40, T)
    dur[rng.random(T) < 0.1] = -1  # closed by the profile
    weight = np.where(dur < 0, -1, dur + rng.integers(0, 20, T))
    weights = dict(g0.weights, weight=g0.weight("travel_time") + rng.integers(0, 30, g0.n_arcs))
    units = dict(g0.units, weight=Unit("routability/10", "other", 0.1))
    return RoadGraph(g0.first_out, g0.head, weights, units=units, coords=g0.coords, name="profiled", turns=g0.turns,
                     turn_costs=TurnCosts(dur, weight, meta={"weight_name": "routability"}))


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """The same graph built twice: as now (no hierarchy) and as before (the contract stage forced):
    ``(graph directory, without, with, progress of the first build)``."""
    d = tmp_path_factory.mktemp("turns")
    src = save_graph(_profiled(), d / "graph")
    seen = []
    build_dataset(src, d / "now", cell_sizes=CELLS, weight="weight", progress=lambda st, s: seen.append((st, s)))
    mp = pytest.MonkeyPatch()
    mp.setattr(build, "needs_hierarchy", lambda graph, overlay: True)
    try:
        build_dataset(src, d / "before", cell_sizes=CELLS, weight="weight")
    finally:
        mp.undo()
    return src, d / "now", d / "before", seen


def test_a_turn_cost_build_stores_no_hierarchy(builds):
    _, now, before, seen = builds
    man = json.loads((now / "manifest.json").read_text())
    assert man["version"] == 2 and "ch" not in man["parts"] and not (now / "ch").exists()
    assert "contract" not in man["seconds"]
    assert [st for st, s in seen if s is None] == ["import", "partition", "customize", "save"]
    old = json.loads((before / "manifest.json").read_text())
    assert old["version"] == 1 and "ch" in old["parts"] and (before / "ch").is_dir()  # every part: version 1
    ds = load_dataset(now)
    assert ds.ch is None and "ch" not in ds.seconds and ds.weight == "weight"


def test_the_summary_says_why_the_contract_stage_did_not_run(builds, tmp_path):
    src = builds[0]
    s = build_dataset(src, tmp_path / "x", cell_sizes=CELLS, weight="weight")
    assert set(s["skipped"]) == {"contract"} and "turn costs" in s["skipped"]["contract"]
    assert "contract" not in s["seconds"] and {"import", "partition", "customize", "save"} <= set(s["seconds"])


def _requests(e, rng):
    c = np.asarray(e.graph.coords, dtype=np.float64)

    def pts(k):
        return [(float(c[i, 0]), float(c[i, 1])) for i in rng.integers(0, len(c), k)]

    out = []
    for _ in range(12):
        out.append(("route", pts(2), {"steps": True, "annotations": True}))
    for _ in range(3):
        out.append(("route", pts(3), {"continue_straight": False}))
        out.append(("table", pts(6), {"annotations": ("duration", "distance")}))
        out.append(("trip", pts(5), {}))
        out.append(("nearest", pts(1), {"number": 2}))
        out.append(("isochrone", pts(1), {"contours": [60.0, 120.0]}))
    return out


def _answer(e, service, pts, opts):
    try:
        if service == "nearest":
            return e.nearest(pts[0], **opts)
        if service == "isochrone":
            return e.isochrone(pts[0], **opts)
        return getattr(e, service)(pts, **opts)
    except Exception as x:  # an error is an answer too: the same error from both
        return f"{type(x).__name__}: {x}"


def test_every_service_answers_as_with_the_hierarchy_and_none_contracts_it(builds):
    _, now, before, _ = builds
    a, b = Engine.open(now), Engine.open(before)
    assert a._ch is None and b._ch is not None
    reqs = _requests(a, np.random.default_rng(5))
    got = [_answer(a, *r) for r in reqs]
    want = [_answer(b, *r) for r in reqs]
    assert sum(isinstance(x, dict) for x in got) >= len(reqs) // 2  # mostly answers, not errors
    assert got == want
    a.customize(metric="duration")
    b.customize(metric="duration")
    assert [_answer(a, *r) for r in reqs[:8]] == [_answer(b, *r) for r in reqs[:8]]
    assert a._ch is None  # no service needed the hierarchy
    assert a.capabilities == b.capabilities and a.info["weight"] == b.info["weight"] == "weight"


def test_the_hierarchy_on_demand_is_the_one_a_build_stores(builds):
    _, now, before, _ = builds
    a = Engine.open(now)
    stored = load_dataset(before).ch
    ch = a.ch  # contracted here, once
    assert a.ch is ch and ch.weight == stored.weight == "weight"
    for name in stored.h.ARRAYS:
        np.testing.assert_array_equal(getattr(ch.h, name), getattr(stored.h, name), err_msg=name)
    # an engine over the hierarchy alone (no overlay) answers as over the stored one
    pts = [tuple(map(float, a.graph.coords[i])) for i in (3, 40, 77)]
    assert Engine(a.graph, a.ch).route(pts) == Engine(a.graph, stored).route(pts)
    a.close()  # releases what was contracted; the engine stays usable
    assert a.ch is ch


def test_an_engine_without_a_hierarchy_needs_its_weight(builds):
    from gpuroute.pipeline.customize import routing_weight
    from gpuroute.store import load_graph

    g = load_graph(builds[0])
    e = Engine(g, None)
    assert e.weight == routing_weight(g) == "weight" and e._ch is None  # the build's default routing weight
    assert Engine(g, None, weight="travel_time").weight == "travel_time"
    ch = Engine(g, None, weight="weight").ch
    with pytest.raises(ValueError, match="contracted for 'weight', not 'distance'"):
        Engine(g, ch, weight="distance")
    with pytest.raises(ValueError, match="contracted for 'weight', not 'distance'"):
        Engine.open(builds[1], weight="distance")


def test_engine_open_of_a_turn_cost_graph_contracts_nothing(builds):
    e = Engine.open(builds[0])  # the saved graph: extract, partition and customize in memory
    assert e.overlay is not None and e._ch is None


def test_a_version_1_dataset_without_its_hierarchy_is_refused(builds, tmp_path):
    import shutil

    from gpuroute import store

    d = tmp_path / "v1"
    shutil.copytree(builds[2], d)
    shutil.rmtree(d / "ch")
    with pytest.raises(DatasetError, match="part 'ch' is missing"):
        load_dataset(d)
    man = json.loads((builds[1] / "manifest.json").read_text())
    man["version"] = max(FORMAT_READS) + 1
    man[store.INTEGRITY] = store.manifest_integrity(man)
    d2 = tmp_path / "v3"
    shutil.copytree(builds[1], d2)
    (d2 / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(DatasetError, match=rf"format version {max(FORMAT_READS) + 1}, this gpuroute reads versions 1, 2"):
        load_dataset(d2)
