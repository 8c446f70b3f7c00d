"""Isochrones on the GPU (gpuroute.engine.services.isochrone.lattice.IsochroneGPU, kernels in its isochrone.cu) against
their numba twin: the lattice and field codes bit for bit (PHAST rows on the device, the pieces' extent,
the marks, the two passes), and whole answers of Engine.isochrone equal, on random road graphs (both
metrics, one to four contours, coarse lattices, small blocks)."""
from __future__ import annotations

import numpy as np
import pytest
from naive import random_road_graph
from phantoms import point  # noqa: E402

import gpuroute.engine.services.isochrone as iso
from gpuroute import config
from gpuroute.backend import gpu_available
from gpuroute.ch import ContractionHierarchy
from gpuroute.engine import Engine
from gpuroute.engine.services.isochrone import lattice, search

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")]
pytest.importorskip("shapely")


@pytest.fixture(scope="module", params=[0, 1])
def engine(request):
    rng = np.random.default_rng(request.param)
    g, _ = random_road_graph(rng, 1500, spread_deg=0.05)
    return Engine(g, ContractionHierarchy.build(g, "travel_time", progress=False),
                  distance_ch=ContractionHierarchy.build(g, "distance", progress=False))


def _requests(engine, metric, k_contours, rng):
    """A few requests from random nodes, contours from the node costs' quantiles (largest first)."""
    met = iso.metric_of(engine, metric)
    g = engine.graph
    out = []
    for v in rng.choice(g.n_nodes, 4, replace=False):
        origin = point(engine.segments.snap(*g.coords[v]))
        d = engine.graph.to_scipy(met.name)
        from scipy.sparse.csgraph import dijkstra

        cost = dijkstra(d, indices=int(engine._head[origin.arcs[0][0]]))
        cost = cost[np.isfinite(cost)]
        cus = sorted(np.quantile(cost, np.linspace(0.1, 0.6, k_contours)) + 1.0, reverse=True)
        out.append((met, search.Request(met, engine._head, origin.arcs, cus, origin.lon, origin.lat)))
    return out


@pytest.mark.parametrize("cells", [250000, 5000])
@pytest.mark.parametrize("metric", ["duration", "distance"])
def test_gpu_codes_equal_the_cpu_twin(engine, metric, cells, monkeypatch):
    monkeypatch.setattr(config, "SERVE_ISOCHRONE_MAX_CELLS", cells)
    monkeypatch.setattr(config, "SERVE_ISOCHRONE_GPU_THREADS", 64)
    rng = np.random.default_rng(11)
    gpu = None
    for k in (1, 2, 4):
        for met, req in _requests(engine, metric, k, rng):
            gpu = gpu or lattice.IsochroneGPU(iso.graph_arrays(engine), met)
            want, lw = lattice.codes_cpu(iso.graph_arrays(engine), met, req)
            want = want.copy()
            got, lg = gpu.codes(req)
            assert (lg.cell, lg.i0, lg.j0, lg.W, lg.H) == (lw.cell, lw.i0, lw.j0, lw.W, lw.H)
            np.testing.assert_array_equal(lg.windows, lw.windows)
            assert (want <= lw.kin).any()
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kw", [{}, {"metric": "distance"}, {"polygons": False, "denoise": 0.0, "generalize": 0.0},
                                {"coordinates": "arrays"}])
def test_gpu_isochrone_equals_cpu(engine, kw, monkeypatch):
    """Engine.isochrone with the lattice drawn on the GPU answers exactly as with the CPU twin."""
    rng = np.random.default_rng(5)
    for _, req in _requests(engine, kw.get("metric", "duration"), 2, rng)[:2]:
        met = iso.metric_of(engine, kw.get("metric", "duration"))
        contours = [c * met.scale for c in req.cus]
        coord = (req.lon0, req.lat0)
        monkeypatch.setattr(config, "SERVE_ISOCHRONE_DEVICE", "cpu")
        a = engine.isochrone(coord, contours, **kw)
        monkeypatch.setattr(config, "SERVE_ISOCHRONE_DEVICE", "gpu")
        b = engine.isochrone(coord, contours, **kw)
        if kw.get("coordinates") == "arrays":
            import orjson

            assert orjson.dumps(a, option=orjson.OPT_SERIALIZE_NUMPY) == orjson.dumps(b, option=orjson.OPT_SERIALIZE_NUMPY)
        else:
            assert a == b


# ----------------------------------------------------------------------------------- turn-aware (overlay)
@pytest.fixture(scope="module")
def turns_engine():
    """An engine with an overlay on a random graph with restrictions, customized with random per-turn
    penalties and some closed turns: its isochrones search the turn-aware way (metric with ``turns``)."""
    from crp_oracle import with_restrictions

    from gpuroute import Overlay, Partition
    from gpuroute.crp import FORBIDDEN
    from gpuroute.crp.metric import Metric

    rng = np.random.default_rng(3)
    g, _ = random_road_graph(rng, 1500, spread_deg=0.05, one_way=0.3)
    g = with_restrictions(g, rng, 40)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(16, 128)))
    T = ov.turns.n_turns
    tcost = rng.integers(0, 30, T)
    tcost[rng.random(T) < 0.1] = FORBIDDEN
    ov.customize(Metric(g.weight("travel_time"), [0, 7, 3, 40], turn_cost=tcost, name="time-turns", units="ds"))
    return Engine(g, ContractionHierarchy.build(g, "travel_time", progress=False), overlay=ov)


def _turn_requests(engine, metric, contours, rng, n=4):
    met = iso.metric_of(engine, metric)
    assert met.turns is not None
    g = engine.graph
    out = []
    for v in rng.choice(g.n_nodes, n, replace=False):
        origin = point(engine.segments.snap(*g.coords[v]))
        out.append(search.Request(met, engine._head, origin.arcs, sorted((c / met.scale for c in contours),
                                                                         reverse=True), origin.lon, origin.lat))
    return met, out


@pytest.mark.parametrize("cells", [250000, 5000])
def test_gpu_codes_by_arc_equal_the_cpu_twin(turns_engine, cells, monkeypatch):
    """The turn-aware search's arcs drawn on the GPU (entry costs scattered per arc, ``by_arc``): the
    lattice and codes equal the numba twin's bit for bit; again after /customize replaced the metric (the
    drawer takes the new arc costs), for both metrics and 1, 2, 4 contours."""
    monkeypatch.setattr(config, "SERVE_ISOCHRONE_MAX_CELLS", cells)
    monkeypatch.setattr(config, "SERVE_ISOCHRONE_GPU_THREADS", 64)
    e = turns_engine
    rng = np.random.default_rng(7)
    for step in range(2):
        if step == 1:
            cost = np.asarray(e.overlay.arc_cost)
            arcs = rng.choice(e.graph.n_arcs, 200, replace=False)
            e.customize([{"arc": int(a), "cost": int(3 * cost[a]) + 1} for a in arcs])
        for metric, contours in (("duration", [120]), ("duration", [60, 240]), ("distance", [300, 800, 1500, 3000])):
            met, reqs = _turn_requests(e, metric, contours, rng)
            gpu = iso.gpu_drawer(e, met) if config.SERVE_ISOCHRONE_DEVICE != "cpu" else None
            gpu = gpu or lattice.IsochroneGPU(iso.graph_arrays(e), met)
            for req in reqs:
                want, lw = lattice.codes_cpu(iso.graph_arrays(e), met, req)
                want = want.copy()
                got, lg = gpu.codes(req, met)
                assert (lg.cell, lg.i0, lg.j0, lg.W, lg.H) == (lw.cell, lw.i0, lw.j0, lw.W, lw.H)
                np.testing.assert_array_equal(lg.windows, lw.windows)
                assert (want <= lw.kin).any()
                np.testing.assert_array_equal(got, want)


def test_gpu_turn_aware_isochrone_equals_cpu(turns_engine, monkeypatch):
    """Engine.isochrone on an engine with an overlay answers exactly as on the CPU with the lattice drawn
    on the GPU (JSON bytes, arrays and lists)."""
    import orjson

    e = turns_engine
    rng = np.random.default_rng(9)
    for v in rng.choice(e.graph.n_nodes, 3, replace=False):
        coord = tuple(float(c) for c in e.graph.coords[v])
        for kw in ({}, {"metric": "distance"}, {"coordinates": "arrays"},
                   {"polygons": False, "denoise": 0.0, "generalize": 0.0}):
            cont = [500, 1500] if kw.get("metric") == "distance" else [60, 180]
            monkeypatch.setattr(config, "SERVE_ISOCHRONE_DEVICE", "cpu")
            a = e.isochrone(coord, cont, **kw)
            monkeypatch.setattr(config, "SERVE_ISOCHRONE_DEVICE", "gpu")
            b = e.isochrone(coord, cont, **kw)
            assert orjson.dumps(a, option=orjson.OPT_SERIALIZE_NUMPY) == orjson.dumps(b, option=orjson.OPT_SERIALIZE_NUMPY)
    assert any(k[0] == "turns" for k in e._iso_gpu if isinstance(k, tuple))
