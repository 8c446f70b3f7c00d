"""The GPU tour kernels (local_search.cu, vrp.cu) and their launchers, run on the CPU through the
emulator of tests/tours/cuda_emu.py (every CUDA thread a host thread, barriers and warp shuffles
emulated, CuPy replaced by NumPy): a selection of the gpu-marked tests of test_gpu.py and test_vrp_gpu.py,
small, so that the kernels' logic (indexing, reductions, the moves they apply, device-clock stops) is
checked on every machine; the gpu-marked tests run the same and more on a real GPU. Skipped without g++."""
from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest

from gpuroute import config

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the CUDA emulator needs g++")


def sibling(name):
    spec = importlib.util.spec_from_file_location(f"_emu_{name}", Path(__file__).with_name(f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def emulated(monkeypatch):
    emu = sibling("cuda_emu")
    emu.install(monkeypatch)
    for k in ("TOUR_GPU_THREADS", "TOUR_GPU_CAND_THREADS", "TOUR_VRP_GPU_THREADS"):
        monkeypatch.setattr(config, k, 64)
    monkeypatch.setattr(config, "TOUR_GPU_EVAL_MAX_BLOCKS", 2)
    return monkeypatch


def test_vrp_best_move_equals_cpu(emulated):
    t = sibling("test_vrp_gpu")
    for seed in range(12):
        for kind in ("ties", "int", "float"):
            c, dem, cap, depot, E, lens, nr = t.instance(2000 + seed, kind)
            g = t.vg.GPUVRPSearch(c, dem, cap, depot, E.shape[0], E.shape[1])
            want = t.cpu_best(c, dem, cap, E, lens, nr)
            got = g.best_move(E, lens, nr)
            assert got == want or (want[1] == -1 and got[1] == -1 and got[0] == np.inf), (seed, kind)


def test_vrp_descent_and_chains_equal_cpu(emulated):
    t = sibling("test_vrp_gpu")
    t.test_gpu_descent_equals_cpu(30, "int")
    t.test_gpu_descent_out_of_time_keeps_a_valid_solution()
    t.test_gpu_chains_equal_a_cpu_replay("int", 600.0)


def test_cvrp_device_gpu(emulated):
    t = sibling("test_vrp_gpu")
    t.test_cvrp_on_the_gpu(1, emulated)


def test_tsp_kernels_equal_cpu(emulated):
    """The kernels issue 23 changed: ls_state / ls_finish (a device-clock stop), ls_set_stop + ls_ils,
    ls_cand_batch (a budget and the complete flags)."""
    t = sibling("test_gpu")
    t.test_descent_equals_cpu_and_ends_at_a_local_minimum(8, "int")
    t.test_ils_round_equals_a_cpu_replay("int", 600.0)
    t.test_ils_round_out_of_time_keeps_local_minima()
    t.test_candidate_descent_equals_cpu(8, 7, "ties", 64)
