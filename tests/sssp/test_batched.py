"""The batched mode as users call it (section 5 of the house issue): 32-bit results, the measured-best
pass size under algorithm="auto", results in page-locked memory for NumPy callers, no unexplained cap on
a pass. CPU parts always; the GPU parts carry the ``gpu`` marker."""
from __future__ import annotations

import numpy as np
import pytest

import gpuroute
from gpuroute import INF, INF_U32, config
from gpuroute.backend import gpu_available
from gpuroute.sssp.api import release
from gpuroute.sssp.buckets.gpu import BYTES_PER_ITEM, auto_batch

gpu = [pytest.mark.gpu, pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")]


def _graph(n=300, seed=1):
    rng = np.random.default_rng(seed)
    m = 3 * n
    return gpuroute.RoadGraph.from_arcs(n, rng.integers(0, n, m), rng.integers(0, n, m),
                                        {"distance": rng.integers(1, 40, m), "travel_time": rng.integers(1, 9, m)})


def test_uint32_results_on_the_cpu():
    """Users may ask for 32-bit distances (main had no dtype: an unknown option)."""
    g = _graph()
    d64 = gpuroute.sssp(g, [0, 4], device="cpu")
    d32 = gpuroute.sssp(g, [0, 4], device="cpu", dtype="uint32")
    assert d32.dtype == np.uint32
    np.testing.assert_array_equal(d32, np.where(d64 == INF, INF_U32, d64))
    with pytest.raises(ValueError, match="dtype"):
        gpuroute.sssp(g, 0, device="cpu", dtype="float32")
    big = gpuroute.RoadGraph.from_arcs(4, [0, 1, 2], [1, 2, 3], {"w": [2**31 - 1] * 3})
    with pytest.raises(OverflowError, match="uint32"):
        gpuroute.sssp(big, 0, device="cpu", dtype="uint32")


def test_auto_batch_rule():
    """Passes of at most config.SSSP_BATCH_ITEMS items, balanced (measured best, BENCHMARKS.md); main used
    64 sources per pass whatever the graph (NY: 17M items) while 512 per pass measured 1.9x faster on an
    H100, and padded a short last pass to the full batch."""
    n = 264_346
    per = config.SSSP_BATCH_ITEMS // n
    assert per >= 256
    assert auto_batch(n, per * 20) == per
    assert auto_batch(n, 1024) == 512  # two passes of 512
    assert auto_batch(n, 1030) == 515  # balanced: 2 passes of 515, not 761 + 269
    assert auto_batch(n, 1030, max_items=100 * n) == 94  # within the free device memory
    assert auto_batch(n, 7) == 7 and auto_batch(10, 1) == 1
    # the 32-bit item index bounds a pass (the only hard limit; no cap below it)
    assert config.SSSP_MAX_BATCH_ITEMS == 2**32 - 2
    assert auto_batch(2**30, 100) == 1 and BYTES_PER_ITEM >= 36


@pytest.fixture(scope="module")
def ny():
    return gpuroute.datasets.load("ny")


@pytest.mark.parametrize("alg", ["near-far", "cell-bf", "conventional"])
@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
def test_uint32_results_on_the_gpu(alg):
    import cupy as cp

    g = _graph(2000)
    src = [0, 17, 1999]
    ref = gpuroute.sssp(g, src, device="cpu", dtype="uint32")
    d = gpuroute.sssp(g, src, algorithm=alg, device="gpu", dtype="uint32")
    assert isinstance(d, np.ndarray) and d.dtype == np.uint32
    np.testing.assert_array_equal(d, ref)
    dc = gpuroute.sssp(g, cp.asarray(src), algorithm=alg, device="gpu", dtype="uint32")
    assert isinstance(dc, cp.ndarray) and dc.dtype == cp.uint32
    np.testing.assert_array_equal(dc.get(), ref)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
def test_batched_numpy_results_are_page_locked_and_exact(ny):
    import cupy as cp

    src = np.random.default_rng(3).integers(0, ny.n_nodes, 150)
    d, p = gpuroute.sssp(ny, src, algorithm="near-far", device="gpu", batch=64, return_predecessors=True)
    ref_d, ref_p = gpuroute.sssp(ny, src, device="cpu", return_predecessors=True)
    np.testing.assert_array_equal(d, ref_d)
    np.testing.assert_array_equal(p, ref_p)
    for a in (d, p):  # copied through pinned memory, overlapped with the next pass
        attrs = cp.cuda.runtime.pointerGetAttributes(a.ctypes.data)
        assert attrs.type == cp.cuda.runtime.memoryTypeHost


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
def test_pass_beyond_2_27_items_is_exact(ny):
    """Main capped a pass below 2^27 items because the overflow flag was "seen" once on an H200: the
    cause was the first-use race fixed in 3f30358 (buffers zeroed on the default stream raced a
    non-blocking solver stream; large buffers take longest to zero). Solver streams are blocking and
    DeviceGraph uploads synchronise, so a pass of 600 NY sources (158M items) runs exact, repeatedly."""
    src = np.random.default_rng(11).integers(0, ny.n_nodes, 600)
    ref = gpuroute.sssp(ny, src, device="cpu")
    for _ in range(2):
        res = gpuroute.sssp_full(ny, src, algorithm="near-far", device="gpu", batch=600)
        assert res.stats["params"]["batch"] == 600 and 600 * ny.n_nodes > 2**27
        np.testing.assert_array_equal(res.dist, ref)
        release(ny)  # a fresh solver: its buffers are new allocations each time


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
def test_auto_picks_near_far_with_the_measured_pass_size(ny):
    src = np.arange(0, ny.n_nodes, ny.n_nodes // 200)[:200]
    res = gpuroute.sssp_full(ny, src, device="gpu")
    assert res.stats["algorithm"] == "near-far" and res.stats["params"]["batch"] == auto_batch(ny.n_nodes, 200)
    np.testing.assert_array_equal(res.dist[:3], gpuroute.sssp(ny, src[:3], device="cpu"))


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
def test_device_graph_has_an_owner_and_one_upload_per_weight():
    """Section 1: GPU buffers were six caches in graph.__dict__, and a weight given as None and by its
    name uploaded the same arrays twice."""
    from gpuroute import DeviceGraph

    g = _graph(500)
    gpuroute.sssp(g, 0, device="gpu")
    gpuroute.sssp(g, 0, weight="distance", device="gpu")
    assert DeviceGraph.shared(g) is DeviceGraph.shared(g, "distance")
    assert DeviceGraph.shared(g, "travel_time") is not DeviceGraph.shared(g)
    assert not [k for k in vars(g) if "device" in k or "solver" in k or "cache" in k]
    with DeviceGraph(g, "travel_time") as dg:  # the caller's own upload, released by the caller
        d = gpuroute.sssp(dg, [0, 3])
        np.testing.assert_array_equal(d, gpuroute.sssp(g, [0, 3], weight="travel_time", device="cpu"))
        assert dg.nbytes > 0
    assert dg.released
    with pytest.raises(RuntimeError, match="released"):
        gpuroute.sssp(dg, 0, algorithm="near-far")
    release(g)
    assert DeviceGraph.shared(g) is not None  # a new upload on demand after release
