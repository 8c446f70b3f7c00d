"""Every algorithm's twins accept the same options and report the same stats layout (section 1 of the
house issue: on main the Crauser rule numbers, the default delta, option names and stats layouts
differed between the CPU and GPU twins). CPU always; the GPU twin where a GPU is present."""
from __future__ import annotations

import numpy as np
import pytest

import gpuroute
from gpuroute.backend import gpu_available
from gpuroute.sssp import ALGORITHMS, STATS_KEYS

SPECS = {a.name: a for a in ALGORITHMS.values()}
CASES = sorted(((name, v) for name, a in SPECS.items() for v in a.variants), key=lambda c: (c[0], str(c[1])))


def _graph():
    rng = np.random.default_rng(7)
    n, m = 150, 450
    return gpuroute.RoadGraph.from_arcs(n, rng.integers(0, n, m), rng.integers(0, n, m),
                                        {"distance": rng.integers(1, 30, m)})


def _run(g, name, variant, device, **opts):
    if name == "adaptive" and variant in (None, "count"):
        opts = {k: v for k, v in opts.items() if k not in ("up_us", "down_us")}
    if name == "adaptive" and variant in ("time", "time-host"):
        opts = {k: v for k, v in opts.items() if k != "frac"}
    return gpuroute.sssp_full(g, [0, 9], algorithm=name, variant=variant, device=device, return_predecessors=True,
                              **opts)


def _defaults(name):
    return {o.name: o.default for o in SPECS[name].spec.options}


def check_layout(res, name):
    spec = SPECS[name].spec
    assert tuple(res.stats) == STATS_KEYS or set(res.stats) == set(STATS_KEYS)
    assert set(res.stats["params"]) == set(spec.params)
    assert set(res.stats["extra"]) == set(spec.extra)
    assert res.stats["phases"].shape == (2,)


@pytest.mark.parametrize("name,variant", CASES)
def test_cpu_twin_takes_every_declared_option_and_keeps_the_layout(name, variant):
    g = _graph()
    ref = gpuroute.sssp(g, [0, 9], algorithm="dijkstra", device="cpu")
    res = _run(g, name, variant, "cpu", **_defaults(name), phase_times=False)
    np.testing.assert_array_equal(res.dist, ref)
    check_layout(res, name)
    with pytest.raises(TypeError, match="accepts"):
        gpuroute.sssp(g, 0, algorithm=name, variant=variant, device="cpu", no_such_option=1)


def test_gpu_only_options_are_declared_as_such():
    """Options that only shape a GPU launch say so (the CPU twin accepts them with no effect)."""
    for name, alg in SPECS.items():
        for o in alg.spec.options:
            if o.name in ("loop", "batch", "pipelined", "reps", "max_in", "rounds_per_graph", "mode", "chase"):
                assert o.gpu_only, (name, o.name)
            assert o.doc, (name, o.name)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("name,variant", [c for c in CASES if SPECS[c[0]].gpu is not None])
def test_gpu_twin_takes_the_same_options_and_keeps_the_same_layout(name, variant):
    g = _graph()
    cpu = _run(g, name, variant, "cpu", **_defaults(name))
    gpu = _run(g, name, variant, "gpu", **_defaults(name))
    np.testing.assert_array_equal(gpu.dist, cpu.dist)
    np.testing.assert_array_equal(gpu.pred, cpu.pred)
    check_layout(gpu, name)
    assert set(gpu.stats["params"]) == set(cpu.stats["params"])
    assert set(gpu.stats["extra"]) == set(cpu.stats["extra"])
    assert gpu.stats["device"] == "gpu" and cpu.stats["device"] == "cpu"
    if "delta" in cpu.stats["params"]:
        assert gpu.stats["params"]["delta"] == cpu.stats["params"]["delta"]  # one default delta
    if "rule" in cpu.stats["params"]:
        assert gpu.stats["params"]["rule"] == cpu.stats["params"]["rule"]  # one rule numbering
