"""No cached jitted function of gpuroute.tours calls a parallel=True one.

Loading such a caller from numba's on-disk cache can crash the process (numba issue #8578, open: a nested
parallel function inside a cached caller). It happened here: after warm_up() had cached the tour kernels
in one process, a later process that loaded ``local_search`` (which called ``best_move`` ->
``_best_full``, parallel) from the cache died with a segmentation fault. Parallel kernels are called from
Python only."""
from __future__ import annotations

import ast
import importlib
import inspect
import textwrap

import pytest
from numba.core.registry import CPUDispatcher

MODULES = ["gpuroute.tours.local_search", "gpuroute.tours.cvrp"]


def dispatchers(mod):
    return {k: v for k, v in vars(mod).items() if isinstance(v, CPUDispatcher)}


@pytest.mark.parametrize("modname", MODULES)
def test_no_jitted_caller_of_a_parallel_kernel(modname):
    mod = importlib.import_module(modname)
    disp = dispatchers(mod)
    parallel = {k for k, v in disp.items() if v.targetoptions.get("parallel")}
    assert parallel, "expected parallel kernels (candidate rows, the full scans)"
    calls = {}
    for name, d in disp.items():
        tree = ast.parse(textwrap.dedent(inspect.getsource(d.py_func)))
        calls[name] = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}

    def reaches_parallel(name, seen=()):
        for callee in calls.get(name, ()):
            if callee in parallel:
                return callee
            if callee in calls and callee not in seen:
                hit = reaches_parallel(callee, seen + (name,))
                if hit:
                    return hit
        return None

    bad = {name: reaches_parallel(name) for name in disp if reaches_parallel(name)}
    assert not bad, f"jitted functions calling parallel kernels (crash from the cache): {bad}"
