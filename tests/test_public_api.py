"""The flat public API (STYLE: scipy-like): every phase object and service a README user meets is an
attribute of ``gpuroute`` after a plain ``import gpuroute``, which never imports CuPy; the module
docstring lists every public name."""
import subprocess
import sys

import gpuroute

README_NAMES = ["ContractionHierarchy", "Overlay", "Partition", "Engine", "tsp", "cvrp", "tours", "accessibility",
                "Profile", "Metric", "datasets", "sssp", "shortest_path", "open_graph"]


def test_readme_names_are_attributes_and_listed():
    for name in README_NAMES:
        assert hasattr(gpuroute, name), f"gpuroute.{name} is missing"
        assert name in gpuroute.__all__, f"{name} is not in gpuroute.__all__"
    for name in gpuroute.__all__:
        assert hasattr(gpuroute, name), f"gpuroute.__all__ names {name}, which is not there"
        if not name.startswith("__"):
            assert name in gpuroute.__doc__, f"the module docstring does not list {name}"
    from gpuroute import ContractionHierarchy, Engine, cvrp, tsp  # noqa: F401  (the README's own imports)
    assert gpuroute.tours.tsp is gpuroute.tsp and gpuroute.tours.cvrp is gpuroute.cvrp


def test_import_does_not_import_cupy():
    code = ("import sys, gpuroute; gpuroute.tours; gpuroute.accessibility; gpuroute.Engine; "
            "gpuroute.ContractionHierarchy; bad = sorted(m for m in ('cupy', 'starlette', 'uvicorn', 'dask') "
            "if m in sys.modules); print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"import gpuroute imported {out}"


def test_names_load_on_first_use_and_sssp_stays_the_function():
    """``import gpuroute`` imports no family until a name is used (issue 20: ``gpuroute serve`` imports
    only what it runs), and importing the subpackage ``gpuroute.sssp`` first never shadows the function."""
    code = ("import sys, gpuroute; print(sorted(m for m in sys.modules if m.startswith('gpuroute.'))); "
            "import gpuroute.sssp.api; from gpuroute import sssp; print(callable(gpuroute.sssp), callable(sssp), "
            "gpuroute.sssp is sssp)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "[]", f"import gpuroute imported {out[0]}"
    assert out[1] == "True True True"
