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
